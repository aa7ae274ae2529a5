// Package schema declares a counter with a nil option.
package schema

import (
	"entgo.io/ent"

	"github.com/hotcounter/hotcounter/entcounter"
)

var unset entcounter.Option

type Post struct{ ent.Schema }

func (Post) Mixin() []ent.Mixin {
	return []ent.Mixin{entcounter.Counter("likes", entcounter.Slots(4), unset)}
}

type PostLikesSlot struct{ ent.Schema }

func (PostLikesSlot) Mixin() []ent.Mixin { return []ent.Mixin{entcounter.SlotsOf(Post.Type, "likes")} }
