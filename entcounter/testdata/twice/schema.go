// Package schema declares a counter with contradictory options.
package schema

import (
	"entgo.io/ent"

	"github.com/hotcounter/hotcounter/entcounter"
)

type Post struct{ ent.Schema }

func (Post) Mixin() []ent.Mixin {
	return []ent.Mixin{
		entcounter.Counter("likes", entcounter.Slots(4), entcounter.Slots(8)),
		entcounter.Counter("views", entcounter.AutoSlots(16), entcounter.Slots(4)),
		entcounter.Counter("shares", entcounter.Precreate(), entcounter.NoPrecreate()),
	}
}

type PostLikesSlot struct{ ent.Schema }

func (PostLikesSlot) Mixin() []ent.Mixin { return []ent.Mixin{entcounter.SlotsOf(Post.Type, "likes")} }

type PostViewsSlot struct{ ent.Schema }

func (PostViewsSlot) Mixin() []ent.Mixin { return []ent.Mixin{entcounter.SlotsOf(Post.Type, "views")} }

type PostSharesSlot struct{ ent.Schema }

func (PostSharesSlot) Mixin() []ent.Mixin {
	return []ent.Mixin{entcounter.SlotsOf(Post.Type, "shares")}
}
