// Package schema declares a count through an M2M edge kept by hooks.
package schema

import (
	"entgo.io/ent"
	"entgo.io/ent/schema/edge"

	"github.com/hotcounter/hotcounter/entcounter"
)

type Post struct{ ent.Schema }

func (Post) Mixin() []ent.Mixin {
	return []ent.Mixin{entcounter.Counter("tag_count", entcounter.Counts("tags"), entcounter.ByHooks())}
}

func (Post) Edges() []ent.Edge { return []ent.Edge{edge.To("tags", Tag.Type)} }

type Tag struct{ ent.Schema }

func (Tag) Edges() []ent.Edge { return []ent.Edge{edge.From("posts", Post.Type).Ref("tags")} }

type PostTagCountSlot struct{ ent.Schema }

func (PostTagCountSlot) Mixin() []ent.Mixin {
	return []ent.Mixin{entcounter.SlotsOf(Post.Type, "tag_count")}
}
