// Package schema declares a slot table whose owner is not a schema's
// Type method.
package schema

import (
	"entgo.io/ent"

	"github.com/hotcounter/hotcounter/entcounter"
)

type Post struct{ ent.Schema }

func (Post) Mixin() []ent.Mixin { return []ent.Mixin{entcounter.Counter("likes")} }

type PostLikesSlot struct{ ent.Schema }

func (PostLikesSlot) Mixin() []ent.Mixin { return []ent.Mixin{entcounter.SlotsOf("Post", "likes")} }
