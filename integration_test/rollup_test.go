package integration_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hotcounter/hotcounter/gormcounter"
)

// Under 8 writers and a rollup loop every 2 ms, in both ORMs: exact reads
// never go backwards, no pass fails, the loop folds while the writers run,
// and once they stop, passes leave the column exact.
func TestRollupUnderConcurrentIncrementsIsExact(t *testing.T) {
	eachORM(t, func(t *testing.T, o counterORM) {
		ids := []int64{o.create(t, modelPost), o.create(t, modelPost), o.create(t, modelPost)}
		ctx, stop := context.WithCancel(context.Background())
		loopDone := make(chan error, 1)
		var failed atomic.Int64
		looping := o.with(t, settings{OnError: func(err error) {
			failed.Add(1)
			t.Logf("rollup pass: %v", err)
		}})
		go func() { loopDone <- looping.rollupLoop(ctx, modelPost, 2*time.Millisecond) }()

		// Readers check while everything runs that the exact value never goes
		// backwards: a fold counted twice or missed would show as a jump.
		stopReaders := watchNeverBackwards(ids, "exact views", func(id int64) (int64, error) { return o.exact(modelPost, id, "views") })

		const writers, each = 8, 100
		var next atomic.Int64
		done := hammer(t, writers, each, func() error { return o.increment(modelPost, ids[next.Add(1)%int64(len(ids))], "views", 1) })
		readErr := stopReaders()
		stop()
		if err := <-loopDone; err != nil {
			t.Fatalf("RollupLoop: %v", err)
		}
		if readErr != nil {
			t.Fatal(readErr)
		}
		if n := failed.Load(); n != 0 {
			t.Fatalf("%d rollup passes failed under the writers", n)
		}

		var total int64
		for _, id := range ids {
			total += exactly(t, o, modelPost, id, "views")
		}
		if done != writers*each || total != done {
			t.Fatalf("exact total %d after %d acknowledged increments", total, done)
		}
		db := o.db()
		var column int64
		must(t, db.Raw("SELECT COALESCE(SUM(views), 0) FROM posts").Row().Scan(&column))
		if column == 0 {
			t.Fatal("the rollup loop folded nothing while the writers ran")
		}
		// With the writers gone, passes fold everything: the column alone is
		// then exact. (Cancelling the loop aborts its last transaction, and
		// database/sql rolls it back in the background: until it has, its
		// slot rows are locked and a pass skips them, leaving them pending.)
		var pending int64
		for pass := 0; pass < 100; pass++ {
			must(t, o.rollup(modelPost))
			must(t, db.Raw("SELECT COALESCE(SUM(views), 0) FROM posts").Row().Scan(&column))
			_, pending = slotRowsAll(t, db)
			if column+pending != done {
				t.Fatalf("pass %d: column %d + pending %d != %d acknowledged", pass, column, pending, done)
			}
			if pending == 0 {
				break
			}
			t.Logf("pass %d left %d pending (locked by the cancelled loop's transaction)", pass, pending)
			time.Sleep(20 * time.Millisecond)
		}
		if column != done || pending != 0 {
			t.Fatalf("after final passes the column holds %d (pending %d), want %d", column, pending, done)
		}
	}, everyEntTable())
}

// A rollup counter's plain load reads its column, which lags until a pass
// folds; the column works in WHERE and ORDER BY; an exact read includes
// what is pending. Both ORMs.
func TestRollupFoldsAndCachedReadsLag(t *testing.T) {
	eachORM(t, func(t *testing.T, o counterORM) {
		a, b := o.create(t, modelPost), o.create(t, modelPost)
		for i := 0; i < 30; i++ {
			must(t, o.increment(modelPost, a, "views", 1))
		}
		must(t, o.increment(modelPost, b, "views", 5))
		if views := o.cached(t, modelPost, a, "views"); views != 0 {
			t.Fatalf("cached views = %d before a rollup, want 0", views)
		}
		must(t, o.rollup(modelPost))
		if views := o.cached(t, modelPost, a, "views"); views != 30 {
			t.Fatalf("cached views = %d after a rollup, want 30", views)
		}
		if top := o.postsByViews(t, 1); len(top) != 2 || top[0] != a || top[1] != b {
			t.Fatalf("ordered by views: %v, want [%d %d]", top, a, b)
		}
		must(t, o.increment(modelPost, a, "views", 2))
		if views := exactly(t, o, modelPost, a, "views"); views != 32 {
			t.Fatalf("live views = %d, want 32", views)
		}
	})
}

// RollupLoop returns nil once its context is cancelled, in both ORMs.
func TestRollupLoopStopsWithItsContext(t *testing.T) {
	eachORM(t, func(t *testing.T, o counterORM) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- o.rollupLoop(ctx, modelPost, time.Hour) }()
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("RollupLoop returned %v, want nil on cancel", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("RollupLoop did not return after its context was cancelled")
		}
	}, on(lite), everyEntTable())
}

// GORM's RollupLoop names its models: one without rollup counters fails at
// once.
func TestRollupLoopOfAModelWithoutRollupCountersFails(t *testing.T) {
	parallel(t)
	e := open(t, lite)
	must(t, migrateAll(e.db))
	if err := gormcounter.RollupLoop(context.Background(), e.db, time.Second, &Author{}); err == nil {
		t.Fatal("RollupLoop on a model without rollup counters must fail at once")
	}
}

// TestTheWidestCounters: 1,024 slots are pre-created with the parent where
// that is the default (MariaDB: past its 1,000-row limit on recursive CTEs),
// and a rollup pass folds 40 parents with every slot pending (40,960 rows,
// past MySQL's 65,535 placeholders if deleted in one statement).
func TestTheWidestCounters(t *testing.T) {
	parallel(t)
	eachDB(t, func(t *testing.T, e *env) {
		db := e.db
		must(t, db.AutoMigrate(&Wide{}))
		parents := make([]Wide, 2)
		for i := range parents {
			parents[i].Name = "w"
			must(t, db.Create(&parents[i]).Error)
		}
		wantRows := int64(0)
		if e.kind == my {
			wantRows = 2 * 1024
		}
		if rows := rawInt(t, db, "SELECT COUNT(*) FROM wide_likes_slots"); rows != wantRows {
			t.Fatalf("%d slot rows of likes pre-created, want %d", rows, wantRows)
		}
		// Every slot of every parent pending: 2 x 1024 rows holding 1 each.
		for _, p := range parents {
			values := make([]map[string]any, 1024)
			for s := range values {
				values[s] = map[string]any{"wide_id": p.ID, "slot": s, "n": 1}
			}
			must(t, db.Table("wide_views_slots").CreateInBatches(values, 256).Error)
		}
		must(t, gormcounter.RollupPass(db, &Wide{}))
		// MySQL folds empty the slot rows (n = 0) and keep them.
		if pending := rawInt(t, db, "SELECT COUNT(*) FROM wide_views_slots WHERE n <> 0"); pending != 0 {
			t.Fatalf("%d slot rows still pending after a pass", pending)
		}
		var got []Wide
		must(t, db.Find(&got).Error)
		for _, w := range got {
			if w.Views != 1024 {
				t.Fatalf("wide %d: views %d, want 1024", w.ID, w.Views)
			}
		}
	})
}
