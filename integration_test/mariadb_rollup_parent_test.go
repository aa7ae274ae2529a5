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

// A caller's open transaction holds one uncommitted increment of one post
// (its slot 63) while a rollup pass folds it and another post: the pass
// skips that row and finishes, and autocommit increments of the other post
// never wait behind it (nor, after it, re-insert a folded row: MySQL folds
// keep emptied rows). Increments of the held post are not tried: one that
// drew slot 63 would wait for the caller, as random slots do.
func TestMariaDBEntIncrementsDoNotWaitBehindARollup(t *testing.T) {
	e := openEnt(t, my, true)
	ctx := context.Background()
	c := e.client
	p := c.Post.Create().SetTitle("free").SaveX(ctx)
	held := c.Post.Create().SetTitle("held").SaveX(ctx)
	for _, id := range []int{p.ID, held.ID} {
		for s := 0; s < 64; s++ {
			must(t, e.db.Exec("INSERT INTO post_views_slots (post_id, slot, n) VALUES (?, ?, 1)", id, s).Error)
		}
	}
	holder := e.db.Begin()
	must(t, holder.Exec("UPDATE post_views_slots SET n = n + 1 WHERE post_id = ? AND slot = 63", held.ID).Error)
	defer holder.Rollback()

	pass := make(chan error, 1)
	go func() { pass <- entcounter.RollupPass(ctx, c) }()
	select {
	case err := <-pass:
		must(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("the rollup pass waited for the caller's slot row")
	}

	waits := innodbStatus(t, e.db, "Innodb_row_lock_waits")
	tctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	for i := 0; i < 40; i++ {
		if err := c.Post.UpdateOneID(p.ID).AddViews(1).Exec(tctx); err != nil {
			t.Fatalf("increment %d of the free post after the pass: %v", i, err)
		}
	}
	t.Logf("row lock waits during increments: %d", innodbStatus(t, e.db, "Innodb_row_lock_waits")-waits)
	if got := c.Post.GetX(entcounter.WithLive(ctx), p.ID); got.Views != 64+40 {
		t.Fatalf("views=%d, want %d", got.Views, 64+40)
	}
}
