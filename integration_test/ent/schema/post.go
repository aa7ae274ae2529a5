// Package schema holds the ent schemas of the integration tests. They map
// to the same tables as integration_test's GORM models.
package schema

import (
	"context"

	"entgo.io/ent"
	"entgo.io/ent/dialect/sql"
	"entgo.io/ent/schema/edge"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/mixin"

	"github.com/hotcounter/hotcounter/entcounter"
)

// Post has a sum counter (likes) and a rollup counter (views).
type Post struct{ ent.Schema }

// Fields of Post.
func (Post) Fields() []ent.Field {
	return []ent.Field{
		field.String("title").Default(""),
		field.Int("author_id").Optional().Nillable(),
	}
}

// Mixin of Post: its counters, and between them a mixin whose hook narrows
// an update when the context asks (Narrowed), as a tenant's or a scope's
// mixin adds its predicate: the views counter's hook then sees predicates
// that the likes counter's did not.
func (Post) Mixin() []ent.Mixin {
	return []ent.Mixin{
		entcounter.Counter("likes"),
		narrowing{},
		entcounter.Counter("views", entcounter.Slots(64), entcounter.Rollup()),
	}
}

// narrowing adds to an update the predicate that Narrowed put in its
// context; without one it does nothing.
type narrowing struct{ mixin.Schema }

type narrowedKey struct{}

// Narrowed returns ctx with p, a predicate that the Post mixin between its
// two counters adds to the updates made under it.
func Narrowed(ctx context.Context, p func(*sql.Selector)) context.Context {
	return context.WithValue(ctx, narrowedKey{}, p)
}

// Hooks of narrowing.
func (narrowing) Hooks() []ent.Hook {
	return []ent.Hook{func(next ent.Mutator) ent.Mutator {
		return ent.MutateFunc(func(ctx context.Context, m ent.Mutation) (ent.Value, error) {
			p, ok := ctx.Value(narrowedKey{}).(func(*sql.Selector))
			w, where := m.(interface{ WhereP(...func(*sql.Selector)) })
			if ok && where && m.Op().Is(ent.OpUpdate|ent.OpUpdateOne) {
				w.WhereP(p)
			}
			return next.Mutate(ctx, m)
		})
	}}
}

// Edges of Post.
func (Post) Edges() []ent.Edge {
	return []ent.Edge{
		edge.From("author", Author.Type).Ref("posts").Field("author_id").Unique(),
		edge.To("comments", Comment.Type),
	}
}

// PostLikesSlot is the slot table of Post.likes.
type PostLikesSlot struct{ ent.Schema }

// Mixin of PostLikesSlot.
func (PostLikesSlot) Mixin() []ent.Mixin { return []ent.Mixin{entcounter.SlotsOf(Post.Type, "likes")} }

// PostViewsSlot is the slot table of Post.views.
type PostViewsSlot struct{ ent.Schema }

// Mixin of PostViewsSlot.
func (PostViewsSlot) Mixin() []ent.Mixin { return []ent.Mixin{entcounter.SlotsOf(Post.Type, "views")} }
