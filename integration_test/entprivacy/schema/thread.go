package schema

import (
	"entgo.io/ent"
	"entgo.io/ent/schema/edge"
	"entgo.io/ent/schema/field"

	"github.com/hotcounter/hotcounter/entcounter"
	"github.com/hotcounter/hotcounter/integration_test/entprivacy/schema/mixin"
)

// Thread counts its replies twice, by triggers and by hooks; replies are
// deleted softly (ent's documented mixin), so neither count includes a
// soft-deleted reply.
type Thread struct{ ent.Schema }

// Edges of Thread.
func (Thread) Edges() []ent.Edge { return []ent.Edge{edge.To("replies", Reply.Type)} }

// Mixin of Thread.
func (Thread) Mixin() []ent.Mixin {
	return []ent.Mixin{
		entcounter.Counter("reply_count", entcounter.Counts("replies")),
		entcounter.Counter("hooked_reply_count", entcounter.Counts("replies"), entcounter.ByHooks()),
	}
}

// Reply is a reply to a thread, deleted softly.
type Reply struct{ ent.Schema }

// Fields of Reply.
func (Reply) Fields() []ent.Field {
	return []ent.Field{field.Int("thread_id"), field.String("body").Default("")}
}

// Edges of Reply.
func (Reply) Edges() []ent.Edge {
	return []ent.Edge{
		edge.From("thread", Thread.Type).Ref("replies").Field("thread_id").Unique().Required(),
		edge.From("labels", Label.Type).Ref("replies"),
	}
}

// Mixin of Reply: soft delete, and a count of its labels kept by hooks
// through the join table.
func (Reply) Mixin() []ent.Mixin {
	return []ent.Mixin{
		mixin.SoftDeleteMixin{},
		entcounter.Counter("hooked_label_count", entcounter.Counts("labels"), entcounter.ByHooks()),
	}
}

// Label labels replies (many to many) and counts them by triggers and by
// hooks. A soft delete of a reply keeps its join rows, so it stays
// counted on both sides and a restore finds its labels.
type Label struct{ ent.Schema }

// Edges of Label.
func (Label) Edges() []ent.Edge { return []ent.Edge{edge.To("replies", Reply.Type)} }

// Mixin of Label.
func (Label) Mixin() []ent.Mixin {
	return []ent.Mixin{
		entcounter.Counter("reply_count", entcounter.Counts("replies")),
		entcounter.Counter("hooked_reply_count", entcounter.Counts("replies"), entcounter.ByHooks()),
	}
}
