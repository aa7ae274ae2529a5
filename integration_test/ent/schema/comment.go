package schema

import (
	"entgo.io/ent"
	"entgo.io/ent/schema/edge"
	"entgo.io/ent/schema/field"

	"github.com/hotcounter/hotcounter/entcounter"
)

// Comment belongs to a post and has a counter of its own.
type Comment struct{ ent.Schema }

// Fields of Comment.
func (Comment) Fields() []ent.Field {
	return []ent.Field{
		field.Int("post_id"),
		field.String("body").Default(""),
	}
}

// Mixin of Comment.
func (Comment) Mixin() []ent.Mixin {
	return []ent.Mixin{entcounter.Counter("upvote", entcounter.Slots(8))}
}

// Edges of Comment.
func (Comment) Edges() []ent.Edge {
	return []ent.Edge{
		edge.From("post", Post.Type).Ref("comments").Field("post_id").Unique().Required(),
	}
}

// CommentUpvoteSlot is the slot table of Comment.upvote.
type CommentUpvoteSlot struct{ ent.Schema }

// Mixin of CommentUpvoteSlot.
func (CommentUpvoteSlot) Mixin() []ent.Mixin {
	return []ent.Mixin{entcounter.SlotsOf(Comment.Type, "upvote")}
}
