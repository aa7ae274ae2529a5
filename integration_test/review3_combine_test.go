package integration_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/hotcounter/hotcounter/gormcounter"
)

// review3Kinds: the databases these tests run on (SQLite and PostgreSQL).
var review3Kinds = []dbKind{lite, pg}

func review3Each(t *testing.T, fn func(t *testing.T, e *env)) {
	t.Helper()
	for _, k := range review3Kinds {
		t.Run(string(k), func(t *testing.T) { fn(t, open(t, k)) })
	}
}

// review3EachConfig runs fn on SQLite and PostgreSQL, each twice: with
// combining off (InFlight: -1), the reference, which must pass, and with
// cfg, through a *gorm.DB with the plugin registered with that config.
func review3EachConfig(t *testing.T, cfg gormcounter.Config, fn func(t *testing.T, e *env, db *gorm.DB)) {
	t.Helper()
	review3Each(t, func(t *testing.T, e *env) {
		must(t, migrateAll(e.db))
		for _, c := range []struct {
			name string
			cfg  gormcounter.Config
		}{{"combining off", gormcounter.Config{InFlight: -1}}, {"combining", cfg}} {
			t.Run(c.name, func(t *testing.T) { fn(t, e, withPlugin(t, e, c.cfg)) })
		}
	})
}

// review3LockTable holds a PostgreSQL table lock that blocks every INSERT and
// UPDATE of table (SHARE mode conflicts with ROW EXCLUSIVE) in a transaction
// of its own, until release is called. Statements waiting on it end only when
// their context does, as a statement waiting on any lock would.
func review3LockTable(t *testing.T, db *gorm.DB, table string) (release func()) {
	t.Helper()
	held, done := make(chan error, 1), make(chan struct{})
	finished := make(chan error, 1)
	go func() {
		finished <- db.Transaction(func(tx *gorm.DB) error {
			err := tx.Exec("LOCK TABLE " + table + " IN SHARE MODE").Error
			held <- err
			if err != nil {
				return err
			}
			<-done
			return nil
		})
	}()
	must(t, <-held)
	var once atomic.Bool
	return func() {
		if once.Swap(true) {
			return
		}
		close(done)
		if err := <-finished; err != nil {
			t.Errorf("lock holder: %v", err)
		}
	}
}

// review3Stage is a Raw callback that holds the n-th statement writing
// table (counting from 1) at hold[n] until the channel is closed, and
// reports its arrival on arrived[n]. Other statements pass.
type review3Stage struct {
	table   string
	seen    atomic.Int64
	arrived map[int64]chan struct{}
	hold    map[int64]chan struct{}
}

func newReview3Stage(t *testing.T, db *gorm.DB, table string, stages ...int64) *review3Stage {
	s := &review3Stage{table: table, arrived: map[int64]chan struct{}{}, hold: map[int64]chan struct{}{}}
	for _, n := range stages {
		s.arrived[n] = make(chan struct{})
		s.hold[n] = make(chan struct{})
	}
	name := "test:review3stage:" + t.Name()
	must(t, db.Callback().Raw().Before("gorm:raw").Register(name, func(db *gorm.DB) {
		if !strings.Contains(db.Statement.SQL.String(), s.table) {
			return
		}
		n := s.seen.Add(1)
		if a, ok := s.arrived[n]; ok {
			close(a)
			<-s.hold[n]
		}
	}))
	t.Cleanup(func() { db.Callback().Raw().Remove(name) })
	return s
}

func review3Wait(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// TestReview3DeadlineIsReportedAsDeadline (a regression test from a review; the defect it describes
// is fixed): an increment whose context's
// deadline passes while its statement waits on a lock fails with
// context.DeadlineExceeded, as any GORM statement does. With combining on
// (the default), every statement runs under context.WithoutCancel plus a
// cancel fired when the callers' contexts end, so the statement is
// cancelled with context.Canceled: even a lone increment, which nothing was
// combined with, no longer reports its timeout as a timeout (code that maps
// DeadlineExceeded to a 504 or a retry sees a cancellation instead).
func TestReview3DeadlineIsReportedAsDeadline(t *testing.T) {
	e := open(t, pg)
	must(t, migrateAll(e.db))
	for _, c := range []struct {
		name string
		cfg  gormcounter.Config
	}{{"combining off", gormcounter.Config{InFlight: -1}}, {"default", gormcounter.Config{}}} {
		t.Run(c.name, func(t *testing.T) {
			db := withPlugin(t, e, c.cfg)
			post := newPost(t, db, "timeout")
			release := review3LockTable(t, e.db, "post_likes_slots")
			defer release()
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			r := gormcounter.Increment(db.WithContext(ctx).Model(&Post{ID: post.ID}), "Likes", 1)
			if !errors.Is(r.Error, context.DeadlineExceeded) {
				t.Fatalf("a lone increment past its deadline: error %v (context.Canceled: %v), want context.DeadlineExceeded",
					r.Error, errors.Is(r.Error, context.Canceled))
			}
		})
	}
}

// TestReview3CallerLeavesAtItsDeadline (a regression test from a review; the defect it describes
// is fixed): a caller that queued behind a
// statement in flight and was then handed the next batch runs that batch in
// its own goroutine. The batch's statement is cancelled only when every
// caller it carries has given up, so when another caller in the batch has
// no deadline, the leader stays blocked after its own deadline for as long
// as the statement waits (here, a lock held for seconds). README: "A caller
// whose context ends while it waits returns the context's error at once".
// Without combining, its own statement would have been cancelled at its
// deadline.
func TestReview3CallerLeavesAtItsDeadline(t *testing.T) {
	e := open(t, pg)
	must(t, migrateAll(e.db))
	db := withPlugin(t, e, gormcounter.Config{InFlight: 1})
	post := newPost(t, db, "leader")
	st := newReview3Stage(t, db, "post_likes_slots", 1, 2)
	inc := func(ctx context.Context) *gorm.DB {
		return gormcounter.Increment(db.WithContext(ctx).Model(&Post{ID: post.ID}), "Likes", 1)
	}

	resX := make(chan *gorm.DB, 1)
	go func() { resX <- inc(context.Background()) }()
	review3Wait(t, st.arrived[1], "the first statement")

	// A queues first (it will lead the next batch), then B, which has no
	// deadline.
	ctxA, cancelA := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancelA()
	type result struct {
		r   *gorm.DB
		end time.Time
	}
	resA, resB := make(chan result, 1), make(chan *gorm.DB, 1)
	go func() { r := inc(ctxA); resA <- result{r, time.Now()} }()
	time.Sleep(100 * time.Millisecond)
	go func() { resB <- inc(context.Background()) }()
	time.Sleep(100 * time.Millisecond)

	// The first statement finishes; the batch {A, B} reaches the database,
	// where a lock holds it.
	close(st.hold[1])
	review3Wait(t, st.arrived[2], "the batch statement")
	release := review3LockTable(t, e.db, "post_likes_slots")
	defer release()
	close(st.hold[2])

	deadline, _ := ctxA.Deadline()
	select {
	case a := <-resA:
		if a.r.Error == nil {
			t.Fatalf("A returned no error, though the lock was held past its deadline")
		}
		t.Logf("A returned %v after its deadline: %v", a.end.Sub(deadline).Round(time.Millisecond), a.r.Error)
	case <-time.After(time.Until(deadline) + 2*time.Second):
		release()
		a := <-resA
		t.Errorf("A, whose deadline passed, was still blocked 2s later (returned %v after its deadline, error %v, RowsAffected %d)",
			a.end.Sub(deadline).Round(time.Millisecond), a.r.Error, a.r.RowsAffected)
	}
	release()
	if r := <-resX; r.Error != nil {
		t.Fatalf("X: %v", r.Error)
	}
	if r := <-resB; r.Error != nil || r.RowsAffected != 1 {
		t.Fatalf("B: RowsAffected %d, error %v", r.RowsAffected, r.Error)
	}
}

// review3Ref is a parent key type whose String() does not identify its value
// (as with an enum whose String() has a catch-all case, or a type that masks
// ids in logs). The driver binds its numeric value.
type review3Ref uint

func (review3Ref) String() string { return "ref" }

// TestReview3KeyIgnoresStringMethod (a regression test from a review; the defect it describes
// is fixed): combineKey writes numeric arguments with
// fmt's %v, which calls String(). Increments of two different posts, by
// Where("id = ?", ref), then get one key and share one statement, which adds
// the batch's sum to the leader's post: the other post's increments are
// written to the wrong row, and both callers are told RowsAffected 1.
func TestReview3KeyIgnoresStringMethod(t *testing.T) {
	review3EachConfig(t, gormcounter.Config{}, func(t *testing.T, e *env, db *gorm.DB) {
		p1, p2 := newPost(t, db, "one"), newPost(t, db, "two")
		ids := []uint{p1.ID, p2.ID}
		g := newSlotGate(t, db, "post_likes_slots")
		const n = 8
		results := burst(t, g, n, func(i int) *gorm.DB {
			return gormcounter.Increment(db.Model(&Post{}).Where("id = ?", review3Ref(ids[i%2])), "Likes", 1)
		})
		for i, r := range results {
			if r.Error != nil || r.RowsAffected != 1 {
				t.Fatalf("call %d: RowsAffected %d, error %v", i, r.RowsAffected, r.Error)
			}
		}
		got1, got2 := exact(t, db, p1.ID).Likes, exact(t, db, p2.ID).Likes
		if got1 != n/2 || got2 != n/2 {
			t.Fatalf("post %d has %d likes and post %d has %d, want %d each (%d statements for %d increments)",
				p1.ID, got1, p2.ID, got2, n/2, g.statements.Load(), n)
		}
	})
}

// TestReview3SumOverflowRunsAlone (a regression test from a review; the defect it describes
// is fixed): a batch adds the sum of its deltas, computed
// in int64 without an overflow check. Three increments of 2^62 (their true
// total, 3*2^62, is past int64) are all acknowledged, and the counter then
// reads a negative number, where without combining the database refuses the
// statement that overflows a slot or the load fails: never a silently
// wrapped total.
func TestReview3SumOverflowRunsAlone(t *testing.T) {
	review3EachConfig(t, gormcounter.Config{InFlight: 1}, func(t *testing.T, e *env, db *gorm.DB) {
		post := newPost(t, db, "huge")
		g := newSlotGate(t, db, "post_likes_slots")
		const delta = int64(1) << 62
		results := burst(t, g, 3, func(int) *gorm.DB {
			return gormcounter.Increment(db.Model(&Post{ID: post.ID}), "Likes", delta)
		})
		for _, r := range results {
			if r.Error != nil {
				return // an overflow reported to a caller: not wrapped
			}
		}
		var p Post
		if err := db.Clauses(gormcounter.Live).First(&p, post.ID).Error; err != nil {
			return // the load refuses a total past int64: not wrapped
		}
		if p.Likes <= 0 {
			t.Fatalf("three increments of %d were all acknowledged in %d statements and the counter reads %d (max int64 %d)",
				delta, g.statements.Load(), p.Likes, int64(math.MaxInt64))
		}
	})
}

// TestReview3OtherLoggerGetsItsStatement (a regression test from a review; the defect it describes
// is fixed): an increment combined into a
// batch that another session leads runs on the leader's *gorm.DB, so it is
// traced by the leader's Logger only. A caller that uses its own Logger
// (db.Debug(), a Session with a Logger that records slow or failed queries)
// never sees the statement that carried its increment.
func TestReview3OtherLoggerGetsItsStatement(t *testing.T) {
	review3EachConfig(t, gormcounter.Config{InFlight: 1}, func(t *testing.T, e *env, db *gorm.DB) {
		post := newPost(t, db, "logged")
		st := newReview3Stage(t, db, "post_likes_slots", 1)
		rec := &counting{}
		own := db.Session(&gorm.Session{Logger: rec})

		resX := make(chan *gorm.DB, 1)
		go func() { resX <- gormcounter.Increment(db.Model(&Post{ID: post.ID}), "Likes", 1) }()
		review3Wait(t, st.arrived[1], "the first statement")
		resA, resF := make(chan *gorm.DB, 1), make(chan *gorm.DB, 1)
		go func() { resA <- gormcounter.Increment(db.Model(&Post{ID: post.ID}), "Likes", 1) }()
		time.Sleep(100 * time.Millisecond)
		go func() { resF <- gormcounter.Increment(own.Model(&Post{ID: post.ID}), "Likes", 1) }()
		time.Sleep(100 * time.Millisecond)
		close(st.hold[1])
		for _, ch := range []chan *gorm.DB{resX, resA, resF} {
			if r := <-ch; r.Error != nil || r.RowsAffected != 1 {
				t.Fatalf("RowsAffected %d, error %v", r.RowsAffected, r.Error)
			}
		}
		if got := exact(t, db, post.ID).Likes; got != 3 {
			t.Fatalf("likes = %d, want 3", got)
		}
		traced := 0
		for _, s := range rec.statements() {
			if strings.Contains(s, "post_likes_slots") {
				traced++
			}
		}
		if traced == 0 {
			t.Fatalf("the session's own Logger traced %d statements and none wrote its increment (%d statements in all)",
				rec.count(), st.seen.Load())
		}
	})
}
