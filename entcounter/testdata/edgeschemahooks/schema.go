// Package schema declares a count kept by hooks through an edge schema.
package schema

import (
	"entgo.io/ent"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/edge"
	"entgo.io/ent/schema/field"

	"github.com/hotcounter/hotcounter/entcounter"
)

type Post struct{ ent.Schema }

func (Post) Edges() []ent.Edge {
	return []ent.Edge{edge.To("liked_by", User.Type).Through("likes", Like.Type)}
}

func (Post) Mixin() []ent.Mixin {
	return []ent.Mixin{
		entcounter.Counter("like_count", entcounter.Counts("liked_by"), entcounter.ByHooks()),
		entcounter.Counter("likes_seen", entcounter.Counts("likes"), entcounter.ByHooks()),
	}
}

type User struct{ ent.Schema }

func (User) Edges() []ent.Edge {
	return []ent.Edge{edge.From("liked", Post.Type).Ref("liked_by").Through("likes", Like.Type)}
}

type Like struct{ ent.Schema }

func (Like) Annotations() []schema.Annotation {
	return []schema.Annotation{field.ID("post_id", "user_id")}
}

func (Like) Fields() []ent.Field { return []ent.Field{field.Int("post_id"), field.Int("user_id")} }

func (Like) Edges() []ent.Edge {
	return []ent.Edge{
		edge.To("post", Post.Type).Unique().Required().Field("post_id"),
		edge.To("user", User.Type).Unique().Required().Field("user_id"),
	}
}
