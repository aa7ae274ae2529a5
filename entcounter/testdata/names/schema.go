// Package schema declares counters on types whose names pluralize
// irregularly and on one whose id comes from a mixin.
package schema

import (
	"entgo.io/ent"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/mixin"

	"github.com/hotcounter/hotcounter/entcounter"
)

type Selfie struct{ ent.Schema }

func (Selfie) Mixin() []ent.Mixin { return []ent.Mixin{entcounter.Counter("likes")} }

type SelfieLikesSlot struct{ ent.Schema }

func (SelfieLikesSlot) Mixin() []ent.Mixin {
	return []ent.Mixin{entcounter.SlotsOf(Selfie.Type, "likes")}
}

type Media struct{ ent.Schema }

func (Media) Mixin() []ent.Mixin { return []ent.Mixin{entcounter.Counter("likes")} }

type MediaLikesSlot struct{ ent.Schema }

func (MediaLikesSlot) Mixin() []ent.Mixin {
	return []ent.Mixin{entcounter.SlotsOf(Media.Type, "likes")}
}

// stringID declares a string id in a mixin.
type stringID struct{ mixin.Schema }

func (stringID) Fields() []ent.Field { return []ent.Field{field.String("id")} }

type Badge struct{ ent.Schema }

func (Badge) Mixin() []ent.Mixin {
	return []ent.Mixin{stringID{}, entcounter.Counter("awarded")}
}

type BadgeAwardedSlot struct{ ent.Schema }

func (BadgeAwardedSlot) Mixin() []ent.Mixin {
	return []ent.Mixin{entcounter.SlotsOf(Badge.Type, "awarded")}
}
