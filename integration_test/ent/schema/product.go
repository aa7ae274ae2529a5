package schema

import (
	"entgo.io/ent"
	"entgo.io/ent/schema/field"

	"github.com/hotcounter/hotcounter/entcounter"
)

// Product's stock is a guarded counter: it never goes below zero (the
// products table of the GORM tests).
type Product struct{ ent.Schema }

// Fields of Product.
func (Product) Fields() []ent.Field {
	return []ent.Field{field.String("name").Default("")}
}

// Mixin of Product.
func (Product) Mixin() []ent.Mixin {
	return []ent.Mixin{entcounter.Counter("stock", entcounter.Guarded())}
}

// ProductStockSlot is the slot table of Product.stock.
type ProductStockSlot struct{ ent.Schema }

// Mixin of ProductStockSlot.
func (ProductStockSlot) Mixin() []ent.Mixin {
	return []ent.Mixin{entcounter.SlotsOf(Product.Type, "stock")}
}
