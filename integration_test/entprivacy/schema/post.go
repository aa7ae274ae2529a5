// Package schema holds the entprivacy schemas.
package schema

import (
	"context"

	"entgo.io/ent"
	"entgo.io/ent/schema/field"

	"github.com/hotcounter/hotcounter/entcounter"
	"github.com/hotcounter/hotcounter/integration_test/entprivacy/privacy"
	"github.com/hotcounter/hotcounter/integration_test/entprivacy/schema/mixin"
)

// Post is a post whose likes (sum) and views (rollup) are counters, that
// readers may not change and that is deleted softly.
type Post struct{ ent.Schema }

// Fields of Post.
func (Post) Fields() []ent.Field {
	return []ent.Field{field.String("title").Unique()}
}

// Mixin of Post: soft delete first, as the documentation lists it, then
// the counters.
func (Post) Mixin() []ent.Mixin {
	return []ent.Mixin{
		mixin.SoftDeleteMixin{},
		entcounter.Counter("likes"),
		entcounter.Counter("views", entcounter.Rollup()),
	}
}

// Policy of Post: a reader may read, not write.
func (Post) Policy() ent.Policy {
	return privacy.Policy{
		Mutation: privacy.MutationPolicy{
			privacy.MutationRuleFunc(func(ctx context.Context, m ent.Mutation) error {
				if IsReader(ctx) {
					return privacy.Denyf("a reader may not change a %s", m.Type())
				}
				return privacy.Skip
			}),
			privacy.AlwaysAllowRule(),
		},
		Query: privacy.QueryPolicy{privacy.AlwaysAllowRule()},
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

type readerKey struct{}

// AsReader returns a context whose viewer may read, not write.
func AsReader(ctx context.Context) context.Context { return context.WithValue(ctx, readerKey{}, true) }

// IsReader reports whether the context's viewer is a reader.
func IsReader(ctx context.Context) bool { r, _ := ctx.Value(readerKey{}).(bool); return r }
