package integration_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hotcounter/hotcounter/gormcounter"
)

func TestRollupUnderConcurrentIncrementsIsExact(t *testing.T) {
	parallel(t)
	eachDB(t, func(t *testing.T, e *env) {
		db := e.db
		must(t, migrateAll(db))
		posts := []Post{newPost(t, db, "a"), newPost(t, db, "b"), newPost(t, db, "c")}

		ctx, stop := context.WithCancel(context.Background())
		loopDone := make(chan error, 1)
		go func() { loopDone <- gormcounter.RollupLoop(ctx, db, 2*time.Millisecond, nil, &Post{}) }()

		// Readers check while everything runs that the exact value never goes
		// backwards: a fold counted twice or missed would show as a jump.
		stopReaders := watchNeverBackwards(posts, "exact views", func(id uint) (int64, error) {
			var got Post
			err := db.Clauses(gormcounter.Live).First(&got, id).Error
			return got.Views, err
		})

		const writers, each = 8, 100
		var next atomic.Int64
		done := hammer(t, writers, each, func() error {
			p := posts[next.Add(1)%int64(len(posts))]
			return gormcounter.Increment(db.Model(&Post{ID: p.ID}), "Views", 1).Error
		})
		readErr := stopReaders()
		stop()
		if err := <-loopDone; err != nil {
			t.Fatalf("RollupLoop: %v", err)
		}
		if readErr != nil {
			t.Fatal(readErr)
		}

		var total int64
		for _, p := range posts {
			total += exact(t, db, p.ID).Views
		}
		if done != writers*each || total != done {
			t.Fatalf("exact total %d after %d acknowledged increments", total, done)
		}
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
			must(t, gormcounter.RollupPass(db, &Post{}))
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
	})
}

func TestRollupFoldsAndCachedReadsLag(t *testing.T) {
	parallel(t)
	eachDB(t, func(t *testing.T, e *env) {
		db := e.db
		must(t, migrateAll(db))
		a, b := newPost(t, db, "a"), newPost(t, db, "b")
		for i := 0; i < 30; i++ {
			must(t, gormcounter.Increment(db.Model(&a), "Views", 1).Error)
		}
		must(t, gormcounter.Increment(db.Model(&b), "Views", 5).Error)

		var cached Post
		must(t, db.First(&cached, a.ID).Error)
		if cached.Views != 0 {
			t.Fatalf("cached views = %d before a rollup, want 0", cached.Views)
		}
		must(t, gormcounter.RollupPass(db, &Post{}))
		must(t, db.First(&cached, a.ID).Error)
		if cached.Views != 30 {
			t.Fatalf("cached views = %d after a rollup, want 30", cached.Views)
		}
		// The rollup column is a real column: ORDER BY and WHERE work on it.
		var top []Post
		must(t, db.Where("views > ?", 1).Order("views DESC").Find(&top).Error)
		if len(top) != 2 || top[0].ID != a.ID || top[1].ID != b.ID {
			t.Fatalf("ordered by views: %+v", top)
		}
		must(t, gormcounter.Increment(db.Model(&a), "Views", 2).Error)
		if got := exact(t, db, a.ID).Views; got != 32 {
			t.Fatalf("live views = %d, want 32", got)
		}
	})
}

func TestRollupLoopStopsWithItsContext(t *testing.T) {
	parallel(t)
	e := open(t, lite)
	must(t, migrateAll(e.db))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- gormcounter.RollupLoop(ctx, e.db, time.Hour, nil, &Post{}) }()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("RollupLoop returned %v, want nil on cancel", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("RollupLoop did not return after its context was cancelled")
	}
	if err := gormcounter.RollupLoop(context.Background(), e.db, time.Second, nil, &Author{}); err == nil {
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
