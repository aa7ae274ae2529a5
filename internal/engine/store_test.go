package engine_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	_ "github.com/glebarez/go-sqlite" // the pure-Go SQLite driver, "sqlite"

	"github.com/hotcounter/hotcounter"
	"github.com/hotcounter/hotcounter/internal/countersql"
	"github.com/hotcounter/hotcounter/internal/driver"
	"github.com/hotcounter/hotcounter/internal/engine"
	"github.com/hotcounter/hotcounter/internal/spec"
	"github.com/hotcounter/hotcounter/internal/testdb"
)

// These tests drive the engine on SQLite through database/sql alone, with
// no ORM: what they check is the engine's own, whichever ORM translates
// into it. The behaviour tests of integration_test run the same operations
// through both ORMs on the three databases.

// sqlConn runs countersql statements on a database/sql pool or transaction.
type sqlConn struct {
	ex interface {
		ExecContext(context.Context, string, ...any) (sql.Result, error)
		QueryContext(context.Context, string, ...any) (*sql.Rows, error)
	}
}

// sqlWriter collects a statement's text and arguments (SQLite's ? places).
type sqlWriter struct {
	b    *strings.Builder
	args *[]any
}

func (w sqlWriter) WriteString(s string) { w.b.WriteString(s) }
func (w sqlWriter) Arg(v any)            { w.b.WriteString("?"); *w.args = append(*w.args, v) }
func (w sqlWriter) Ident(name string)    { w.b.WriteString(countersql.QuoteIdent(name, false)) }

func render(build func(countersql.Writer)) (string, []any) {
	var b strings.Builder
	var args []any
	build(sqlWriter{&b, &args})
	return b.String(), args
}

func (c sqlConn) Exec(ctx context.Context, build func(countersql.Writer)) (int64, error) {
	query, args := render(build)
	res, err := c.ex.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (c sqlConn) Query(ctx context.Context, build func(countersql.Writer)) (engine.Rows, error) {
	query, args := render(build)
	return c.ex.QueryContext(ctx, query, args...)
}

// sqlSession is an engine.Session over a pool (inTx false) or one of its
// transactions.
type sqlSession struct {
	sqlConn
	db   *sql.DB
	inTx bool
}

func (s sqlSession) InTx() bool { return s.inTx }

func (s sqlSession) Begin(ctx context.Context, _ bool, fn func(engine.Session) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(sqlSession{sqlConn{tx}, s.db, true}); err != nil {
		return errors.Join(err, tx.Rollback())
	}
	return tx.Commit()
}

func (sqlSession) ParentGone(err error) bool { return engine.ForeignKeyViolation(err) }

// fixture is a SQLite database with posts and the tables of one counter of
// theirs, posts.views, declared with opts.
type fixture struct {
	t     *testing.T
	ctx   context.Context
	s     sqlSession
	store engine.Store
	c     engine.Counter
	ids   []any
}

func newFixture(t *testing.T, opts spec.Options, posts int) *fixture {
	t.Helper()
	db, err := sql.Open("sqlite", testdb.SQLite(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	d, err := driver.For("sqlite")
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, ctx: context.Background(), s: sqlSession{sqlConn{db}, db, false},
		store: engine.Store{Dialect: d, Settings: spec.Settings{}.Resolved(), Storages: &engine.Storages{}, Pkg: "test"}}
	f.c = engine.Counter{Name: "Post.Views", Column: "views", Options: opts, Table: countersql.Table{
		Parent: "posts", ParentKey: "id", Column: "views", Slots: "post_views_slots", Owner: "post_id"}}
	ddl := []string{`CREATE TABLE posts (id INTEGER PRIMARY KEY, title TEXT)`}
	if opts.Mode.HasColumn() {
		ddl = []string{`CREATE TABLE posts (id INTEGER PRIMARY KEY, title TEXT, views INTEGER NOT NULL DEFAULT 0)`}
	}
	if opts.Mode == spec.Append {
		f.c.Table.Slots = "post_views_deltas"
		for _, step := range d.CreateDeltaTable(f.c.Table, "INTEGER") {
			q, args := render(step)
			if len(args) != 0 {
				t.Fatalf("DDL with arguments: %s %v", q, args)
			}
			ddl = append(ddl, q)
		}
	} else {
		ddl = append(ddl, `CREATE TABLE post_views_slots (post_id INTEGER NOT NULL REFERENCES posts (id) ON DELETE CASCADE,
			slot INTEGER NOT NULL, n INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (post_id, slot))`)
	}
	for _, q := range ddl {
		f.exec(q)
	}
	for i := 1; i <= posts; i++ {
		f.exec("INSERT INTO posts (id, title) VALUES (?, 'p')", i)
		f.ids = append(f.ids, int64(i))
	}
	return f
}

func (f *fixture) exec(q string, args ...any) {
	f.t.Helper()
	if _, err := f.s.ex.ExecContext(f.ctx, q, args...); err != nil {
		f.t.Fatalf("%s: %v", q, err)
	}
}

func (f *fixture) count(q string, args ...any) int64 {
	f.t.Helper()
	var n int64
	if err := f.s.ex.(*sql.DB).QueryRowContext(f.ctx, q, args...).Scan(&n); err != nil {
		f.t.Fatalf("%s: %v", q, err)
	}
	return n
}

// increment adds delta to the counter of keys through engine.Apply.
func (f *fixture) increment(s engine.Session, keys []any, delta int64) (int64, error) {
	return engine.Apply(f.ctx, s, f.store.Dialect, engine.Increment{Table: f.c.Table, Mode: f.c.Options.Mode,
		Slots: f.c.Options.Slots, Keys: keys, Delta: delta})
}

// values reads the counter of every post as a load fills it.
func (f *fixture) values() map[string]int64 {
	f.t.Helper()
	got := map[string]int64{}
	err := f.store.Fill(f.ctx, f.s, f.s, false, []engine.LoadGroup{{Counter: f.c, Keys: f.ids}}, func(_ int, key string, v int64) error {
		got[key] = v
		return nil
	})
	if err != nil {
		f.t.Fatal(err)
	}
	return got
}

func (f *fixture) expect(want map[string]int64) {
	f.t.Helper()
	got := f.values()
	for _, id := range f.ids {
		k := fmt.Sprint(id)
		if got[k] != want[k] {
			f.t.Errorf("post %s: %d, want %d (all: %v)", k, got[k], want[k], got)
		}
	}
}

// hammer runs fn on n goroutines at once and fails t with their errors.
func hammer(t *testing.T, n int, fn func() error) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := fn(); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		t.FailNow()
	}
}

var modeName = map[spec.Mode]string{spec.Sum: "sum", spec.Rollup: "rollup", spec.Append: "append"}

func TestEngineIncrementsFromManyWritersAddUpExactly(t *testing.T) {
	for _, mode := range []spec.Mode{spec.Sum, spec.Rollup, spec.Append} {
		t.Run(modeName[mode], func(t *testing.T) {
			f := newFixture(t, spec.Options{Mode: mode, Slots: 8}, 3)
			const writers, each = 16, 25
			hammer(t, writers, func() error {
				for i := 0; i < each; i++ {
					if _, err := f.increment(f.s, []any{f.ids[0]}, 1); err != nil {
						return err
					}
				}
				return nil
			})
			// Several parents in one statement, and a decrement.
			n, err := f.increment(f.s, f.ids[1:], 5)
			if err != nil || n != 2 {
				t.Fatalf("an increment of 2 parents: %d parents, %v", n, err)
			}
			if _, err := f.increment(f.s, f.ids[2:], -2); err != nil {
				t.Fatal(err)
			}
			f.expect(map[string]int64{"1": writers * each, "2": 5, "3": 3})
		})
	}
}

func TestEngineIncrementOfAMissingParentWritesNothing(t *testing.T) {
	f := newFixture(t, spec.Options{Mode: spec.Sum, Slots: 4}, 1)
	n, err := engine.Apply(f.ctx, f.s, f.store.Dialect, engine.Increment{Table: f.c.Table, Slots: 4,
		Cond: f.store.Dialect.KeyIn(f.c.Table, []any{int64(99)}), Delta: 1})
	if err != nil || n != 0 {
		t.Fatalf("an increment of no parent: %d parents, %v", n, err)
	}
	if rows := f.count("SELECT COUNT(*) FROM post_views_slots"); rows != 0 {
		t.Fatalf("%d slot rows written for no parent", rows)
	}
}

func TestEngineIncrementInARolledBackTransactionLeavesNothing(t *testing.T) {
	f := newFixture(t, spec.Options{Mode: spec.Sum, Slots: 4}, 1)
	if _, err := f.increment(f.s, f.ids, 3); err != nil {
		t.Fatal(err)
	}
	undo := errors.New("undo")
	err := f.s.Begin(f.ctx, false, func(tx engine.Session) error {
		if _, err := f.increment(tx, f.ids, 10); err != nil {
			return err
		}
		return undo
	})
	if !errors.Is(err, undo) {
		t.Fatalf("the transaction: %v, want %v", err, undo)
	}
	f.expect(map[string]int64{"1": 3})
}

func TestEngineRollupPassFoldsIntoTheColumnAndTheValueStays(t *testing.T) {
	for _, mode := range []spec.Mode{spec.Rollup, spec.Append} {
		t.Run(modeName[mode], func(t *testing.T) {
			f := newFixture(t, spec.Options{Mode: mode, Slots: 4}, 3)
			for i := 0; i < 20; i++ {
				if _, err := f.increment(f.s, f.ids[:1+i%3], 1); err != nil {
					t.Fatal(err)
				}
			}
			want := map[string]int64{"1": 20, "2": 13, "3": 6}
			f.expect(want)
			if err := f.store.RollupPass(f.ctx, f.s, []engine.Counter{f.c}, func() bool { return false }); err != nil {
				t.Fatal(err)
			}
			if left := f.count("SELECT COUNT(*) FROM " + f.c.Table.Slots + " WHERE n <> 0"); left != 0 {
				t.Errorf("%d rows of %s still pending after the pass", left, f.c.Table.Slots)
			}
			if col := f.count("SELECT SUM(views) FROM posts"); col != 39 {
				t.Errorf("the column holds %d in all, want 39", col)
			}
			f.expect(want)
		})
	}
}

func TestEngineSetReplacesTheTotal(t *testing.T) {
	f := newFixture(t, spec.Options{Mode: spec.Sum, Slots: 4}, 2)
	for i := 0; i < 10; i++ {
		if _, err := f.increment(f.s, f.ids, 1); err != nil {
			t.Fatal(err)
		}
	}
	read, err := f.store.Sources(f.ctx, f.s, f.c)
	if err != nil {
		t.Fatal(err)
	}
	target := engine.Target{Table: f.c.Table, Mode: spec.Sum, Slots: 4, Read: read}
	n, err := engine.Set(f.ctx, f.s, f.store.Dialect, target, f.ids[:1], 42)
	if err != nil || n != 1 {
		t.Fatalf("Set: %d rows, %v", n, err)
	}
	if _, err := f.increment(f.s, f.ids, 1); err != nil {
		t.Fatal(err)
	}
	f.expect(map[string]int64{"1": 43, "2": 11})
}

func TestEngineTakesNeverSellMoreThanTheStock(t *testing.T) {
	f := newFixture(t, spec.Options{Mode: spec.Sum, Slots: 4, Guarded: true}, 1)
	d, tbl, key := f.store.Dialect, f.c.Table, f.ids[0]
	if err := engine.Restock(f.ctx, f.s, d, tbl, 4, key, 30); err != nil {
		t.Fatal(err)
	}
	const buyers = 40
	var sold, refused atomic.Int64
	hammer(t, buyers, func() error {
		err := engine.Take(f.ctx, f.s, d, tbl, 4, key, 1)
		switch {
		case err == nil:
			sold.Add(1)
		case errors.Is(err, hotcounter.ErrInsufficient):
			refused.Add(1)
		default:
			return err
		}
		return nil
	})
	if sold.Load() != 30 || refused.Load() != buyers-30 {
		t.Fatalf("sold %d and refused %d of %d buyers with 30 in stock", sold.Load(), refused.Load(), buyers)
	}
	f.expect(map[string]int64{"1": 0})

	if err := engine.Restock(f.ctx, f.s, d, tbl, 4, key, 5); err != nil {
		t.Fatal(err)
	}
	err := engine.Take(f.ctx, f.s, d, tbl, 4, key, 7)
	var short *hotcounter.Shortage
	if !errors.As(err, &short) || short.Left != 5 || short.Asked != 7 {
		t.Fatalf("a take of 7 from 5: %v, want a hotcounter.Shortage of 5 left, 7 asked", err)
	}
	f.expect(map[string]int64{"1": 5})
}

// PrepareColumn refuses a parent table that exists without the counter's
// slot table and without a key that table could reference, naming the
// counter (hotcounter.ErrInvalidCounter), before the ORM migrates anything; with the
// slot table made, or a key added, it goes on.
func TestEnginePrepareColumnRefusesAParentWithoutAKey(t *testing.T) {
	f := newFixture(t, spec.Options{Mode: spec.Sum}, 0)
	f.exec("DROP TABLE post_views_slots")
	f.exec("DROP TABLE posts")
	f.exec("CREATE TABLE posts (id INTEGER NOT NULL, title TEXT)")
	_, _, err := f.store.PrepareColumn(f.ctx, f.s.sqlConn, f.c)
	if !errors.Is(err, hotcounter.ErrInvalidCounter) || !strings.Contains(err.Error(), "Post.Views") || !strings.Contains(err.Error(), "primary key") {
		t.Fatalf("PrepareColumn of a parent without a key = %v; want hotcounter.ErrInvalidCounter naming Post.Views and the missing primary key", err)
	}
	f.exec("CREATE UNIQUE INDEX posts_id ON posts (id)")
	if _, _, err := f.store.PrepareColumn(f.ctx, f.s.sqlConn, f.c); err != nil {
		t.Fatalf("PrepareColumn with a unique index on id: %v", err)
	}
}

// RollupLoop folds at once and at every tick, hands a failed pass to its
// report and goes on, and returns nil once its context is done; a
// non-positive interval is refused before any pass.
func TestEngineRollupLoopFoldsUntilItsContextIsDone(t *testing.T) {
	f := newFixture(t, spec.Options{Mode: spec.Rollup, Slots: 4}, 2)
	session := func(context.Context) engine.Session { return f.s }
	if err := f.store.RollupLoop(f.ctx, 0, session, []engine.Counter{f.c}, func(error) {}); err == nil {
		t.Fatal("RollupLoop accepted an interval of 0")
	}
	if _, err := f.increment(f.s, f.ids, 3); err != nil {
		t.Fatal(err)
	}
	broken := f.c
	broken.Table.Slots = "no_such_slots"
	var reported atomic.Int64
	ctx, cancel := context.WithCancel(f.ctx)
	done := make(chan error, 1)
	go func() {
		done <- f.store.RollupLoop(ctx, time.Millisecond, session, []engine.Counter{f.c, broken}, func(error) { reported.Add(1) })
	}()
	for f.count("SELECT COUNT(*) FROM post_views_slots") > 0 || reported.Load() < 2 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("RollupLoop after its context was done: %v, want nil", err)
	}
	if got := f.count("SELECT SUM(views) FROM posts"); got != 6 {
		t.Fatalf("the columns hold %d after the loop, want 6 (3 for each post)", got)
	}
}
