// Package schema declares a slot table for a field that is no counter.
package schema

import (
	"entgo.io/ent"
	"entgo.io/ent/schema/field"

	"github.com/hotcounter/hotcounter/entcounter"
)

type Post struct{ ent.Schema }

func (Post) Fields() []ent.Field { return []ent.Field{field.Int64("likes")} }

type PostLikesSlot struct{ ent.Schema }

func (PostLikesSlot) Mixin() []ent.Mixin { return []ent.Mixin{entcounter.SlotsOf(Post.Type, "likes")} }
