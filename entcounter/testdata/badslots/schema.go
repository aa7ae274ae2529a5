// Package schema declares a counter with an impossible slot count.
package schema

import (
	"entgo.io/ent"

	"github.com/hotcounter/hotcounter/entcounter"
)

type Post struct{ ent.Schema }

func (Post) Mixin() []ent.Mixin { return []ent.Mixin{entcounter.Counter("likes", entcounter.Slots(0))} }

type PostLikesSlot struct{ ent.Schema }

func (PostLikesSlot) Mixin() []ent.Mixin { return []ent.Mixin{entcounter.SlotsOf(Post.Type, "likes")} }
