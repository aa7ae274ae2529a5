package schema

import (
	"entgo.io/ent"
	"entgo.io/ent/schema/edge"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/index"

	"github.com/hotcounter/hotcounter/entcounter"
)

// Shelf counts its books: all of them (sum mode) and the open ones (rollup
// mode, with a condition), kept by triggers.
type Shelf struct{ ent.Schema }

// Fields of Shelf.
func (Shelf) Fields() []ent.Field {
	return []ent.Field{field.String("name").Default("")}
}

// Mixin of Shelf.
func (Shelf) Mixin() []ent.Mixin {
	return []ent.Mixin{
		entcounter.Counter("book_count", entcounter.Counts("books")),
		entcounter.Counter("open_count", entcounter.Slots(4), entcounter.Rollup(), entcounter.Counts("books"), entcounter.Where("status = 'open'")),
	}
}

// Edges of Shelf.
func (Shelf) Edges() []ent.Edge {
	return []ent.Edge{edge.To("books", Book.Type)}
}

// Book is the child row that shelves count.
type Book struct{ ent.Schema }

// Fields of Book.
func (Book) Fields() []ent.Field {
	return []ent.Field{
		field.String("status").MaxLen(20).Default("open"),
		field.Int("shelf_id").Optional().Nillable(),
	}
}

// Edges of Book.
func (Book) Edges() []ent.Edge {
	return []ent.Edge{edge.From("shelf", Shelf.Type).Ref("books").Field("shelf_id").Unique()}
}

// Indexes of Book.
func (Book) Indexes() []ent.Index {
	return []ent.Index{index.Fields("shelf_id")}
}

// ShelfBookCountSlot is the slot table of Shelf.book_count.
type ShelfBookCountSlot struct{ ent.Schema }

// Mixin of ShelfBookCountSlot.
func (ShelfBookCountSlot) Mixin() []ent.Mixin {
	return []ent.Mixin{entcounter.SlotsOf(Shelf.Type, "book_count")}
}

// ShelfOpenCountSlot is the slot table of Shelf.open_count.
type ShelfOpenCountSlot struct{ ent.Schema }

// Mixin of ShelfOpenCountSlot.
func (ShelfOpenCountSlot) Mixin() []ent.Mixin {
	return []ent.Mixin{entcounter.SlotsOf(Shelf.Type, "open_count")}
}

// Rack counts its items with ent hooks instead of triggers.
type Rack struct{ ent.Schema }

// Fields of Rack.
func (Rack) Fields() []ent.Field {
	return []ent.Field{field.String("name").Default("")}
}

// Mixin of Rack.
func (Rack) Mixin() []ent.Mixin {
	return []ent.Mixin{
		entcounter.Counter("item_count", entcounter.Counts("items"), entcounter.ByHooks()),
		entcounter.Counter("open_count", entcounter.Slots(4), entcounter.Rollup(), entcounter.Counts("items"), entcounter.Where("status = 'open'"), entcounter.ByHooks()),
	}
}

// Edges of Rack.
func (Rack) Edges() []ent.Edge {
	return []ent.Edge{edge.To("items", Item.Type)}
}

// Item is the child row that racks count.
type Item struct{ ent.Schema }

// Fields of Item.
func (Item) Fields() []ent.Field {
	return []ent.Field{
		field.String("status").MaxLen(20).Default("open"),
		field.Int("rack_id").Optional().Nillable(),
	}
}

// Edges of Item.
func (Item) Edges() []ent.Edge {
	return []ent.Edge{edge.From("rack", Rack.Type).Ref("items").Field("rack_id").Unique()}
}

// Indexes of Item.
func (Item) Indexes() []ent.Index {
	return []ent.Index{index.Fields("rack_id")}
}

// RackItemCountSlot is the slot table of Rack.item_count.
type RackItemCountSlot struct{ ent.Schema }

// Mixin of RackItemCountSlot.
func (RackItemCountSlot) Mixin() []ent.Mixin {
	return []ent.Mixin{entcounter.SlotsOf(Rack.Type, "item_count")}
}

// RackOpenCountSlot is the slot table of Rack.open_count.
type RackOpenCountSlot struct{ ent.Schema }

// Mixin of RackOpenCountSlot.
func (RackOpenCountSlot) Mixin() []ent.Mixin {
	return []ent.Mixin{entcounter.SlotsOf(Rack.Type, "open_count")}
}
