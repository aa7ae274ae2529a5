package integration_test

import (
	"context"
	"testing"
	"time"

	"github.com/hotcounter/hotcounter/entcounter"
	"github.com/hotcounter/hotcounter/gormcounter"
	"gorm.io/gorm"
)

// A caller's transaction increments a post and then renames it, while a
// rollup pass runs. The design: the fold can neither stall increments nor
// deadlock with a caller's transaction.
func TestMariaDBEntRollupDoesNotDeadlockACaller(t *testing.T) { rollupBesideACaller(t, false) }

func TestMariaDBGormRollupDoesNotDeadlockACaller(t *testing.T) { rollupBesideACaller(t, true) }

func rollupBesideACaller(t *testing.T, gormRollup bool) {
	e := openEnt(t, my, true, everyEntTable())
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
			done <- gormcounter.RollupPass(e.db, &Post{})
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

// GORM's MySQL fold: a caller's open transaction has incremented one post
// (holding that slot row). Rollup must skip the held row and not wait.
func TestMariaDBRollupSkipsAHeldSlot(t *testing.T) {
	parallel(t)
	e := open(t, my)
	db := e.db
	must(t, migrateAll(db))
	var ids []uint
	for i := 0; i < 3; i++ {
		p := newPost(t, db, "p")
		ids = append(ids, p.ID)
		for s := 0; s < 4; s++ {
			must(t, db.Exec("INSERT INTO post_views_slots (post_id, slot, n) VALUES (?, ?, 1)", p.ID, s).Error)
		}
	}
	holder := db.Begin()
	defer holder.Rollback()
	must(t, holder.Exec("UPDATE post_views_slots SET n = n + 1 WHERE post_id = ? AND slot = 3", ids[2]).Error)
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	go func() {
		time.Sleep(500 * time.Millisecond)
		ictx, icancel := context.WithTimeout(context.Background(), waitLimit)
		defer icancel()
		err := gormcounter.Increment(db.WithContext(ictx).Model(&Post{ID: ids[0]}), "Views", 1).Error
		t.Logf("autocommit increment of post %d (not held by anyone) during the fold: %v", ids[0], err)
	}()
	start := time.Now()
	err := gormcounter.RollupPass(db.WithContext(ctx), &Post{})
	t.Logf("Rollup: %v after %v", err, time.Since(start))
	if err != nil {
		t.Fatalf("Rollup waited for a held slot row: %v", err)
	}
}

// A caller holds a post FOR UPDATE; a rollup pass must not wait for it
// (GORM's MySQL fold skips locked parents).
func TestMariaDBRollupDoesNotWaitForAHeldParent(t *testing.T) {
	parallel(t)
	e := openEnt(t, my, true, everyEntTable())
	ctx := context.Background()
	c := e.client
	p := c.Post.Create().SetTitle("held").SaveX(ctx)
	c.Post.UpdateOneID(p.ID).AddViews(3).ExecX(ctx)
	release := locked(t, e.db, &Post{}, uint(p.ID), "UPDATE")
	defer release()

	start := time.Now()
	must(t, gormcounter.RollupPass(e.db, &Post{}))
	t.Logf("gormcounter.RollupPass returned after %v", time.Since(start))

	tctx, cancel := context.WithTimeout(ctx, waitLimit)
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
	parallel(t)
	e := openEnt(t, my, true, everyEntTable())
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
	case <-time.After(waitLimit):
		t.Fatal("the rollup pass waited for the caller's slot row")
	}

	waits := innodbStatus(t, e.db, "Innodb_row_lock_waits")
	tctx, cancel := context.WithTimeout(ctx, waitLimit)
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

// GORM's MySQL fold: a caller holds a post that has nothing pending and is
// far from the posts the pass folds. Rollup must not wait for it.
func TestMariaDBRollupDoesNotWaitForAnUnrelatedPost(t *testing.T) {
	parallel(t)
	e := open(t, my)
	db := e.db
	must(t, migrateAll(db))
	var ids []uint
	for i := 0; i < 200; i++ {
		p := newPost(t, db, "p")
		ids = append(ids, p.ID)
		if i < 50 {
			must(t, gormcounter.Increment(db.Model(&p), "Views", 1).Error)
		}
	}
	release := locked(t, db, &Post{}, ids[150], "UPDATE") // no pending views
	defer release()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	start := time.Now()
	err := gormcounter.RollupPass(db.WithContext(ctx), &Post{})
	t.Logf("Rollup: %v after %v", err, time.Since(start))
	if err != nil {
		t.Fatalf("Rollup waited for a post it does not fold: %v", err)
	}
}
