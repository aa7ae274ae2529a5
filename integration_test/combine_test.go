package integration_test

import (
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/hotcounter/hotcounter/gormcounter"
)

// slotGate holds back the statements that write one slot table until it is
// opened, and records how many ran and how many ran at once. It lets a test
// make increments queue behind statements in flight, as they do under load.
type slotGate struct {
	table      string
	open       chan struct{}
	statements atomic.Int64
	running    atomic.Int64
	worst      atomic.Int64
}

func newSlotGate(t *testing.T, db *gorm.DB, table string) *slotGate {
	g := &slotGate{table: table, open: make(chan struct{})}
	name := "test:gate:" + t.Name()
	must(t, db.Callback().Raw().Before("gorm:raw").Register(name, func(db *gorm.DB) {
		if !strings.Contains(db.Statement.SQL.String(), g.table) {
			return
		}
		g.statements.Add(1)
		r := g.running.Add(1)
		for w := g.worst.Load(); r > w && !g.worst.CompareAndSwap(w, r); w = g.worst.Load() {
		}
		<-g.open
	}))
	must(t, db.Callback().Raw().After("gorm:raw").Register(name+":after", func(db *gorm.DB) {
		if strings.Contains(db.Statement.SQL.String(), g.table) {
			g.running.Add(-1)
		}
	}))
	t.Cleanup(func() {
		db.Callback().Raw().Remove(name)
		db.Callback().Raw().Remove(name + ":after")
	})
	return g
}

// burst starts n goroutines that each call inc once while gate g is shut,
// waits until all have called it and the first statements are held, opens
// the gate, and returns each call's result.
func burst(t *testing.T, g *slotGate, n int, inc func(i int) *gorm.DB) []*gorm.DB {
	t.Helper()
	results := make([]*gorm.DB, n)
	var entered atomic.Int64
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			entered.Add(1)
			results[i] = inc(i)
		}()
	}
	for entered.Load() < int64(n) || g.statements.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond) // let the calls reach the queue
	close(g.open)
	wg.Wait()
	return results
}

// TestConcurrentIncrementsShareStatements: increments of one post made
// outside a transaction while statements for it are in flight wait and go
// together. Each caller gets the result of the statement that carried its
// delta; at most Config.InFlight (default 2) statements run at once; the
// total is exact.
func TestConcurrentIncrementsShareStatements(t *testing.T) {
	eachDB(t, func(t *testing.T, e *env) {
		db := e.db
		must(t, migrateAll(db))
		post := newPost(t, db, "viral")
		for _, c := range []struct{ field, table string }{{"Likes", "post_likes_slots"}, {"Views", "post_views_slots"}} {
			g := newSlotGate(t, db, c.table)
			const n = 32
			results := burst(t, g, n, func(i int) *gorm.DB {
				return gormcounter.Increment(db.Model(&Post{ID: post.ID}), c.field, int64(i+1))
			})
			for i, r := range results {
				if r.Error != nil || r.RowsAffected != 1 {
					t.Fatalf("%s call %d: RowsAffected %d, error %v; want 1, nil", c.field, i, r.RowsAffected, r.Error)
				}
			}
			if s := g.statements.Load(); s >= n {
				t.Fatalf("%s: %d statements for %d increments: none were combined", c.field, s, n)
			}
			if w := g.worst.Load(); w > 2 {
				t.Fatalf("%s: %d statements ran at once for one post, want at most 2", c.field, w)
			}
			t.Logf("%s: %d increments in %d statements", c.field, n, g.statements.Load())
		}
		got := exact(t, db, post.ID)
		if want := int64(32 * 33 / 2); got.Likes != want || got.Views != want {
			t.Fatalf("likes=%d views=%d, want %d", got.Likes, got.Views, want)
		}

		// A post that does not exist: every combined caller sees 0 rows.
		g := newSlotGate(t, db, "post_likes_slots")
		for i, r := range burst(t, g, 8, func(int) *gorm.DB {
			return gormcounter.Increment(db.Model(&Post{ID: post.ID + 1000}), "Likes", 1)
		}) {
			if r.Error != nil || r.RowsAffected != 0 {
				t.Fatalf("missing post, call %d: RowsAffected %d, error %v; want 0, nil", i, r.RowsAffected, r.Error)
			}
		}
	})
}

// TestIncrementsInTransactionsAreNeverCombined: an increment inside a
// transaction is that transaction's own statement, so a rollback discards
// exactly its own delta, however many increments run at once.
func TestIncrementsInTransactionsAreNeverCombined(t *testing.T) {
	eachDB(t, func(t *testing.T, e *env) {
		db := e.db
		must(t, migrateAll(db))
		post := newPost(t, db, "viral")
		g := newSlotGate(t, db, "post_likes_slots")
		n := 16
		if e.kind == lite {
			n = 4 // one writer at a time: each waits for the one before
		}
		rollback := errors.New("roll back")
		results := make([]error, n)
		go func() {
			for g.statements.Load() == 0 {
				time.Sleep(time.Millisecond)
			}
			time.Sleep(100 * time.Millisecond)
			close(g.open)
		}()
		var wg sync.WaitGroup
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				results[i] = db.Transaction(func(tx *gorm.DB) error {
					if err := gormcounter.Increment(tx.Model(&Post{ID: post.ID}), "Likes", 1).Error; err != nil {
						return err
					}
					if i%2 == 1 {
						return rollback
					}
					return nil
				})
			}()
		}
		wg.Wait()
		for i, err := range results {
			if want := map[bool]error{true: rollback, false: nil}[i%2 == 1]; !errors.Is(err, want) {
				t.Fatalf("transaction %d: %v, want %v", i, err, want)
			}
		}
		if s := g.statements.Load(); s != int64(n) {
			t.Fatalf("%d statements for %d increments in transactions, want one each", s, n)
		}
		if got := exact(t, db, post.ID).Likes; got != int64(n/2) {
			t.Fatalf("likes=%d after %d committed and %d rolled back, want %d", got, n/2, n/2, n/2)
		}
	})
}
