package entcounter

import (
	"context"
	stdsql "database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"entgo.io/ent/dialect"
	"entgo.io/ent/dialect/sql"
	"entgo.io/ent/dialect/sql/sqlgraph"

	"github.com/hotcounter/hotcounter/internal/countersql"
	"github.com/hotcounter/hotcounter/internal/engine"
	"github.com/hotcounter/hotcounter/internal/retry"
	"github.com/hotcounter/hotcounter/internal/spec"
)

// Def describes one counter of a generated schema. The extension generates
// the list; users do not write it.
type Def struct {
	Type        string // parent schema type, e.g. Post
	Field       string // counter field, e.g. likes
	StructField string // its Go field, e.g. Likes
	Table       string // parent table, e.g. posts
	Key         string // parent key column, e.g. id
	SlotTable   string // e.g. post_likes_slots
	Owner       string // owner key column of the slot table, e.g. post_id
	Slots       int
	Rollup      bool // a parent column holds the folded total (rollup and append counters)
	Append      bool // the table holds delta rows (append counters)
	Precreate   int  // 0: the database's default, 1: on, 2: off
	SkipLocked  bool
	KeepColumn  bool // declared over an existing column, kept in the schema (AdoptColumn)
	// Count is set for a count of child rows ([Counts]).
	Count *CountDef
}

// CountDef is what the extension resolves of a [Counts] declaration: the
// child table that the edge reaches and how its rows reference the parent.
type CountDef struct {
	Edge    string   // the parent's edge, e.g. objects
	Type    string   // the child schema, e.g. Object
	Hooks   bool     // kept by ent hooks (ByHooks), not triggers
	Table   string   // child table, e.g. objects
	Key     string   // child id column
	Ref     string   // child column holding the parent key, e.g. category_objects
	Columns []string // every child column
	Where   string   // condition over child columns; "" counts every row
}

// count returns the countersql description of d's count.
func (d Def) count() countersql.Count {
	c := d.Count
	return countersql.Count{Table: d.table(), SlotCount: d.Slots, Child: c.Table, ChildKey: c.Key, Ref: c.Ref, Columns: c.Columns, Where: c.Where}
}

// precreate reports whether the counter's slot rows are created with
// their parent on the database of dialect dl.
func (d Def) precreate(dl countersql.Dialect) bool {
	o := spec.Options{Slots: d.Slots, Precreate: spec.Toggle(d.Precreate)}
	if d.Rollup {
		o.Mode = spec.Rollup
	}
	if d.Append {
		o.Mode = spec.Append
	}
	return o.PrecreateOn(dl.PrecreateByDefault())
}

func (d Def) table() countersql.Table {
	other := strings.TrimSuffix(d.SlotTable, "_slots") + "_deltas"
	if d.Append {
		other = strings.TrimSuffix(d.SlotTable, "_deltas") + "_slots"
	}
	return countersql.Table{Parent: d.Table, ParentKey: d.Key, Column: d.Field, Slots: d.SlotTable, Owner: d.Owner, Other: other}
}

// mode is the counter's mode.
func (d Def) mode() spec.Mode {
	switch {
	case d.Append:
		return spec.Append
	case d.Rollup:
		return spec.Rollup
	}
	return spec.Sum
}

func (d Def) name() string { return d.Type + "." + d.Field }

// Runtime is what generated code hands entcounter: the driver of a client
// or transaction and the counters of its schema. The extension adds a
// HotCounter method returning it to the generated config, so that every
// client, transaction, query and mutation has one.
type Runtime struct {
	Driver dialect.Driver
	Defs   []Def
	// State is what the client has learned of its database (where each
	// counter's values live), shared by its transactions. The extension
	// generates one per client; nil uses one shared by the process.
	State *State
}

// State is what an ent client has learned of its database: where each
// counter's values live (a column it was adopted over, a table a change
// of mode left), probed once. Generated code creates one per client with
// [NewState]; users do not.
type State struct{ storages engine.Storages }

// NewState returns an empty State.
func NewState() *State { return &State{} }

// processState serves clients generated before State existed.
var processState State

func (r Runtime) storages() *engine.Storages {
	if r.State == nil {
		return &processState.storages
	}
	return &r.State.storages
}

// Source is anything with a HotCounter method: a generated *ent.Client,
// *ent.Tx, query or mutation.
type Source interface{ HotCounter() Runtime }

func (r Runtime) dialect() (countersql.Dialect, error) {
	return countersql.For(r.Driver.Dialect())
}

func (r Runtime) def(typ, field string) (Def, bool) {
	for _, d := range r.Defs {
		if d.Type == typ && d.Field == field {
			return d, true
		}
	}
	return Def{}, false
}

// inTx reports whether the driver is a generated transaction's driver,
// whose Commit is a no-op that the caller's Tx.Commit completes, also when
// wrapped for debugging (client.Debug()).
func (r Runtime) inTx() bool {
	drv := r.Driver
	for {
		switch d := drv.(type) {
		case dialect.Tx:
			return true
		case *dialect.DebugDriver:
			drv = d.Driver
		default:
			return false
		}
	}
}

// conn runs countersql statements on an ent driver (or transaction).
type conn struct {
	ex      dialect.ExecQuerier
	dialect string
}

func (c conn) build(fn func(countersql.Writer)) (string, []any) {
	var b sql.Builder
	b.SetDialect(c.dialect)
	fn(writer{b: &b, mysql: c.dialect == dialect.MySQL})
	return b.Query()
}

func (c conn) Exec(ctx context.Context, fn func(countersql.Writer)) (int64, error) {
	query, args := c.build(fn)
	var res sql.Result
	if err := c.ex.Exec(ctx, query, args, &res); err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (c conn) Query(ctx context.Context, fn func(countersql.Writer)) (engine.Rows, error) {
	query, args := c.build(fn)
	rows := &sql.Rows{}
	if err := c.ex.Query(ctx, query, args, rows); err != nil {
		return nil, err
	}
	return rows, nil
}

// session is an engine.Session over an ent driver: the caller's
// transaction (inTx) or the client's pool.
type session struct {
	conn
	drv  dialect.Driver
	inTx bool
}

func newSession(r Runtime) session {
	return session{conn: conn{r.Driver, r.Driver.Dialect()}, drv: r.Driver, inTx: r.inTx()}
}

func (s session) InTx() bool { return s.inTx }

func (s session) Begin(ctx context.Context, readCommitted bool, fn func(engine.Session) error) error {
	var (
		tx  dialect.Tx
		err error
	)
	b, ok := s.drv.(interface {
		BeginTx(context.Context, *stdsql.TxOptions) (dialect.Tx, error)
	})
	if readCommitted && ok {
		tx, err = b.BeginTx(ctx, &stdsql.TxOptions{Isolation: stdsql.LevelReadCommitted})
	} else {
		tx, err = s.drv.Tx(ctx)
	}
	if err != nil {
		return err
	}
	if err := fn(session{conn: conn{tx, s.dialect}, drv: s.drv, inTx: true}); err != nil {
		return errors.Join(err, tx.Rollback())
	}
	return tx.Commit()
}

// ParentGone: ent passes the driver's errors through, which the engine
// recognises itself.
func (session) ParentGone(error) bool { return false }

// writer lets countersql write into an ent SQL builder.
type writer struct {
	b     *sql.Builder
	mysql bool
}

func (w writer) WriteString(s string) { w.b.WriteString(s) }
func (w writer) Arg(v any)            { w.b.Arg(v) }
func (w writer) Ident(name string) {
	q := `"`
	if w.mysql {
		q = "`"
	}
	for i, part := range strings.Split(name, ".") {
		if i > 0 {
			w.b.WriteByte('.')
		}
		w.b.WriteString(q + strings.ReplaceAll(part, q, q+q) + q)
	}
}

type liveKey struct{}

// WithLive returns a context under which loads fill rollup counters with
// their exact value, column + pending slots, read in one statement, instead
// of the cached column. Sum counters are always exact.
func WithLive(ctx context.Context) context.Context { return context.WithValue(ctx, liveKey{}, true) }

func isLive(ctx context.Context) bool { v, _ := ctx.Value(liveKey{}).(bool); return v }

// Load fills the counters of n loaded nodes of schema typ with one grouped
// query. Generated code calls it after every load (including eager-loaded
// edges); selected are the fields the query selected (none: all), key(i) is
// the key of node i and set(i, field, v) assigns a value.
func Load(ctx context.Context, r Runtime, typ string, selected []string, n int, key func(i int) any, set func(i int, field string, v int64)) error {
	live := isLive(ctx)
	var defs []Def
	for _, d := range r.Defs {
		if d.Type != typ || (d.Rollup && !live) {
			continue
		}
		if len(selected) > 0 && !slices.Contains(selected, d.Field) {
			continue
		}
		defs = append(defs, d)
	}
	if len(defs) == 0 || n == 0 {
		return nil
	}
	dl, err := r.dialect()
	if err != nil {
		return err
	}
	byKey := map[string][]int{}
	var keys []any
	for i := 0; i < n; i++ {
		k := key(i)
		text := engine.KeyText(k)
		if _, seen := byKey[text]; !seen {
			keys = append(keys, k)
		}
		byKey[text] = append(byKey[text], i)
	}
	for _, d := range defs {
		for j := 0; j < n; j++ {
			set(j, d.Field, 0) // no slot rows: zero
		}
	}
	c := conn{r.Driver, r.Driver.Dialect()}
	groups, probed, err := r.fillGroups(ctx, c, dl, defs, keys)
	if err != nil {
		return err
	}
	fill := func(g int, k string, v int64) error {
		for _, i := range byKey[k] {
			set(i, defs[g].Field, v)
		}
		return nil
	}
	err = engine.Fill(ctx, c, dl, groups, fill)
	if err != nil && probed {
		// A column or table the counters read may be gone (dropped after
		// a move): look again next time, and now once more where a failed
		// statement has not aborted a transaction.
		for _, d := range defs {
			r.storages().Forget(d.table())
		}
		if !r.inTx() {
			if groups, _, err = r.fillGroups(ctx, c, dl, defs, keys); err == nil {
				err = engine.Fill(ctx, c, dl, groups, fill)
			}
		}
	}
	if err != nil {
		return fmt.Errorf("entcounter: load %s: %w", typ, err)
	}
	return nil
}

// fillGroups returns what a load reads for each counter: a sum counter's
// slots and the column it was adopted over, if any; a live rollup
// counter's column and pending slots; and a table a change of mode left.
// probed reports whether any reads more than its own table.
func (r Runtime) fillGroups(ctx context.Context, c conn, dl countersql.Dialect, defs []Def, keys []any) (out []engine.FillGroup, probed bool, err error) {
	out = make([]engine.FillGroup, len(defs))
	for i, d := range defs {
		t := d.table()
		st, err := r.storages().Get(ctx, c, dl, t)
		if err != nil {
			return nil, false, fmt.Errorf("entcounter: load %s: %w", d.name(), err)
		}
		read, err := engine.Sources(t, st, d.mode(), d.Count != nil)
		if err != nil {
			return nil, false, fmt.Errorf("entcounter: %s: %w", d.name(), err)
		}
		probed = probed || len(read.Tables) > 1 || (read.Column && !d.Rollup)
		out[i] = engine.FillGroup{Table: t, Read: read, Keys: keys}
	}
	return out, probed, nil
}

// WithoutColumns returns columns without the sum counters of schema typ,
// which have no column. Generated code calls it on every query and update
// spec; it copies, never edits, the slice it gets.
func WithoutColumns(r Runtime, typ string, columns []string) []string {
	out := columns
	for i := 0; i < len(out); i++ {
		if d, ok := r.def(typ, out[i]); ok && !d.Rollup {
			if len(out) == len(columns) && &out[0] == &columns[0] {
				out = slices.Clone(columns)
			}
			out = slices.Delete(out, i, i+1)
			i--
		}
	}
	return out
}

// DropZeroColumn removes column from the rows of a batch upsert when every
// row gives it 0 (its default): an upsert that updates with the new values
// would otherwise reset a rollup counter's cached column. Generated code
// calls it.
func DropZeroColumn(nodes []*sqlgraph.CreateSpec, column string) {
	for _, n := range nodes {
		for _, f := range n.Fields {
			if f.Column == column && toInt64(f.Value) != 0 {
				return
			}
		}
	}
	for _, n := range nodes {
		n.Fields = slices.DeleteFunc(n.Fields, func(f *sqlgraph.FieldSpec) bool { return f.Column == column })
	}
}

// PrecreateExisting inserts the missing slot rows (n = 0) of every parent
// of the client's counters that pre-create their slots (Precreate, or the
// MySQL/MariaDB default for sum counters). New parents get theirs when
// they are created; run this once after Schema.Create (or in a migration)
// for the parents that existed before a counter was declared, as
// gormcounter's AutoMigrate does. Rows already there are left alone. It
// must not run inside a transaction.
func PrecreateExisting(ctx context.Context, src Source) error {
	r := src.HotCounter()
	if r.inTx() {
		return errors.New("entcounter: PrecreateExisting must not run inside a transaction: pass the client")
	}
	dl, err := r.dialect()
	if err != nil {
		return err
	}
	s := newSession(r)
	for _, d := range r.Defs {
		if !d.precreate(dl) {
			continue
		}
		t := d.table()
		err := retry.Do(ctx, engine.OwnAttempts, func() error {
			_, err := s.Exec(ctx, func(w countersql.Writer) {
				dl.PrecreateSlots(w, t, d.Slots, func(w countersql.Writer) { w.WriteString("1=1") })
			})
			return err
		})
		if err != nil {
			return fmt.Errorf("entcounter: precreate %s: %w", d.name(), err)
		}
	}
	return nil
}

// RollupBatchSize is how many parents one transaction of a pass
// (RollupPass, CompactPass, MoveToSlots, Recount) takes: 500, as
// gormcounter's default.
const RollupBatchSize = spec.DefaultBatchSize

// RollupPass runs one rollup pass over every rollup counter of the client's
// schema: it folds the pending slot values into the parent columns and
// removes the slot rows it folded, a batch of parents per transaction.
//
//	err := entcounter.RollupPass(ctx, client)
//
// On PostgreSQL it never waits on a row lock: parents and slot rows that
// another transaction holds are skipped and stay pending for the next pass.
// Increments made meanwhile are folded now or next time, never twice, never
// lost. Deadlocks and serialization failures are retried. It must not run
// inside a transaction (pass the client, not a Tx).
func RollupPass(ctx context.Context, src Source) error {
	return rollup(ctx, src.HotCounter(), func() bool { return false })
}

func rollup(ctx context.Context, r Runtime, stop func() bool) error {
	dl, s, inTx, err := ownPass(r, "RollupPass")
	if err != nil {
		return err
	}
	for _, d := range r.Defs {
		if !d.Rollup {
			continue
		}
		t := d.table()
		if err := engine.Rollup(ctx, s, dl, t, d.Append, RollupBatchSize, stop, inTx); err != nil {
			return fmt.Errorf("entcounter: rollup %s: %w", d.name(), err)
		}
		// The table of the other kind, if a change of mode left one.
		st, err := r.storages().Get(ctx, s, dl, t)
		if err != nil {
			return fmt.Errorf("entcounter: rollup %s: %w", d.name(), err)
		}
		if st.Other(t) {
			other := t
			other.Slots = t.Other
			if err := engine.Rollup(ctx, s, dl, other, !d.Append, RollupBatchSize, stop, inTx); err != nil {
				return fmt.Errorf("entcounter: rollup %s: fold %s: %w", d.name(), other.Slots, err)
			}
		}
	}
	return nil
}

// Moved is what [MoveToSlots] did; see its fields.
type Moved = engine.Moved

// MoveToSlots moves the values that the client's sum counters hold in a
// parent column of their own name onto slot rows, so that the column can
// be dropped: a column that existed before the field became a counter (a
// plain field.Int64("likes") replaced by entcounter.Counter("likes")), or
// that a rollup counter left when it became a sum counter. Until then
// every load adds the column to the slots, and code that still writes the
// column (likes = likes + 1) keeps counting, before, during and after the
// move.
//
//	moved, err := entcounter.MoveToSlots(ctx, client)
//
// It walks the parents in key order, a batch per transaction; for each
// parent whose column is not 0 it adds the value to the parent's slot row
// -1 (a row increments never write) and sets the column to 0, in that
// transaction, so every value moves exactly once and a load sees it before
// the move or after it. It never waits on a row lock: parents another
// transaction holds (old code writing the column) are skipped and reported
// as Busy; run it again to move them. Running it again, or after an
// interrupted run, moves only what is left. A NULL column counts as 0 and
// becomes 0 (Moved.Nulls). It must not run inside a transaction.
//
// Dropping the column is yours to do once no code writes it: ent's
// migrations keep columns that the schema no longer declares unless
// migrate.WithDropColumn(true) is given; or ALTER TABLE posts DROP COLUMN
// likes. Loads notice the column is gone.
func MoveToSlots(ctx context.Context, src Source) (Moved, error) {
	r := src.HotCounter()
	dl, s, inTx, err := ownPass(r, "MoveToSlots")
	if err != nil {
		return Moved{}, err
	}
	var total Moved
	for _, d := range r.Defs {
		if d.Rollup || d.Count != nil {
			continue
		}
		t := d.table()
		r.storages().Forget(t)
		st, err := r.storages().Get(ctx, s, dl, t)
		if err != nil {
			return total, fmt.Errorf("entcounter: MoveToSlots %s: %w", d.name(), err)
		}
		if !st.Column {
			continue
		}
		if !st.Integer() {
			return total, fmt.Errorf("entcounter: MoveToSlots %s: %w: %s.%s is %s", d.name(), engine.ErrColumnType, t.Parent, t.Column, st.Type)
		}
		if st.Other(t) {
			deltas := t
			deltas.Slots = t.Other
			if err := engine.Rollup(ctx, s, dl, deltas, true, RollupBatchSize, func() bool { return false }, inTx); err != nil {
				return total, fmt.Errorf("entcounter: MoveToSlots %s: fold %s: %w", d.name(), deltas.Slots, err)
			}
		}
		m, err := engine.MoveColumns(ctx, s, dl, t, RollupBatchSize, inTx)
		total.Add(m)
		if err != nil {
			return total, fmt.Errorf("entcounter: MoveToSlots %s: %w", d.name(), err)
		}
	}
	return total, nil
}

// CompactPass runs one compaction pass over every sum counter of the
// client's schema. Random slots spread any parent incremented a few dozen
// times over all of its slot rows, hot or not, and every load sums all of
// them. For each parent with more than one slot row holding a value, a
// batch of parents per transaction, it moves the values into one of those
// rows and deletes the others (sets them to 0 where slots are pre-created),
// so that a load sums one row per parent plus whatever arrived since.
// Totals never change for a reader.
//
//	err := entcounter.CompactPass(ctx, client)
//
// Like [RollupPass] it never waits on a row lock and must not run inside a
// transaction. It reads each slot table's primary key from end to end to
// find the parents it compacts, so run it as often as the tables' size
// allows (every minute, every hour), not on the rollup interval.
// PostgreSQL and SQLite only: on MySQL and MariaDB it returns an error
// wrapping [errors.ErrUnsupported] (see gormcounter.CompactPass for why).
func CompactPass(ctx context.Context, src Source) error {
	r := src.HotCounter()
	dl, s, inTx, err := ownPass(r, "CompactPass")
	if err != nil {
		return err
	}
	for _, d := range r.Defs {
		if d.Rollup {
			continue
		}
		if err := engine.Compact(ctx, s, dl, d.table(), d.precreate(dl), RollupBatchSize, func() bool { return false }, inTx); err != nil {
			return fmt.Errorf("entcounter: compact %s: %w", d.name(), err)
		}
	}
	return nil
}

// ownPass prepares a pass named name that runs transactions of its own
// (RollupPass, CompactPass): it refuses a transaction's client, and returns
// the dialect, r's session, and a function that runs its argument in a
// transaction of its own, committed when it returns nil.
func ownPass(r Runtime, name string) (countersql.Dialect, engine.Conn, func(ctx context.Context, fn func(engine.Conn) error) error, error) {
	if r.inTx() {
		return countersql.Dialect{}, nil, nil, fmt.Errorf("entcounter: %s must not run inside a transaction: pass the client", name)
	}
	dl, err := r.dialect()
	if err != nil {
		return countersql.Dialect{}, nil, nil, err
	}
	s := newSession(r)
	return dl, s, func(ctx context.Context, fn func(engine.Conn) error) error {
		return s.Begin(ctx, false, func(tx engine.Session) error { return fn(tx) })
	}, nil
}

// RollupLoop runs a [RollupPass] at once and then every interval until ctx
// is done, and then returns nil. Cancelling ctx lets the batch in progress
// commit and stops before the next one. A failed pass is retried at the next
// tick; onError, if not nil, hears of it. Run it in its own goroutine:
//
//	go entcounter.RollupLoop(ctx, client, time.Second, nil)
func RollupLoop(ctx context.Context, src Source, interval time.Duration, onError func(error)) error {
	if interval <= 0 {
		return fmt.Errorf("entcounter: RollupLoop: interval must be positive, got %v", interval)
	}
	r := src.HotCounter()
	if r.inTx() {
		return errors.New("entcounter: RollupLoop must not run inside a transaction: pass the client")
	}
	work := context.WithoutCancel(ctx)
	stop := func() bool { return ctx.Err() != nil }
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if err := rollup(work, r, stop); err != nil && onError != nil {
			onError(err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
