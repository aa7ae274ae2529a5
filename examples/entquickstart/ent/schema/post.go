// Package schema holds the example's ent schema: a post with two counters.
package schema

import (
	"entgo.io/ent"
	"entgo.io/ent/dialect/entsql"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/field"

	"github.com/hotcounter/hotcounter/entcounter"
)

// Post has two counters. likes: 16 slots, sum mode (no column on the posts
// table; every load sums the slots). views: 64 slots, rollup mode (a column
// caches the total; a rollup pass folds the slots into it).
type Post struct{ ent.Schema }

// Fields of Post.
func (Post) Fields() []ent.Field {
	return []ent.Field{field.String("title")}
}

// Mixin of Post: its counters.
func (Post) Mixin() []ent.Mixin {
	return []ent.Mixin{
		entcounter.Counter("likes"),
		entcounter.Counter("views", entcounter.Slots(64), entcounter.Rollup()),
	}
}

// Annotations of Post: tables of the example's own, so that -dsn can point
// at any database (entquickstart_posts, entquickstart_post_likes_slots,
// entquickstart_post_views_slots).
func (Post) Annotations() []schema.Annotation {
	return []schema.Annotation{entsql.Table("entquickstart_posts")}
}

// PostLikesSlot is the slot table of Post.likes: one line per counter.
type PostLikesSlot struct{ ent.Schema }

// Mixin of PostLikesSlot.
func (PostLikesSlot) Mixin() []ent.Mixin { return []ent.Mixin{entcounter.SlotsOf(Post.Type, "likes")} }

// PostViewsSlot is the slot table of Post.views.
type PostViewsSlot struct{ ent.Schema }

// Mixin of PostViewsSlot.
func (PostViewsSlot) Mixin() []ent.Mixin { return []ent.Mixin{entcounter.SlotsOf(Post.Type, "views")} }
