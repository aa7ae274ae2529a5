package schema

import (
	"entgo.io/ent"
	"entgo.io/ent/schema/edge"
	"entgo.io/ent/schema/field"

	"github.com/hotcounter/hotcounter/entcounter"
)

// Author writes posts and has a counter of its own.
type Author struct{ ent.Schema }

// Fields of Author.
func (Author) Fields() []ent.Field {
	return []ent.Field{field.String("name").Default("")}
}

// Mixin of Author.
func (Author) Mixin() []ent.Mixin {
	return []ent.Mixin{entcounter.Counter("followers", entcounter.Slots(4))}
}

// Edges of Author.
func (Author) Edges() []ent.Edge {
	return []ent.Edge{edge.To("posts", Post.Type)}
}

// AuthorFollowersSlot is the slot table of Author.followers.
type AuthorFollowersSlot struct{ ent.Schema }

// Mixin of AuthorFollowersSlot.
func (AuthorFollowersSlot) Mixin() []ent.Mixin {
	return []ent.Mixin{entcounter.SlotsOf(Author.Type, "followers")}
}
