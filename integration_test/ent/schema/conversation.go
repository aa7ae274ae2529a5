package schema

import (
	"entgo.io/ent"
	"entgo.io/ent/schema/edge"
	"entgo.io/ent/schema/field"

	"github.com/hotcounter/hotcounter/entcounter"
)

// Conversation and Label count each other through their M2M edge, as a
// support desk counts the labels of a conversation and the conversations
// of a label: rows of the join table conversation_labels, kept by
// triggers.
type Conversation struct{ ent.Schema }

// Fields of Conversation.
func (Conversation) Fields() []ent.Field {
	return []ent.Field{field.String("subject").Default("")}
}

// Mixin of Conversation.
func (Conversation) Mixin() []ent.Mixin {
	return []ent.Mixin{entcounter.Counter("label_count", entcounter.Counts("labels"))}
}

// Edges of Conversation.
func (Conversation) Edges() []ent.Edge {
	return []ent.Edge{edge.To("labels", Label.Type)}
}

// Label is the shared side: a popular label is attached to many
// conversations at once.
type Label struct{ ent.Schema }

// Fields of Label.
func (Label) Fields() []ent.Field {
	return []ent.Field{field.String("name").Default("")}
}

// Mixin of Label.
func (Label) Mixin() []ent.Mixin {
	return []ent.Mixin{entcounter.Counter("conversation_count", entcounter.Counts("conversations"))}
}

// Edges of Label.
func (Label) Edges() []ent.Edge {
	return []ent.Edge{edge.From("conversations", Conversation.Type).Ref("labels")}
}

// ConversationLabelCountSlot is the slot table of Conversation.label_count.
type ConversationLabelCountSlot struct{ ent.Schema }

// Mixin of ConversationLabelCountSlot.
func (ConversationLabelCountSlot) Mixin() []ent.Mixin {
	return []ent.Mixin{entcounter.SlotsOf(Conversation.Type, "label_count")}
}

// LabelConversationCountSlot is the slot table of Label.conversation_count.
type LabelConversationCountSlot struct{ ent.Schema }

// Mixin of LabelConversationCountSlot.
func (LabelConversationCountSlot) Mixin() []ent.Mixin {
	return []ent.Mixin{entcounter.SlotsOf(Label.Type, "conversation_count")}
}
