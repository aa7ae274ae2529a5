package schema

import (
	"entgo.io/ent"
	"entgo.io/ent/schema/field"

	"github.com/hotcounter/hotcounter/entcounter"
)

// Tag is upserted by name (the sql/upsert feature) and has both kinds of
// counters.
type Tag struct{ ent.Schema }

// Fields of Tag.
func (Tag) Fields() []ent.Field {
	return []ent.Field{field.String("name").MaxLen(100).Unique()}
}

// Mixin of Tag.
func (Tag) Mixin() []ent.Mixin {
	return []ent.Mixin{
		entcounter.Counter("uses"),
		entcounter.Counter("hits", entcounter.Rollup()),
	}
}

// TagUsesSlot is the slot table of Tag.uses.
type TagUsesSlot struct{ ent.Schema }

// Mixin of TagUsesSlot.
func (TagUsesSlot) Mixin() []ent.Mixin { return []ent.Mixin{entcounter.SlotsOf(Tag.Type, "uses")} }

// TagHitsSlot is the slot table of Tag.hits.
type TagHitsSlot struct{ ent.Schema }

// Mixin of TagHitsSlot.
func (TagHitsSlot) Mixin() []ent.Mixin { return []ent.Mixin{entcounter.SlotsOf(Tag.Type, "hits")} }
