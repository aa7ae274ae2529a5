package integration_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/hotcounter/hotcounter/entcounter"
	"github.com/hotcounter/hotcounter/gormcounter"
	"github.com/hotcounter/hotcounter/integration_test/ent"
	"github.com/hotcounter/hotcounter/integration_test/ent/post"
	"github.com/hotcounter/hotcounter/integration_test/ent/product"
)

// The flash sale through ent: 64 buyers (8 on SQLite) take 1 each with
// entcounter.Take from 3,000 created with the product, while a restock of
// 500 (AddStock) arrives: exactly 3,500 sold, 0 left, no row below 0, no
// false "sold out".
func TestEntGuardedFlashSaleIsExact(t *testing.T) {
	eachEnt(t, func(t *testing.T, e *entEnv) {
		ctx, c := context.Background(), e.client
		p := c.Product.Create().SetName("flash sale").SetStock(3000).SaveX(ctx)
		if total, lowest := stockRows(t, e.db, uint(p.ID)); total != 3000 || lowest < 187 {
			t.Fatalf("created with 3,000: %d in the slot rows, the lowest holding %d; want 3,000 spread over the 16 rows", total, lowest)
		}
		buyers := 64
		if e.kind == lite {
			buyers = 8
		}
		sold, _ := flashSale(t, buyers,
			func() error { return entcounter.Take(ctx, c, product.Table, product.FieldStock, p.ID, 1) },
			func() error { return c.Product.UpdateOneID(p.ID).AddStock(500).Exec(ctx) })
		total, lowest := stockRows(t, e.db, uint(p.ID))
		got := c.Product.GetX(ctx, p.ID)
		if sold != 3500 || total != 0 || got.Stock != 0 || lowest < 0 {
			t.Fatalf("sold %d, stock %d (loaded %d, lowest row %d); want 3500 sold and 0 left, no row below 0", sold, total, got.Stock, lowest)
		}
	}, pool(writersPool))
}

// Takes of 1 to 3 inside ent transactions (16 buyers, 4 on SQLite), until
// refused: every unit of 500 sold once, no deadlock.
func TestEntGuardedTakesInTransactionsAreExact(t *testing.T) {
	eachEnt(t, func(t *testing.T, e *entEnv) {
		ctx, c := context.Background(), e.client
		p := c.Product.Create().SetStock(500).SaveX(ctx)
		var sold atomic.Int64
		buyers := 16
		if e.kind == lite {
			buyers = 4
		}
		hammer(t, buyers, 1, func() error {
			return buyUntilSoldOut(&sold, int64(1+rand.IntN(3)), func(size int64) error {
				return inTx(ctx, c, func(tx *ent.Tx) error {
					return entcounter.Take(ctx, tx, "Product", product.FieldStock, p.ID, size)
				})
			})
		})
		total, lowest := stockRows(t, e.db, uint(p.ID))
		if sold.Load() != 500 || total != 0 || lowest < 0 {
			t.Fatalf("sold %d, %d left, lowest row %d; want 500 sold, 0 left", sold.Load(), total, lowest)
		}
	}, pool(writersPool))
}

// Through ent: a take in a rolled-back transaction returns the stock; a
// take of more than is left takes nothing; a restock spreads over the
// slots and UpdateOne returns the new total; an Add of a negative amount
// or a Set below zero is refused naming the schema and field, and so is a
// Take of a counter that is not guarded; the errors are gormcounter's too.
func TestEntGuardedTakeRollsBackRefusesAndNames(t *testing.T) {
	eachEnt(t, func(t *testing.T, e *entEnv) {
		ctx, c := context.Background(), e.client
		p := c.Product.Create().SaveX(ctx)
		if p = c.Product.UpdateOneID(p.ID).AddStock(10).SaveX(ctx); p.Stock != 10 {
			t.Fatalf("UpdateOne after a restock of 10 returned stock %d", p.Stock)
		}
		if n := rawInt(t, e.db, "SELECT COUNT(*) FROM product_stock_slots WHERE product_id = ? AND n > 0", p.ID); n != 10 {
			t.Fatalf("a restock of 10 sits in %d slot rows; want 10 rows of 1 (spread over 16 slots)", n)
		}
		tx, err := c.Tx(ctx)
		must(t, err)
		must(t, entcounter.Take(ctx, tx, product.Table, product.FieldStock, p.ID, 7))
		must(t, tx.Rollback())
		if got := c.Product.GetX(ctx, p.ID).Stock; got != 10 {
			t.Fatalf("stock %d after a rolled-back take of 7; want 10", got)
		}
		err = entcounter.Take(ctx, c, product.Table, product.FieldStock, p.ID, 11)
		if !errors.Is(err, entcounter.ErrInsufficient) || !errors.Is(err, gormcounter.ErrInsufficient) || !strings.Contains(err.Error(), "Product.stock") {
			t.Fatalf("take of 11 from 10: %v; want ErrInsufficient naming Product.stock", err)
		}
		if short := (*entcounter.Shortage)(nil); !errors.As(err, &short) || short.Left != 10 || short.Asked != 11 {
			t.Fatalf("take of 11 from 10: %v; want a Shortage of 10 left, 11 asked", err)
		}
		must(t, entcounter.Take(ctx, c, product.Table, product.FieldStock, p.ID, 4)) // from several rows of 1
		for _, write := range []func() error{
			func() error { return c.Product.UpdateOneID(p.ID).AddStock(-1).Exec(ctx) },
			func() error { return c.Product.Update().Where(product.ID(p.ID)).AddStock(-1).Exec(ctx) },
			func() error { return c.Product.UpdateOneID(p.ID).SetStock(-1).Exec(ctx) },
			func() error { return c.Product.Create().SetStock(-5).Exec(ctx) },
		} {
			if err := write(); !errors.Is(err, entcounter.ErrNegativeGuarded) || !errors.Is(err, gormcounter.ErrNegativeGuarded) || !strings.Contains(err.Error(), "Product.stock") {
				t.Fatalf("a decrease of a guarded counter: %v; want ErrNegativeGuarded naming Product.stock", err)
			}
		}
		ps := c.Post.Create().SetTitle("x").SaveX(ctx)
		if err := entcounter.Take(ctx, c, post.Table, post.FieldLikes, ps.ID, 1); !errors.Is(err, entcounter.ErrNotGuarded) || !strings.Contains(err.Error(), "Post.likes") {
			t.Fatalf("Take of Post.likes: %v; want ErrNotGuarded naming Post.likes", err)
		}
		if got := c.Product.GetX(ctx, p.ID).Stock; got != 6 {
			t.Fatalf("stock %d after taking 4 of 10; want 6", got)
		}
	})
}
