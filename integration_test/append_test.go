package integration_test

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/hotcounter/hotcounter"
	"github.com/hotcounter/hotcounter/gormcounter"
	"github.com/hotcounter/hotcounter/internal/testdb"
)

func storyClaps(t testing.TB, db *gorm.DB, id uint, live bool) int64 {
	t.Helper()
	q := db
	if live {
		q = db.Clauses(gormcounter.Live)
	}
	var s Story
	must(t, q.First(&s, id).Error)
	return s.Claps
}

// Append counters in both ORMs: every increment a delta row, a plain load
// reads the cached column until a pass folds, a live read is exact, a pass
// folds every delta, an assignment sets the total, and deleting the row
// removes its deltas.
func TestAppendCountersLoseNothing(t *testing.T) {
	eachORM(t, func(t *testing.T, o counterORM) {
		db := o.db()
		id := o.create(t, modelStory)
		writers, each := writersFor(o.kind())
		done := hammer(t, writers, each, func() error { return o.increment(modelStory, id, "claps", 1) })
		must(t, o.add(modelStory, id, "claps", 5))
		done += 5
		if n := rawInt(t, db, "SELECT COUNT(*) FROM story_claps_deltas"); n != int64(writers*each)+1 {
			t.Fatalf("%d delta rows, want one per increment (%d)", n, writers*each+1)
		}
		if got := o.cached(t, modelStory, id, "claps"); got != 0 {
			t.Fatalf("plain load before rollup: %d, want the cached 0", got)
		}
		if got := exactly(t, o, modelStory, id, "claps"); got != done {
			t.Fatalf("live: %d, want %d", got, done)
		}
		must(t, o.rollup(modelStory))
		if got := o.cached(t, modelStory, id, "claps"); got != done {
			t.Fatalf("after rollup: %d, want %d", got, done)
		}
		if n := rawInt(t, db, "SELECT COUNT(*) FROM story_claps_deltas"); n != 0 {
			t.Fatalf("rollup left %d delta rows", n)
		}
		must(t, o.increment(modelStory, id, "claps", 2))
		must(t, o.set(modelStory, id, "claps", 7))
		if got := exactly(t, o, modelStory, id, "claps"); got != 7 {
			t.Fatalf("after setting 7: live claps %d", got)
		}
		// Deleting the story removes its deltas.
		must(t, o.increment(modelStory, id, "claps", 1))
		must(t, o.remove(modelStory, id))
		if n := rawInt(t, db, "SELECT COUNT(*) FROM story_claps_deltas"); n != 0 {
			t.Fatalf("%d delta rows outlived their story", n)
		}
	}, pool(writersPool))
}

// A rollup loop folds while writers append; live reads never go back and
// the final total is exact. Both ORMs.
func TestAppendRollupUnderWriters(t *testing.T) {
	eachORM(t, func(t *testing.T, o counterORM) {
		id := o.create(t, modelStory)
		ctx, stop := context.WithCancel(context.Background())
		loop := make(chan error, 1)
		go func() { loop <- o.rollupLoop(ctx, modelStory, 2*time.Millisecond) }()
		stopReader := watchNeverBackwards([]int64{id}, "live claps", func(id int64) (int64, error) { return o.exact(modelStory, id, "claps") })
		done := hammer(t, 8, 100, func() error { return o.increment(modelStory, id, "claps", 1) })
		readErr := stopReader()
		stop()
		must(t, <-loop)
		must(t, readErr)
		must(t, o.rollup(modelStory))
		if got := o.cached(t, modelStory, id, "claps"); got != done {
			t.Fatalf("claps=%d after the final pass, want %d", got, done)
		}
	}, everyEntTable())
}

var foldRuns atomic.Int64

// Folds whose COMMIT reply is lost, and whose sessions are killed, fold
// every delta exactly once: rollup passes run through a TCP proxy that cuts
// the connection right after a COMMIT reached the server, and
// pg_terminate_backend ends their sessions now and then, while 8 writers
// append. GORM and ent.
func TestAppendFoldSurvivesCutConnections(t *testing.T) {
	eachORM(t, func(t *testing.T, o counterORM) {
		id := o.create(t, modelStory)
		proxy := newCuttingProxy(t, pgAddr(t))
		// The folder's sessions, by a name of this run's own: the other
		// ORM's run kills its own at the same time.
		app := "hc_fold_fault_" + strconv.FormatInt(foldRuns.Add(1), 10)
		viaProxy := testdb.WithParams(o.onEnv().dsn, map[string]string{"host": "127.0.0.1", "port": strconv.Itoa(proxy.port()), "application_name": app})
		folder := o.through(t, viaProxy, settings{BatchSize: 50})

		ctx, stop := context.WithCancel(context.Background())
		var failed, killed atomic.Int64
		var wg sync.WaitGroup
		wg.Go(func() { // fold passes, through the proxy
			for ctx.Err() == nil {
				if err := folder.rollup(modelStory); err != nil {
					failed.Add(1)
				}
			}
		})
		wg.Go(func() { // kill the folder's sessions now and then
			for ctx.Err() == nil {
				time.Sleep(23 * time.Millisecond)
				var n int64
				if o.db().Raw("SELECT COUNT(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = ?", app).Row().Scan(&n) == nil {
					killed.Add(n)
				}
			}
		})
		proxy.cutCommits.Store(5)
		// At least 1.5 s, and on until both faults have happened (a busy
		// machine can run few passes in 1.5 s), for at most 30 s.
		start := time.Now()
		done := hammer(t, 8, 1<<30, func() error {
			faulted := proxy.cut.Load() > 0 && killed.Load() > 0
			if since := time.Since(start); since > 30*time.Second || since > 1500*time.Millisecond && faulted {
				return errStop
			}
			return o.increment(modelStory, id, "claps", 1)
		})
		stop()
		wg.Wait()
		must(t, o.rollup(modelStory))
		got := o.cached(t, modelStory, id, "claps")
		t.Logf("%d increments; fold commits cut after reaching the server: %d; sessions killed: %d; failed passes: %d",
			done, proxy.cut.Load(), killed.Load(), failed.Load())
		if got != done {
			t.Fatalf("claps=%d after %d increments", got, done)
		}
		if proxy.cut.Load() == 0 || killed.Load() == 0 {
			t.Fatalf("a fault did not happen (cut %d, killed %d)", proxy.cut.Load(), killed.Load())
		}
	}, on(pg))
}

// The write-behind buffer writes append counters as delta rows.
func TestBufferWritesAppendCounters(t *testing.T) {
	parallel(t)
	e := open(t, pg)
	db := e.db
	must(t, db.AutoMigrate(&Story{}))
	s := Story{Title: "s"}
	must(t, db.Create(&s).Error)
	buf, err := gormcounter.NewBuffer(context.Background(), db, hotcounter.BufferConfig{Interval: 10 * time.Millisecond})
	must(t, err)
	ctx := context.Background()
	done := hammer(t, 8, 200, func() error { return buf.Increment(ctx, &Story{ID: s.ID}, "Claps", 1) })
	must(t, buf.Close(ctx))
	if got := storyClaps(t, db, s.ID, true); got != done {
		t.Fatalf("live claps=%d after %d buffered increments", got, done)
	}
}

// The MariaDB append fold does not wait for an open increment transaction
// of another parent (its uncommitted delta row, or the next-key lock).
func TestMariaDBAppendFoldDoesNotWait(t *testing.T) {
	parallel(t)
	e := open(t, my)
	db := e.db
	must(t, db.AutoMigrate(&Story{}))
	a, b := Story{Title: "a"}, Story{Title: "b"}
	must(t, db.Create(&a).Error)
	must(t, db.Create(&b).Error)
	must(t, gormcounter.Increment(db.Model(&Story{ID: a.ID}), "Claps", 1).Error)
	tx := db.Begin()
	must(t, gormcounter.Increment(tx.Model(&Story{ID: b.ID}), "Claps", 1).Error)
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- gormcounter.RollupPass(db, &Story{}) }()
	select {
	case err := <-done:
		must(t, err)
		tx.Rollback()
		return
	case <-time.After(waitLimit):
	}
	// Still waiting: now the caller's transaction increments a.
	errTx := gormcounter.Increment(tx.Model(&Story{ID: a.ID}), "Claps", 1).Error
	errRollup := <-done
	t.Errorf("Rollup waited %v for an unrelated open increment; then caller's increment of a: %v; rollup: %v",
		time.Since(start), errTx, errRollup)
	tx.Rollback()
}
