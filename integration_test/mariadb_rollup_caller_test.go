package integration_test

import (
	"context"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/hotcounter/hotcounter/entcounter"
	"github.com/hotcounter/hotcounter/gormcounter"
)

// A caller's transaction increments a post and then renames it, while a
// rollup pass runs. The design: the fold can neither stall increments nor
// deadlock with a caller's transaction.
func TestMariaDBEntRollupDoesNotDeadlockACaller(t *testing.T)  { rollupBesideACaller(t, false) }
func TestMariaDBGormRollupDoesNotDeadlockACaller(t *testing.T) { rollupBesideACaller(t, true) }

func rollupBesideACaller(t *testing.T, gormRollup bool) {
	e := openEnt(t, my, true)
	ctx := context.Background()
	c := e.client
	// 50 posts with pending views before the hot one: the fold has written
	// them when it reaches the hot post, so InnoDB picks the caller as victim.
	for i := 0; i < 50; i++ {
		q := c.Post.Create().SetTitle("cold").SaveX(ctx)
		c.Post.UpdateOneID(q.ID).AddViews(1).ExecX(ctx)
	}
	p := c.Post.Create().SetTitle("hot").SaveX(ctx)
	c.Post.UpdateOneID(p.ID).AddViews(1).ExecX(ctx)
	tx, err := c.Tx(ctx)
	must(t, err)
	tx.Post.UpdateOneID(p.ID).AddViews(1).ExecX(ctx) // holds one slot row of the hot post
	done := make(chan error, 1)
	go func() {
		if gormRollup {
			done <- gormcounter.Rollup(e.db, &Post{})
			return
		}
		done <- entcounter.RollupPass(ctx, c)
	}()
	time.Sleep(500 * time.Millisecond)
	err = tx.Post.UpdateOneID(p.ID).SetTitle("renamed").Exec(ctx)
	if err != nil {
		tx.Rollback()
		t.Fatalf("the caller's transaction failed while ent's rollup ran: %v", err)
	}
	must(t, tx.Commit())
	must(t, <-done)
	_ = gorm.ErrRecordNotFound
}
