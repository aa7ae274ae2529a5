// Package schema declares a count through a bidirectional M2M edge kept
// by hooks, which triggers keep instead.
package schema

import (
	"entgo.io/ent"
	"entgo.io/ent/schema/edge"

	"github.com/hotcounter/hotcounter/entcounter"
)

type User struct{ ent.Schema }

func (User) Mixin() []ent.Mixin {
	return []ent.Mixin{entcounter.Counter("friend_count", entcounter.Counts("friends"), entcounter.ByHooks())}
}

func (User) Edges() []ent.Edge { return []ent.Edge{edge.To("friends", User.Type)} }

type UserFriendCountSlot struct{ ent.Schema }

func (UserFriendCountSlot) Mixin() []ent.Mixin {
	return []ent.Mixin{entcounter.SlotsOf(User.Type, "friend_count")}
}
