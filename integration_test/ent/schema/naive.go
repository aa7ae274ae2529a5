package schema

import (
	"entgo.io/ent"
	"entgo.io/ent/schema/field"

	"github.com/hotcounter/hotcounter/entcounter"
)

// NaivePost is the benchmarks' baseline: a plain column that AddLikes
// increments in place (the naive_posts table of the GORM benchmarks).
type NaivePost struct{ ent.Schema }

// Fields of NaivePost.
func (NaivePost) Fields() []ent.Field {
	return []ent.Field{field.Int64("likes").Default(0)}
}

// SkipPost takes the lowest free of its 64 pre-created slots (the
// skip_posts table of the GORM benchmarks).
type SkipPost struct{ ent.Schema }

// Mixin of SkipPost.
func (SkipPost) Mixin() []ent.Mixin {
	return []ent.Mixin{entcounter.Counter("likes", entcounter.Slots(64), entcounter.Precreate(), entcounter.SkipLocked())}
}

// SkipPostLikesSlot is the slot table of SkipPost.likes.
type SkipPostLikesSlot struct{ ent.Schema }

// Mixin of SkipPostLikesSlot.
func (SkipPostLikesSlot) Mixin() []ent.Mixin {
	return []ent.Mixin{entcounter.SlotsOf(SkipPost.Type, "likes")}
}
