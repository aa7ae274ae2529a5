package integration_test

import (
	"context"
	stdsql "database/sql"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"entgo.io/ent/dialect"
	entsql "entgo.io/ent/dialect/sql"

	"github.com/hotcounter/hotcounter/entcounter"
	"github.com/hotcounter/hotcounter/integration_test/ent"
	"github.com/hotcounter/hotcounter/integration_test/ent/book"
	"github.com/hotcounter/hotcounter/integration_test/ent/item"
)

// ent through PgBouncer in transaction pooling mode, as gormcounter is in
// TestGormThroughPgBouncerIsExact: increments in and out of transactions,
// loads, the rollup and compaction passes, counts by triggers and by hooks,
// and Take are exact, and no session state is left on the server.
func TestEntThroughPgBouncerIsExact(t *testing.T) {
	parallel(t)
	b := pgBouncer(t)
	through, direct := b.database(t)
	db, err := stdsql.Open("pgx", through)
	must(t, err)
	db.SetMaxOpenConns(16)
	t.Cleanup(func() { db.Close() })
	c := ent.NewClient(ent.Driver(entsql.OpenDB(dialect.Postgres, db)))
	ctx := context.Background()
	must(t, entMigrate(ctx, c, entcounter.WithCounters(c)))

	post := c.Post.Create().SetTitle("p").SaveX(ctx)
	var acked, inTx atomic.Int64
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 25 {
				var err error
				if w%2 == 0 {
					err = c.Post.UpdateOneID(post.ID).AddLikes(1).Exec(ctx)
				} else {
					err = inTxRollingBack(ctx, c, i%3 == 0, func(tx *ent.Tx) error {
						return tx.Post.UpdateOneID(post.ID).AddLikes(1).AddViews(2).Exec(ctx)
					})
					if err == nil {
						inTx.Add(1)
					}
				}
				switch {
				case err == nil:
					acked.Add(1)
				case !errors.Is(err, errRollBack):
					t.Errorf("an increment through PgBouncer: %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	must(t, entcounter.RollupPass(ctx, c))
	must(t, entcounter.CompactPass(ctx, c))
	got := c.Post.GetX(ctx, post.ID)
	if got.Likes != acked.Load() || got.Views != 2*inTx.Load() {
		t.Fatalf("after %d acknowledged increments (%d in committed transactions) and the passes: likes %d, views %d; want %d and %d",
			acked.Load(), inTx.Load(), got.Likes, got.Views, acked.Load(), 2*inTx.Load())
	}

	// Counts by triggers (Shelf's books) and by hooks (Rack's items).
	s := c.Shelf.Create().SetName("s").SaveX(ctx)
	r := c.Rack.Create().SetName("r").SaveX(ctx)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 10 {
				bk, err := c.Book.Create().SetShelfID(s.ID).Save(ctx)
				if err != nil {
					t.Errorf("a book: %v", err)
					return
				}
				var it *ent.Item
				err = inTxRollingBack(ctx, c, false, func(tx *ent.Tx) (err error) {
					it, err = tx.Item.Create().SetRackID(r.ID).Save(ctx)
					return err
				})
				if err != nil {
					t.Errorf("an item: %v", err)
					return
				}
				if (w+i)%4 == 0 {
					if err := c.Book.DeleteOneID(bk.ID).Exec(ctx); err != nil {
						t.Errorf("deleting a book: %v", err)
						return
					}
					if err := inTxRollingBack(ctx, c, false, func(tx *ent.Tx) error { return tx.Item.DeleteOneID(it.ID).Exec(ctx) }); err != nil {
						t.Errorf("deleting an item: %v", err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	books := c.Book.Query().Where(book.ShelfIDEQ(s.ID)).CountX(ctx)
	items := c.Item.Query().Where(item.RackIDEQ(r.ID)).CountX(ctx)
	if gs, gr := c.Shelf.GetX(ctx, s.ID), c.Rack.GetX(ctx, r.ID); gs.BookCount != int64(books) || gr.ItemCount != int64(items) || books != 60 {
		t.Fatalf("counts: books %d (COUNT(*) %d), items %d (COUNT(*) %d); want both 60", gs.BookCount, books, gr.ItemCount, items)
	}

	// Take: 80 buyers of 1 from a stock of 50.
	prod := c.Product.Create().SetStock(50).SaveX(ctx)
	var sold, refused atomic.Int64
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 5 {
				err := entcounter.Take(ctx, c, "Product", "stock", prod.ID, 1)
				switch {
				case err == nil:
					sold.Add(1)
				case errors.Is(err, entcounter.ErrInsufficient):
					refused.Add(1)
				default:
					t.Errorf("a take through PgBouncer: %v", err)
				}
			}
		}()
	}
	wg.Wait()
	if left := c.Product.GetX(ctx, prod.ID).Stock; sold.Load() != 50 || refused.Load() != 30 || left != 0 {
		t.Fatalf("80 takes of 1 from 50: %d sold, %d refused, %d left; want 50, 30, 0", sold.Load(), refused.Load(), left)
	}

	expectNoSessionState(t, direct)
}

// inTxRollingBack runs fn in a transaction of c, committed unless
// rollBack (then the error is errRollBack).
func inTxRollingBack(ctx context.Context, c *ent.Client, rollBack bool, fn func(tx *ent.Tx) error) error {
	tx, err := c.Tx(ctx)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	if rollBack {
		if err := tx.Rollback(); err != nil {
			return err
		}
		return errRollBack
	}
	return tx.Commit()
}
