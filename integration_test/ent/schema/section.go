package schema

import (
	"entgo.io/ent"
	"entgo.io/ent/schema/edge"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/index"

	"github.com/hotcounter/hotcounter/entcounter"
)

// Section counts the pages of its sub-sections: a count over two levels,
// kept by triggers on pages and on sections.
type Section struct{ ent.Schema }

// Fields of Section.
func (Section) Fields() []ent.Field {
	return []ent.Field{field.String("name").Default(""), field.Int("parent_id").Optional().Nillable()}
}

// Mixin of Section.
func (Section) Mixin() []ent.Mixin {
	return []ent.Mixin{entcounter.Counter("page_count", entcounter.Counts("children.pages"))}
}

// Edges of Section.
func (Section) Edges() []ent.Edge {
	return []ent.Edge{
		edge.To("children", Section.Type).From("parent").Field("parent_id").Unique(),
		edge.To("pages", Page.Type),
	}
}

// Indexes of Section.
func (Section) Indexes() []ent.Index { return []ent.Index{index.Fields("parent_id")} }

// Page is what sections count, two levels up.
type Page struct{ ent.Schema }

// Fields of Page.
func (Page) Fields() []ent.Field {
	return []ent.Field{field.Int("section_id").Optional().Nillable()}
}

// Edges of Page.
func (Page) Edges() []ent.Edge {
	return []ent.Edge{edge.From("section", Section.Type).Ref("pages").Field("section_id").Unique()}
}

// Indexes of Page.
func (Page) Indexes() []ent.Index { return []ent.Index{index.Fields("section_id")} }

// SectionPageCountSlot is the slot table of Section.page_count.
type SectionPageCountSlot struct{ ent.Schema }

// Mixin of SectionPageCountSlot.
func (SectionPageCountSlot) Mixin() []ent.Mixin {
	return []ent.Mixin{entcounter.SlotsOf(Section.Type, "page_count")}
}
