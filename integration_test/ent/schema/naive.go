package schema

import (
	"entgo.io/ent"
	"entgo.io/ent/schema/field"
)

// NaivePost is the benchmarks' baseline: a plain column that AddLikes
// increments in place (the naive_posts table of the GORM benchmarks).
type NaivePost struct{ ent.Schema }

// Fields of NaivePost.
func (NaivePost) Fields() []ent.Field {
	return []ent.Field{field.Int64("likes").Default(0)}
}
