package schema

import (
	"entgo.io/ent"
	"entgo.io/ent/schema/edge"
	"entgo.io/ent/schema/field"
)

// Reel is the version of the application before its remarks are counted:
// a reel and its remarks, no count.
type Reel struct{ ent.Schema }

// Fields of Reel.
func (Reel) Fields() []ent.Field {
	return []ent.Field{field.String("title").Default("")}
}

// Edges of Reel.
func (Reel) Edges() []ent.Edge { return []ent.Edge{edge.To("remarks", Remark.Type)} }

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
