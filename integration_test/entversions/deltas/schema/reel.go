package schema

import (
	"entgo.io/ent"
	"entgo.io/ent/schema/field"

	"github.com/hotcounter/hotcounter/entcounter"
)

// Reel is one version of an application's reels: its plays are counted
// with Counter("plays", entcounter.Append()).
type Reel struct{ ent.Schema }

// Fields of Reel.
func (Reel) Fields() []ent.Field {
	return []ent.Field{field.String("title").Default("")}
}

// Mixin of Reel.
func (Reel) Mixin() []ent.Mixin {
	return []ent.Mixin{entcounter.Counter("plays", entcounter.Append())}
}

// ReelPlaysDelta is the delta table of Reel.plays.
type ReelPlaysDelta struct{ ent.Schema }

// Mixin of ReelPlaysDelta.
func (ReelPlaysDelta) Mixin() []ent.Mixin {
	return []ent.Mixin{entcounter.DeltasOf(Reel.Type, "plays")}
}
