package schema

import (
	"entgo.io/ent"
	"entgo.io/ent/schema/field"

	"github.com/hotcounter/hotcounter/entcounter"
)

// Reel is one version of an application's reels: its plays are counted
// with Counter("plays", entcounter.Slots(64)).
type Reel struct{ ent.Schema }

// Fields of Reel.
func (Reel) Fields() []ent.Field {
	return []ent.Field{field.String("title").Default("")}
}

// Mixin of Reel.
func (Reel) Mixin() []ent.Mixin {
	return []ent.Mixin{entcounter.Counter("plays", entcounter.Slots(64))}
}

// ReelPlaysSlot is the slot table of Reel.plays.
type ReelPlaysSlot struct{ ent.Schema }

// Mixin of ReelPlaysSlot.
func (ReelPlaysSlot) Mixin() []ent.Mixin { return []ent.Mixin{entcounter.SlotsOf(Reel.Type, "plays")} }
