package integration_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hotcounter/hotcounter"
	"github.com/hotcounter/hotcounter/entcounter"
	"github.com/hotcounter/hotcounter/integration_test/ent/post"
)

// The typed methods entcounter's extension generates on ent's clients
// (TakeStock, RecountBookCount, Buffered(buf).AddLikes, Query().Live())
// do what the generic functions do, on a client and on a transaction.
func TestEntTypedMethodsTakeRecountAddThroughABufferAndLoadLive(t *testing.T) {
	parallel(t)
	eachDB(t, func(t *testing.T, e *env) {
		ee := withEnt(t, e, false)
		ctx, c := context.Background(), ee.client
		must(t, entMigrate(ctx, c, entcounter.WithCounters(c)))

		p := c.Product.Create().SaveX(ctx)
		c.Product.UpdateOneID(p.ID).AddStock(5).ExecX(ctx)
		must(t, c.Product.TakeStock(ctx, p.ID, 3))
		if err := c.Product.TakeStock(ctx, p.ID, 3); !errors.Is(err, hotcounter.ErrInsufficient) {
			t.Fatalf("TakeStock of 3 with 2 left = %v, want ErrInsufficient", err)
		}
		tx, err := c.Tx(ctx)
		must(t, err)
		must(t, tx.Product.TakeStock(ctx, p.ID, 2))
		must(t, tx.Rollback())
		if got := c.Product.GetX(ctx, p.ID).Stock; got != 2 {
			t.Fatalf("stock %d after a take of 3 and a take of 2 rolled back, want 2", got)
		}

		s := c.Shelf.Create().SaveX(ctx)
		for range 3 {
			c.Book.Create().SetShelfID(s.ID).ExecX(ctx)
		}
		must(t, e.db.Exec("UPDATE shelf_book_count_slots SET n = n + 7 WHERE shelf_id = ?", s.ID).Error)
		if n, err := c.Shelf.RecountBookCount(ctx, s.ID); err != nil || n != 1 {
			t.Fatalf("RecountBookCount = %d, %v; want 1 shelf corrected", n, err)
		}
		if got := c.Shelf.GetX(ctx, s.ID).BookCount; got != 3 {
			t.Fatalf("book count %d after RecountBookCount, want 3", got)
		}

		buf, err := entcounter.NewBuffer(ctx, c, hotcounter.BufferConfig{Interval: time.Hour})
		must(t, err)
		pst := c.Post.Create().SaveX(ctx)
		must(t, c.Post.Buffered(buf).AddLikes(ctx, pst.ID, 4))
		must(t, c.Post.Buffered(buf).AddViews(ctx, pst.ID, 2))
		if n, err := buf.Pending(context.Background(), "Post", post.FieldLikes, pst.ID); err != nil || n != 4 {
			t.Fatalf("Pending likes = %d, %v; want the 4 added through Buffered", n, err)
		}
		must(t, buf.Close(ctx))
		// views is a rollup counter: its column waits for RollupPass, and
		// Live reads the slots with it.
		if got := c.Post.GetX(ctx, pst.ID); got.Likes != 4 || got.Views != 0 {
			t.Fatalf("a plain load read likes %d views %d, want 4 and the unfolded column 0", got.Likes, got.Views)
		}
		if got := c.Post.Query().Where(post.ID(pst.ID)).Live().OnlyX(ctx); got.Likes != 4 || got.Views != 2 {
			t.Fatalf("a Live load read likes %d views %d, want 4 and 2", got.Likes, got.Views)
		}
	})
}
