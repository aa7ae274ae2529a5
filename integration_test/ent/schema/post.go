// Package schema holds the ent schemas of the integration tests. They map
// to the same tables as integration_test's GORM models.
package schema

import (
	"entgo.io/ent"
	"entgo.io/ent/schema/edge"
	"entgo.io/ent/schema/field"

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

// Mixin of Post: its counters.
func (Post) Mixin() []ent.Mixin {
	return []ent.Mixin{
		entcounter.Counter("likes"),
		entcounter.Counter("views", entcounter.Slots(64), entcounter.Rollup()),
	}
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
