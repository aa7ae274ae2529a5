package schema

import (
	"entgo.io/ent"
	"entgo.io/ent/schema/field"

	"github.com/hotcounter/hotcounter/entcounter"
)

// Story counts claps in append mode (the stories table of the GORM tests).
type Story struct{ ent.Schema }

// Fields of Story.
func (Story) Fields() []ent.Field {
	return []ent.Field{field.String("title").Default("")}
}

// Mixin of Story.
func (Story) Mixin() []ent.Mixin {
	return []ent.Mixin{entcounter.Counter("claps", entcounter.Append())}
}

// StoryClapsDelta is the delta table of Story.claps.
type StoryClapsDelta struct{ ent.Schema }

// Mixin of StoryClapsDelta.
func (StoryClapsDelta) Mixin() []ent.Mixin {
	return []ent.Mixin{entcounter.DeltasOf(Story.Type, "claps")}
}
