package schema

import (
	"entgo.io/ent"
	"entgo.io/ent/schema/field"

	"github.com/hotcounter/hotcounter/entcounter"
)

// Clip counts likes over a column that an earlier version of the
// application kept by hand (AdoptColumn): the column stays in the schema
// while it holds counts.
type Clip struct{ ent.Schema }

// Fields of Clip.
func (Clip) Fields() []ent.Field {
	return []ent.Field{field.String("title").Default("")}
}

// Mixin of Clip.
func (Clip) Mixin() []ent.Mixin {
	return []ent.Mixin{entcounter.Counter("likes", entcounter.AdoptColumn())}
}

// ClipLikesSlot is the slot table of Clip.likes.
type ClipLikesSlot struct{ ent.Schema }

// Mixin of ClipLikesSlot.
func (ClipLikesSlot) Mixin() []ent.Mixin { return []ent.Mixin{entcounter.SlotsOf(Clip.Type, "likes")} }
