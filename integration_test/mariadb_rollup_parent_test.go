package integration_test

import (
	"context"
	"testing"
	"time"

	"github.com/hotcounter/hotcounter/entcounter"
	"github.com/hotcounter/hotcounter/gormcounter"
)

// A caller holds a post FOR UPDATE; a rollup pass must not wait for it
// (GORM's MySQL fold skips locked parents).
func TestMariaDBRollupDoesNotWaitForAHeldParent(t *testing.T) {
	e := openEnt(t, my, true)
	ctx := context.Background()
	c := e.client
	p := c.Post.Create().SetTitle("held").SaveX(ctx)
	c.Post.UpdateOneID(p.ID).AddViews(3).ExecX(ctx)
	release := locked(t, e.db, &Post{}, uint(p.ID), "UPDATE")
	defer release()

	start := time.Now()
	must(t, gormcounter.Rollup(e.db, &Post{}))
	t.Logf("gormcounter.Rollup returned after %v", time.Since(start))

	tctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	start = time.Now()
	err := entcounter.RollupPass(tctx, c)
	t.Logf("entcounter.RollupPass: %v after %v", err, time.Since(start))
	if err != nil {
		t.Fatalf("ent RollupPass waited on the parent row lock: %v", err)
	}
}

// A caller's open transaction holds one uncommitted increment (slot 63)
// while a rollup pass runs: the pass skips that row, and autocommit
// increments of the other slots never wait behind the pass (nor, after it,
// re-insert a folded row next to the held one: MySQL folds keep emptied
// rows).
func TestMariaDBEntIncrementsDoNotWaitBehindARollup(t *testing.T) {
	e := openEnt(t, my, true)
	ctx := context.Background()
	c := e.client
	p := c.Post.Create().SetTitle("busy").SaveX(ctx)
	for s := 0; s < 64; s++ {
		must(t, e.db.Exec("INSERT INTO post_views_slots (post_id, slot, n) VALUES (?, ?, 1)", p.ID, s).Error)
	}
	holder := e.db.Begin()
	must(t, holder.Exec("UPDATE post_views_slots SET n = n + 1 WHERE post_id = ? AND slot = 63", p.ID).Error)
	defer holder.Rollback()

	go entcounter.RollupPass(ctx, c) // blocks on slot 63
	time.Sleep(500 * time.Millisecond)

	waits := innodbStatus(t, e.db, "Innodb_row_lock_waits")
	tctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	failed := 0
	for i := 0; i < 20; i++ {
		if err := c.Post.UpdateOneID(p.ID).AddViews(1).Exec(tctx); err != nil {
			failed++
			t.Logf("increment %d: %v", i, err)
			break
		}
	}
	t.Logf("row lock waits during increments: %d", innodbStatus(t, e.db, "Innodb_row_lock_waits")-waits)
	if failed > 0 {
		t.Fatalf("an increment waited behind ent's rollup pass (blocked by a caller's open transaction)")
	}
}
