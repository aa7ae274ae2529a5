package schema

import (
	"entgo.io/ent"
	"entgo.io/ent/schema/edge"
	"entgo.io/ent/schema/field"

	"github.com/hotcounter/hotcounter/entcounter"
)

// HookedConversation and HookedLabel are Conversation and Label with their
// counts kept by ent hooks (ByHooks) instead of triggers: rows of the join
// table hooked_conversation_labels. Their slot table schemas are left to
// the extension, which generates them.
type HookedConversation struct{ ent.Schema }

// Fields of HookedConversation.
func (HookedConversation) Fields() []ent.Field {
	return []ent.Field{field.String("subject").Default("")}
}

// Mixin of HookedConversation.
func (HookedConversation) Mixin() []ent.Mixin {
	return []ent.Mixin{entcounter.Counter("label_count", entcounter.Counts("labels"), entcounter.ByHooks())}
}

// Edges of HookedConversation.
func (HookedConversation) Edges() []ent.Edge {
	return []ent.Edge{edge.To("labels", HookedLabel.Type)}
}

// HookedLabel is the shared side.
type HookedLabel struct{ ent.Schema }

// Fields of HookedLabel.
func (HookedLabel) Fields() []ent.Field {
	return []ent.Field{field.String("name").Default("")}
}

// Mixin of HookedLabel.
func (HookedLabel) Mixin() []ent.Mixin {
	return []ent.Mixin{entcounter.Counter("conversation_count", entcounter.Counts("conversations"), entcounter.ByHooks())}
}

// Edges of HookedLabel.
func (HookedLabel) Edges() []ent.Edge {
	return []ent.Edge{edge.From("conversations", HookedConversation.Type).Ref("labels")}
}
