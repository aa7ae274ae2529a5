package schema

import (
	"entgo.io/ent"
	"entgo.io/ent/schema/field"

	"github.com/hotcounter/hotcounter/entcounter"
)

// Reel declares Counter("plays"), and its code is generated without
// entcounter's extension: every operation on it must say so.
type Reel struct{ ent.Schema }

// Fields of Reel.
func (Reel) Fields() []ent.Field {
	return []ent.Field{field.String("title").Default("")}
}

// Mixin of Reel.
func (Reel) Mixin() []ent.Mixin {
	return []ent.Mixin{entcounter.Counter("plays")}
}

// ReelPlaysSlot is the slot table of Reel.plays.
type ReelPlaysSlot struct{ ent.Schema }

// Mixin of ReelPlaysSlot.
func (ReelPlaysSlot) Mixin() []ent.Mixin { return []ent.Mixin{entcounter.SlotsOf(Reel.Type, "plays")} }
