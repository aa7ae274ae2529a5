package schema

import (
	"entgo.io/ent"
	"entgo.io/ent/schema/field"
)

// Reel is the version of the application in which plays is no longer a
// counter: a plain column.
type Reel struct{ ent.Schema }

// Fields of Reel.
func (Reel) Fields() []ent.Field {
	return []ent.Field{field.String("title").Default(""), field.Int64("plays").Default(0)}
}
