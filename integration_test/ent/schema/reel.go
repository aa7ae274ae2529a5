package schema

import (
	"entgo.io/ent"
	"entgo.io/ent/schema/field"

	"github.com/hotcounter/hotcounter/entcounter"
)

// Reel counts plays over slots=auto: one slot row per reel until its
// writers contend.
type Reel struct{ ent.Schema }

// Fields of Reel.
func (Reel) Fields() []ent.Field {
	return []ent.Field{field.String("title").Default("")}
}

// Mixin of Reel.
func (Reel) Mixin() []ent.Mixin {
	return []ent.Mixin{entcounter.Counter("plays", entcounter.AutoSlots(0))}
}

// ReelPlaysSlot is the slot table of Reel.plays.
type ReelPlaysSlot struct{ ent.Schema }

// Mixin of ReelPlaysSlot.
func (ReelPlaysSlot) Mixin() []ent.Mixin { return []ent.Mixin{entcounter.SlotsOf(Reel.Type, "plays")} }
