package schema

import (
	"entgo.io/ent"
	"entgo.io/ent/schema/edge"
	"entgo.io/ent/schema/field"

	"github.com/hotcounter/hotcounter/entcounter"
)

// Reel is the version of the application that counts only a reel's
// remarks of the kind (remarked, the version before, counted them all):
// the same count under another condition.
type Reel struct{ ent.Schema }

// Fields of Reel.
func (Reel) Fields() []ent.Field {
	return []ent.Field{field.String("title").Default("")}
}

// Edges of Reel.
func (Reel) Edges() []ent.Edge { return []ent.Edge{edge.To("remarks", Remark.Type)} }

// Mixin of Reel.
func (Reel) Mixin() []ent.Mixin {
	return []ent.Mixin{entcounter.Counter("remark_count", entcounter.Counts("remarks"), entcounter.Where("kind = true"))}
}

// Remark is a remark on a reel.
type Remark struct{ ent.Schema }

// Fields of Remark.
func (Remark) Fields() []ent.Field {
	return []ent.Field{field.Int("reel_id"), field.Bool("kind").Default(false)}
}

// Edges of Remark.
func (Remark) Edges() []ent.Edge {
	return []ent.Edge{edge.From("reel", Reel.Type).Ref("remarks").Field("reel_id").Unique().Required()}
}

// ReelRemarkCountSlot is the slot table of Reel.remark_count.
type ReelRemarkCountSlot struct{ ent.Schema }

// Mixin of ReelRemarkCountSlot.
func (ReelRemarkCountSlot) Mixin() []ent.Mixin {
	return []ent.Mixin{entcounter.SlotsOf(Reel.Type, "remark_count")}
}
