package integration_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hotcounter/hotcounter/gormcounter"
	"gorm.io/gorm"
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
	before := func(db *gorm.DB) {
		if !strings.Contains(db.Statement.SQL.String(), g.table) {
			return
		}
		g.statements.Add(1)
		r := g.running.Add(1)
		for w := g.worst.Load(); r > w && !g.worst.CompareAndSwap(w, r); w = g.worst.Load() {
		}
		<-g.open
	}
	after := func(db *gorm.DB) {
		if strings.Contains(db.Statement.SQL.String(), g.table) {
			g.running.Add(-1)
		}
	}
	// Statements (gorm:raw) and queries (gorm:row: an increment that
	// returns rows, such as one that takes a free slot).
	must(t, db.Callback().Raw().Before("gorm:raw").Register(name, before))
	must(t, db.Callback().Raw().After("gorm:raw").Register(name+":after", after))
	must(t, db.Callback().Row().Before("gorm:row").Register(name, before))
	must(t, db.Callback().Row().After("gorm:row").Register(name+":after", after))
	t.Cleanup(func() {
		db.Callback().Raw().Remove(name)
		db.Callback().Raw().Remove(name + ":after")
		db.Callback().Row().Remove(name)
		db.Callback().Row().Remove(name + ":after")
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

// Increments of one post made outside a transaction while statements for
// it are in flight wait and go together: with every write of the slot
// table held until the calls have queued, at most Config.InFlight (default
// 2) statements reach the database at once, fewer statements than
// increments are sent, each caller learns that its post was found, and the
// total is exact (ent on SQLite: see below). Increments of a post that
// does not exist find no row, every combined caller alike. GORM and ent,
// for a sum and a rollup counter.
func TestConcurrentIncrementsShareStatements(t *testing.T) {
	eachORM(t, func(t *testing.T, o counterORM) {
		id := o.create(t, modelPost)
		const n = 32
		for _, c := range []struct{ field, table string }{{"likes", "post_likes_slots"}, {"views", "post_views_slots"}} {
			st := gateOf(c.table)
			staged := o.staged(t, settings{}, st)
			errs, held := st.burst(t, n, func(i int) error { return staged.increment(modelPost, id, c.field, int64(i+1)) })
			for i, err := range errs {
				if err != nil {
					t.Fatalf("%s call %d: %v", c.field, i, err)
				}
			}
			if held > 2 {
				t.Fatalf("%s: %d statements reached the database at once for one post, want at most 2", c.field, held)
			}
			t.Logf("%s: %d increments in %d statements", c.field, n, st.seen.Load())
			if _, isEnt := o.(entORM); isEnt && o.kind() == lite {
				// ent's own update of the entity (BEGIN, a read, COMMIT)
				// comes first there, and SQLite runs one at a time: the
				// increments reach the combining one after another, and
				// how many share a statement is down to timing.
				continue
			}
			if s := st.seen.Load(); s >= n {
				t.Fatalf("%s: %d statements for %d increments: none were combined", c.field, s, n)
			}
		}
		want := int64(n * (n + 1) / 2)
		if likes, views := exactly(t, o, modelPost, id, "likes"), exactly(t, o, modelPost, id, "views"); likes != want || views != want {
			t.Fatalf("likes=%d views=%d, want %d", likes, views, want)
		}

		st := gateOf("post_likes_slots")
		staged := o.staged(t, settings{}, st)
		errs, _ := st.burst(t, 8, func(int) error { return staged.increment(modelPost, id+1000, "likes", 1) })
		for i, err := range errs {
			if !errors.Is(err, errNoRow) {
				t.Fatalf("missing post, call %d: %v, want %v", i, err, errNoRow)
			}
		}
	}, pool(writersPool))
}

// An increment inside a transaction is that transaction's own statement,
// so a rollback discards exactly its own delta, however many increments
// run at once: with the slot table's writes held until the first has
// waited, every transaction sends its own. GORM and ent.
func TestIncrementsInTransactionsAreNeverCombined(t *testing.T) {
	eachORM(t, func(t *testing.T, o counterORM) {
		id := o.create(t, modelPost)
		n := 16
		if o.kind() == lite {
			n = 4 // one writer at a time: each waits for the one before
		}
		st := gateOf("post_likes_slots")
		staged := o.staged(t, settings{}, st)
		rollback := errors.New("roll back")
		go func() {
			waitStage(t, st.first, "the first statement")
			time.Sleep(100 * time.Millisecond)
			st.open()
		}()
		results := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				results[i] = staged.inTx(func(tx counterORM) error {
					if err := tx.increment(modelPost, id, "likes", 1); err != nil {
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
		if s := st.seen.Load(); s < int64(n) {
			t.Fatalf("%d statements for %d increments in transactions, want at least one each", s, n)
		}
		if got := exactly(t, o, modelPost, id, "likes"); got != int64(n/2) {
			t.Fatalf("likes=%d after %d committed and %d rolled back, want %d", got, n/2, n/2, n/2)
		}
	}, pool(writersPool))
}

// eachCombineConfig runs fn on SQLite and PostgreSQL, each twice: with
// combining off (InFlight: -1), the reference, which must pass, and with
// cfg, through a *gorm.DB with the plugin registered with that config.
func eachCombineConfig(t *testing.T, cfg gormcounter.Config, fn func(t *testing.T, e *env, db *gorm.DB)) {
	t.Helper()
	eachDB(t, func(t *testing.T, e *env) {
		must(t, migrateAll(e.db))
		for _, c := range []struct {
			name string
			cfg  gormcounter.Config
		}{{"combining off", gormcounter.Config{InFlight: -1}}, {"combining", cfg}} {
			t.Run(c.name, func(t *testing.T) { fn(t, e, withPlugin(t, e, c.cfg)) })
		}
	}, on(lite, pg))
}

// lockTableOf holds a PostgreSQL table lock that blocks every INSERT and
// UPDATE of table (SHARE mode conflicts with ROW EXCLUSIVE) in a transaction
// of its own, until release is called. Statements waiting on it end only when
// their context does, as a statement waiting on any lock would.
func lockTableOf(t *testing.T, db *gorm.DB, table string) (release func()) {
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

// stage holds the n-th statement that writes table (names it and is not a
// SELECT; counting from 1) at hold[n] until the channel is closed, and
// reports its arrival on arrived[n]. Other statements pass. An ORM calls pass with each statement
// before sending it: GORM from a Raw callback (newStage), ent from its
// driver (counterORM.staged).
type stage struct {
	table   string
	seen    atomic.Int64
	arrived map[int64]chan struct{}
	hold    map[int64]chan struct{}
	// shut, when not nil, holds every statement until open closes it;
	// first is closed when the first arrives.
	shut  chan struct{}
	first chan struct{}
}

// gateOf returns a stage of table that holds every statement until open
// is called.
func gateOf(table string) *stage {
	s := stageOf(table)
	s.shut, s.first = make(chan struct{}), make(chan struct{})
	return s
}

// open lets the statements a gate holds go, and those after them.
func (s *stage) open() { close(s.shut) }

// burst calls inc n times at once on a gate that is shut, waits until
// every call has started and the first statement is held (or every call
// has returned without one), lets the calls queue, and opens the gate. It
// returns each call's error and how many statements the gate held: those
// that reached the database at once.
func (s *stage) burst(t *testing.T, n int, inc func(i int) error) (errs []error, held int64) {
	t.Helper()
	errs = make([]error, n)
	var entered atomic.Int64
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			entered.Add(1)
			errs[i] = inc(i)
		}()
	}
	returned := make(chan struct{})
	go func() { wg.Wait(); close(returned) }()
	select {
	case <-s.first:
	case <-returned:
	case <-time.After(10 * time.Second):
		t.Fatal("timed out waiting for the first statement")
	}
	for entered.Load() < int64(n) {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond) // let the calls reach the queue
	held = s.seen.Load()
	s.open()
	wg.Wait()
	return errs, held
}

// stageOf returns a stage of table that holds the statements stages.
func stageOf(table string, stages ...int64) *stage {
	s := &stage{table: table, arrived: map[int64]chan struct{}{}, hold: map[int64]chan struct{}{}}
	for _, n := range stages {
		s.arrived[n] = make(chan struct{})
		s.hold[n] = make(chan struct{})
	}
	return s
}

// pass counts statement if it names the stage's table, and holds it if
// the stage holds its number.
func (s *stage) pass(statement string) {
	q := statement
	if i := strings.Index(q, "query="); i >= 0 { // ent's driver log: "driver.Query: query=..."
		q = q[i+len("query="):]
	}
	if !strings.Contains(q, s.table) || strings.HasPrefix(strings.TrimSpace(q), "SELECT") {
		return
	}
	n := s.seen.Add(1)
	if s.shut != nil {
		if n == 1 {
			close(s.first)
		}
		<-s.shut
	}
	if a, ok := s.arrived[n]; ok {
		close(a)
		<-s.hold[n]
	}
}

// newStage returns a stage of table on db's statements, until t ends.
func newStage(t *testing.T, db *gorm.DB, table string, stages ...int64) *stage {
	s := stageOf(table, stages...)
	stageGorm(t, db, s)
	return s
}

// stageGorm passes db's statements through s, until t ends.
func stageGorm(t testing.TB, db *gorm.DB, s *stage) {
	name := "test:stage:" + t.Name()
	must(t, db.Callback().Raw().Before("gorm:raw").Register(name, func(db *gorm.DB) { s.pass(db.Statement.SQL.String()) }))
	t.Cleanup(func() { db.Callback().Raw().Remove(name) })
}

func waitStage(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// An increment whose context's deadline passes while its statement waits on
// a lock fails with context.DeadlineExceeded, as any statement of the ORM
// does, with combining on or off: a combined statement runs under its
// callers' contexts, but a lone increment's deadline is still reported as
// a deadline (code that maps DeadlineExceeded to a 504 or a retry must not
// see a cancellation). GORM and ent.
func TestCombinedIncrementReportsItsDeadline(t *testing.T) {
	eachORM(t, func(t *testing.T, o counterORM) {
		for _, c := range []struct {
			name string
			s    settings
		}{{"combining off", settings{InFlight: -1}}, {"default", settings{}}} {
			t.Run(c.name, func(t *testing.T) {
				o := o.with(t, c.s)
				id := o.create(t, modelPost)
				release := lockTableOf(t, o.db(), "post_likes_slots")
				defer release()
				ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
				defer cancel()
				err := o.within(ctx).increment(modelPost, id, "likes", 1)
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("a lone increment past its deadline: error %v (context.Canceled: %v), want context.DeadlineExceeded",
						err, errors.Is(err, context.Canceled))
				}
			})
		}
	}, on(pg))
}

// A caller that queued behind a statement in flight and was then handed the
// next batch, which runs on a goroutine of its own, returns at its own
// deadline, even while another caller in the batch (without a deadline)
// keeps the statement waiting on a lock for seconds: a caller whose context
// ends while it waits returns the context's error at once. The batch may
// outlive the call that led it, and must not touch what the caller owns
// (GORM resets the caller's statement as the call returns: -race caught
// the batch reading it). The others' increments all count. GORM and ent.
func TestCombinedCallerLeavesAtItsDeadline(t *testing.T) {
	eachORM(t, func(t *testing.T, o counterORM) {
		id := o.create(t, modelPost)
		st := stageOf("post_likes_slots", 1, 2)
		staged := o.staged(t, settings{InFlight: 1}, st)
		inc := func(ctx context.Context) error { return staged.within(ctx).increment(modelPost, id, "likes", 1) }

		resX := make(chan error, 1)
		go func() { resX <- inc(context.Background()) }()
		waitStage(t, st.arrived[1], "the first statement")

		// A queues first (it will lead the next batch), then B, which has no
		// deadline.
		ctxA, cancelA := context.WithTimeout(context.Background(), 1500*time.Millisecond)
		defer cancelA()
		type result struct {
			err error
			end time.Time
		}
		resA, resB := make(chan result, 1), make(chan error, 1)
		go func() { err := inc(ctxA); resA <- result{err, time.Now()} }()
		time.Sleep(100 * time.Millisecond)
		go func() { resB <- inc(context.Background()) }()
		time.Sleep(100 * time.Millisecond)

		// The first statement finishes; the batch {A, B} reaches the
		// database, where a lock holds it.
		close(st.hold[1])
		waitStage(t, st.arrived[2], "the batch statement")
		release := lockTableOf(t, o.db(), "post_likes_slots")
		defer release()
		close(st.hold[2])

		deadline, _ := ctxA.Deadline()
		select {
		case a := <-resA:
			if !errors.Is(a.err, context.DeadlineExceeded) || !strings.Contains(a.err.Error(), o.name(modelPost, "likes")) {
				t.Fatalf("A, whose deadline passed while the lock was held: error %v, want context.DeadlineExceeded naming %s", a.err, o.name(modelPost, "likes"))
			}
			t.Logf("A returned %v after its deadline: %v", a.end.Sub(deadline).Round(time.Millisecond), a.err)
		case <-time.After(time.Until(deadline) + 2*time.Second):
			release()
			a := <-resA
			t.Errorf("A, whose deadline passed, was still blocked 2s later (returned %v after its deadline, error %v)",
				a.end.Sub(deadline).Round(time.Millisecond), a.err)
		}
		release()
		if err := <-resX; err != nil {
			t.Fatalf("X: %v", err)
		}
		if err := <-resB; err != nil {
			t.Fatalf("B: %v", err)
		}
		// X and B count; A's increment went with B's statement or not
		// (its outcome is unknown to it, as with any statement cancelled
		// while it commits).
		if got := exactly(t, o, modelPost, id, "likes"); got != 2 && got != 3 {
			t.Errorf("likes %d after X and B (and perhaps A), want 2 or 3", got)
		}
	}, on(pg))
}

// stringerRef is a parent key type whose String() does not identify its value
// (as with an enum whose String() has a catch-all case, or a type that masks
// ids in logs). The driver binds its numeric value.
type stringerRef uint

func (stringerRef) String() string { return "ref" }

// Increments of two different posts, by Where("id = ?", ref) with a ref type
// whose String() says the same for both, never share a statement: the
// combining key holds the arguments' raw values, not their String(). Each post
// gets its own increments, and each caller its true RowsAffected.
func TestCombineKeyUsesRawValues(t *testing.T) {
	parallel(t)
	eachCombineConfig(t, gormcounter.Config{}, func(t *testing.T, e *env, db *gorm.DB) {
		p1, p2 := newPost(t, db, "one"), newPost(t, db, "two")
		ids := []uint{p1.ID, p2.ID}
		g := newSlotGate(t, db, "post_likes_slots")
		const n = 8
		results := burst(t, g, n, func(i int) *gorm.DB {
			return gormcounter.Increment(db.Model(&Post{}).Where("id = ?", stringerRef(ids[i%2])), "Likes", 1)
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

// Three increments of 2^62, whose true total is past int64, are never added up
// in one combined statement: the sum would wrap. The first is held in
// flight while the other two queue behind it, as one batch whose sum
// overflows; they run alone. Either a caller is told of the overflow, or
// the load refuses the total: never a silently wrapped, negative counter.
// GORM and ent.
func TestCombinedSumThatWouldOverflowRunsAlone(t *testing.T) {
	eachORM(t, func(t *testing.T, o counterORM) {
		id := o.create(t, modelPost)
		st := stageOf("post_likes_slots", 1)
		staged := o.staged(t, settings{InFlight: 1}, st)
		const delta = int64(1) << 62
		errs := make(chan error, 3)
		go func() { errs <- staged.increment(modelPost, id, "likes", delta) }()
		waitStage(t, st.arrived[1], "the first statement")
		for range 2 {
			go func() { errs <- staged.increment(modelPost, id, "likes", delta) }()
		}
		time.Sleep(100 * time.Millisecond) // let both queue behind the first
		close(st.hold[1])
		var failed error
		for range 3 {
			if err := <-errs; err != nil {
				failed = err
			}
		}
		if failed != nil {
			t.Logf("an overflow reported to a caller: %v", failed)
			return
		}
		v, err := o.exact(modelPost, id, "likes")
		if err != nil {
			t.Logf("the load refuses a total past int64: %v", err)
			return
		}
		if v <= 0 {
			t.Fatalf("three increments of %d were all acknowledged (%d statements) and the counter reads %d (max int64 %d)",
				delta, st.seen.Load(), v, int64(math.MaxInt64))
		}
	})
}

// A caller that uses its own Logger (db.Debug(), a Session with a Logger that
// records slow or failed queries) sees the statement that carried its
// increment: increments with different loggers never share a statement.
func TestCombineKeepsLoggersApart(t *testing.T) {
	parallel(t)
	eachCombineConfig(t, gormcounter.Config{InFlight: 1}, func(t *testing.T, e *env, db *gorm.DB) {
		post := newPost(t, db, "logged")
		st := newStage(t, db, "post_likes_slots", 1)
		rec := &counting{}
		own := db.Session(&gorm.Session{Logger: rec})

		resX := make(chan *gorm.DB, 1)
		go func() { resX <- gormcounter.Increment(db.Model(&Post{ID: post.ID}), "Likes", 1) }()
		waitStage(t, st.arrived[1], "the first statement")
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

// TestCombiningOffSendsAStatementPerIncrement: with combining off
// (InFlight < 0), increments of one row that arrive while another is in
// flight do not wait for it and each send their own writes, as many as a
// lone increment sends; with it on, they go together in fewer. The total
// is exact either way. GORM and ent.
func TestCombiningOffSendsAStatementPerIncrement(t *testing.T) {
	eachORM(t, func(t *testing.T, o counterORM) {
		for _, c := range []struct {
			name     string
			s        settings
			combined bool
		}{{"off", settings{InFlight: -1}, false}, {"on", settings{InFlight: 1}, true}} {
			t.Run(c.name, func(t *testing.T) {
				id := o.create(t, modelPost)
				// The writes of one increment, alone.
				lone := stageOf("post_likes_slots")
				must(t, o.staged(t, c.s, lone).increment(modelPost, id, "likes", 1))
				one := lone.seen.Load()

				// The first of n holds at its first write while the others
				// arrive.
				const n = 9
				st := stageOf("post_likes_slots", 1)
				staged := o.staged(t, c.s, st)
				errs := make(chan error, n)
				go func() { errs <- staged.increment(modelPost, id, "likes", 1) }()
				waitStage(t, st.arrived[1], "the first write")
				for range n - 1 {
					go func() { errs <- staged.increment(modelPost, id, "likes", 1) }()
				}
				if c.combined {
					time.Sleep(100 * time.Millisecond) // let them queue behind the first
				} else {
					// Each goes on to its own write, and waits for nothing.
					for deadline := time.Now().Add(10 * time.Second); st.seen.Load() < n && time.Now().Before(deadline); {
						time.Sleep(time.Millisecond)
					}
					if got := st.seen.Load(); got < n {
						t.Errorf("combining off: %d of %d increments reached their write while the first was held: the others waited", got, n)
					}
				}
				close(st.hold[1])
				for range n {
					must(t, <-errs)
				}
				writes := st.seen.Load()
				t.Logf("%d increments: %d writes (one alone: %d)", n, writes, one)
				if c.combined && writes >= n*one {
					t.Errorf("combining on: %d increments sent %d writes, as many as alone (%d each)", n, writes, one)
				}
				if !c.combined && writes < n*one {
					t.Errorf("combining off: %d increments sent %d writes, want %d or more (%d each, as alone; more if retried)", n, writes, n*one, one)
				}
				if got := exactly(t, o, modelPost, id, "likes"); got != n+1 {
					t.Errorf("likes %d, want %d", got, n+1)
				}
			})
		}
	})
}
