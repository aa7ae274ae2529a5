package entcounter

import (
	"context"
	"fmt"
	"strings"

	"github.com/hotcounter/hotcounter"
	"github.com/hotcounter/hotcounter/internal/entrt"
)

// Take subtracts amount (> 0) from the guarded counter field of schema typ
// (its type name, Product, or its table) of the row with the given id, in
// full, or not at all: when less than amount is left, the error wraps
// [hotcounter.ErrInsufficient] and nothing changed. It never takes the counter below
// zero, and refuses only when the total really is short at that moment:
// if no single slot row holds enough, it locks every row of the item and
// takes from several, fullest first.
//
//	err := entcounter.Take(ctx, client, "Product", product.FieldStock, id, 2)
//	err := client.Product.TakeStock(ctx, id, 2) // the same, generated and typed
//	if errors.Is(err, hotcounter.ErrInsufficient) { ... sold out ... }
//
// Given a transaction (*ent.Tx) it takes in it (a rollback returns the
// stock); given the client, in a transaction of its own where it needs
// one, and together with concurrent takes of the same item as one take of
// their sum (refused, each buyer asking no more than was left takes
// alone). Restock with AddStock(n) (UpdateOneID), which spreads n over the
// slots. An id with no row is refused as insufficient: it holds nothing.
func Take(ctx context.Context, src Source, typ, field string, id any, amount int64) error {
	r := src.HotCounter()
	d, ok := findDef(r, typ, field)
	if !ok {
		return fmt.Errorf("entcounter: Take %s.%s: %w", typ, field, hotcounter.ErrNotCounter)
	}
	return r.Take(ctx, d, id, amount)
}

// findDef finds the counter field of schema typ: its type name (Post),
// label (post) or table (posts).
func findDef(r entrt.Runtime, typ, field string) (entrt.Def, bool) {
	for _, d := range r.Defs {
		if (d.Type == typ || d.Table == typ || snake(d.Type) == typ || strings.EqualFold(d.Type, typ)) && d.Field == field {
			return d, true
		}
	}
	return entrt.Def{}, false
}
