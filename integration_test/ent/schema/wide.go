package schema

import (
	"entgo.io/ent"
	"entgo.io/ent/dialect"
	"entgo.io/ent/schema/edge"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/index"
	"entgo.io/ent/schema/mixin"

	"github.com/hotcounter/hotcounter/entcounter"
)

// Children with every kind of column a real table has (long text, JSON,
// binary, an enum, decimals, microsecond times, all nullable), counted by
// triggers (Forum's topics) and by hooks (Desk's). A count must read
// only the columns it needs: MariaDB crashed on triggers that copied such a
// row. ent has no soft delete of its own: the conditions name deleted_at.

// wideColumns are the columns of Topic.
type wideColumns struct{ mixin.Schema }

// Fields of wideColumns.
func (wideColumns) Fields() []ent.Field {
	return []ent.Field{
		field.Enum("kind").Values("a", "b").Optional().Nillable(),
		field.Text("note").Optional().Nillable(),
		field.Text("body").Optional().Nillable(),
		field.JSON("meta", map[string]any{}).Optional(),
		field.Bytes("data").Optional().Nillable(),
		field.Float("price").Optional().Nillable().
			SchemaType(map[string]string{dialect.MySQL: "decimal(20,6)", dialect.Postgres: "numeric(20,6)"}),
		field.Time("at").Optional().Nillable().
			SchemaType(map[string]string{dialect.MySQL: "datetime(6)", dialect.Postgres: "timestamptz(6)"}),
		field.Time("deleted_at").Optional().Nillable(),
	}
}

// What the counts of Forum and Desk count: every child not deleted, and
// those of kind b with a note.
const (
	wideAll  = "deleted_at IS NULL"
	wideCond = "kind = 'b' AND note <> '' AND deleted_at IS NULL"
)

// Forum counts its topics with triggers.
type Forum struct{ ent.Schema }

// Fields of Forum.
func (Forum) Fields() []ent.Field { return []ent.Field{field.String("name").Default("")} }

// Mixin of Forum.
func (Forum) Mixin() []ent.Mixin {
	return []ent.Mixin{
		entcounter.Counter("topic_count", entcounter.Counts("topics"), entcounter.Where(wideAll)),
		entcounter.Counter("b_count", entcounter.Slots(4), entcounter.Counts("topics"), entcounter.Where(wideCond)),
	}
}

// Edges of Forum.
func (Forum) Edges() []ent.Edge { return []ent.Edge{edge.To("topics", Topic.Type)} }

// Topic is the child row that forums (by triggers) and desks (by hooks)
// count.
type Topic struct{ ent.Schema }

// Mixin of Topic.
func (Topic) Mixin() []ent.Mixin { return []ent.Mixin{wideColumns{}} }

// Fields of Topic.
func (Topic) Fields() []ent.Field {
	return []ent.Field{field.Int("forum_id").Optional().Nillable(), field.Int("desk_id").Optional().Nillable()}
}

// Edges of Topic.
func (Topic) Edges() []ent.Edge {
	return []ent.Edge{
		edge.From("forum", Forum.Type).Ref("topics").Field("forum_id").Unique(),
		edge.From("desk", Desk.Type).Ref("topics").Field("desk_id").Unique(),
	}
}

// Indexes of Topic.
func (Topic) Indexes() []ent.Index {
	return []ent.Index{index.Fields("forum_id"), index.Fields("desk_id")}
}

// ForumTopicCountSlot is the slot table of Forum.topic_count.
type ForumTopicCountSlot struct{ ent.Schema }

// Mixin of ForumTopicCountSlot.
func (ForumTopicCountSlot) Mixin() []ent.Mixin {
	return []ent.Mixin{entcounter.SlotsOf(Forum.Type, "topic_count")}
}

// ForumBCountSlot is the slot table of Forum.b_count.
type ForumBCountSlot struct{ ent.Schema }

// Mixin of ForumBCountSlot.
func (ForumBCountSlot) Mixin() []ent.Mixin {
	return []ent.Mixin{entcounter.SlotsOf(Forum.Type, "b_count")}
}

// Desk counts the same topics with ent hooks instead of triggers.
type Desk struct{ ent.Schema }

// Fields of Desk.
func (Desk) Fields() []ent.Field { return []ent.Field{field.String("name").Default("")} }

// Mixin of Desk.
func (Desk) Mixin() []ent.Mixin {
	return []ent.Mixin{
		entcounter.Counter("topic_count", entcounter.Counts("topics"), entcounter.Where(wideAll), entcounter.ByHooks()),
		entcounter.Counter("b_count", entcounter.Slots(4), entcounter.Counts("topics"), entcounter.Where(wideCond), entcounter.ByHooks()),
	}
}

// Edges of Desk.
func (Desk) Edges() []ent.Edge { return []ent.Edge{edge.To("topics", Topic.Type)} }

// DeskTopicCountSlot is the slot table of Desk.topic_count.
type DeskTopicCountSlot struct{ ent.Schema }

// Mixin of DeskTopicCountSlot.
func (DeskTopicCountSlot) Mixin() []ent.Mixin {
	return []ent.Mixin{entcounter.SlotsOf(Desk.Type, "topic_count")}
}

// DeskBCountSlot is the slot table of Desk.b_count.
type DeskBCountSlot struct{ ent.Schema }

// Mixin of DeskBCountSlot.
func (DeskBCountSlot) Mixin() []ent.Mixin {
	return []ent.Mixin{entcounter.SlotsOf(Desk.Type, "b_count")}
}
