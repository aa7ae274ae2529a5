// Package schema declares a count whose condition names a column the child lacks.
package schema

import (
	"entgo.io/ent"
	"entgo.io/ent/schema/edge"
	"entgo.io/ent/schema/field"

	"github.com/hotcounter/hotcounter/entcounter"
)

type Shelf struct{ ent.Schema }

func (Shelf) Mixin() []ent.Mixin {
	return []ent.Mixin{entcounter.Counter("open_count", entcounter.Counts("books"),
		entcounter.Where("state = 'open'"))}
}

func (Shelf) Edges() []ent.Edge { return []ent.Edge{edge.To("books", Book.Type)} }

type Book struct{ ent.Schema }

func (Book) Fields() []ent.Field {
	return []ent.Field{field.String("status"), field.Int("shelf_id").Optional()}
}

func (Book) Edges() []ent.Edge {
	return []ent.Edge{edge.From("shelf", Shelf.Type).Ref("books").Field("shelf_id").Unique()}
}

type ShelfOpenCountSlot struct{ ent.Schema }

func (ShelfOpenCountSlot) Mixin() []ent.Mixin {
	return []ent.Mixin{entcounter.SlotsOf(Shelf.Type, "open_count")}
}
