// Package schema declares an append counter whose table is declared with
// SlotsOf instead of DeltasOf.
package schema

import (
	"entgo.io/ent"

	"github.com/hotcounter/hotcounter/entcounter"
)

type Story struct{ ent.Schema }

func (Story) Mixin() []ent.Mixin {
	return []ent.Mixin{entcounter.Counter("claps", entcounter.Append())}
}

type StoryClapsSlot struct{ ent.Schema }

func (StoryClapsSlot) Mixin() []ent.Mixin {
	return []ent.Mixin{entcounter.SlotsOf(Story.Type, "claps")}
}
