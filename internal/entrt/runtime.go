// Package entrt is what entcounter and the code that its extension
// generates share at run time: the list of a schema's counters (Runtime,
// Def), what the client has learned of its database (State), the fill after
// every load, the columns a sum counter does not have, the count hook, and
// the adapters that let countersql write and run SQL through an ent driver.
// entcounter/generated exports what generated code calls; entcounter, what
// users call.
package entrt

import (
	"context"
	stdsql "database/sql"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"entgo.io/ent"
	"entgo.io/ent/dialect"
	"entgo.io/ent/dialect/sql"
	"entgo.io/ent/dialect/sql/sqlgraph"

	"github.com/hotcounter/hotcounter"
	"github.com/hotcounter/hotcounter/internal/combine"
	"github.com/hotcounter/hotcounter/internal/countersql"
	"github.com/hotcounter/hotcounter/internal/driver"
	"github.com/hotcounter/hotcounter/internal/engine"
	"github.com/hotcounter/hotcounter/internal/observe"
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
	AutoSlots   bool // slots=auto: Slots is the widest a parent grows
	Rollup      bool // a parent column holds the folded total (rollup and append counters)
	Append      bool // the table holds delta rows (append counters)
	Precreate   int  // 0: the database's default, 1: on, 2: off
	SkipLocked  bool
	KeepColumn  bool // declared over an existing column, kept in the schema (AdoptColumn)
	Guarded     bool // never below zero: goes down only through Take (Guarded)
	// Count is set for a count of child rows ([Counts]).
	Count *CountDef
}

// CountDef is what the extension resolves of a [Counts] declaration: the
// child table that the edge reaches and how its rows reference the parent.
type CountDef struct {
	Edge    string   // the parent's edge, e.g. objects
	Back    string   // through an M2M edge: the other side's edge back, if it has one, e.g. categories
	Type    string   // the child schema, e.g. Object
	Hooks   bool     // kept by ent hooks (ByHooks), not triggers
	Table   string   // child table, e.g. objects
	Key     string   // child id column
	Ref     string   // child column holding the parent key, e.g. category_objects
	Columns []string // every child column
	Where   string   // condition over child columns; "" counts every row
	// SoftDelete is the child column that marks a soft-deleted row when
	// not NULL (ent's documented soft-delete mixin's delete_time); "" if
	// the child has none.
	SoftDelete string
	Total      string // child column a running total adds; "" counts rows
	// Via is set for a count over two O2M edges: the middle table.
	Via *countersql.Via
	// Across is set for a count through the join table of an M2M edge
	// (Table is the join table, Key empty): the join's other reference.
	Across *countersql.Across
}

// count returns the countersql description of d's count.
func (d Def) CountSpec() countersql.Count {
	c := d.Count
	return countersql.Count{Table: d.Tables(), SlotCount: d.Slots, Child: c.Table, ChildKey: c.Key, Ref: c.Ref, Columns: c.Columns, Where: c.Where, SoftDelete: c.SoftDelete, Sum: c.Total, Via: c.Via, Across: c.Across}
}

// precreate reports whether the counter's slot rows are created with
// their parent on the database of dialect dl.
func (d Def) PrecreateOn(dl engine.Dialect) bool {
	return d.Options().PrecreateOn(dl.PrecreateByDefault())
}

// Options is the declaration d was generated from, as far as the runtime
// needs it.
func (d Def) Options() spec.Options {
	return spec.Options{Slots: d.Slots, Auto: d.AutoSlots, Mode: d.Mode(), Precreate: spec.Toggle(d.Precreate),
		SkipLocked: d.SkipLocked, Guarded: d.Guarded, KeepColumn: d.KeepColumn}
}

func (d Def) Tables() countersql.Table {
	other := strings.TrimSuffix(d.SlotTable, "_slots") + "_deltas"
	if d.Append {
		other = strings.TrimSuffix(d.SlotTable, "_deltas") + "_slots"
	}
	return countersql.Table{Parent: d.Table, ParentKey: d.Key, Column: d.Field, Slots: d.SlotTable, Owner: d.Owner, Other: other, RowID: "id"}
}

// mode is the counter's mode.
func (d Def) Mode() spec.Mode {
	switch {
	case d.Append:
		return spec.Append
	case d.Rollup:
		return spec.Rollup
	}
	return spec.Sum
}

func (d Def) Name() string { return d.Type + "." + d.Field }

// TablesRead names every table the counter's statements read or write:
// the parent's, the slot or delta table, and a count's child, middle or
// join and other-side tables.
func (d Def) TablesRead() []string {
	out := []string{d.Table, d.SlotTable}
	if c := d.Count; c != nil {
		out = append(out, c.Table)
		if c.Via != nil {
			out = append(out, c.Via.Table)
		}
		if c.Across != nil {
			out = append(out, c.Across.Table)
		}
	}
	return out
}

// Covering returns r with only the counters whose tables all satisfy
// has: those a migration of some of the schema's tables readies.
func (r Runtime) Covering(has func(table string) bool) Runtime {
	var defs []Def
	for _, d := range r.Defs {
		if !slices.ContainsFunc(d.TablesRead(), func(t string) bool { return !has(t) }) {
			defs = append(defs, d)
		}
	}
	r.Defs = defs
	return r
}

// Runtime is what generated code hands entcounter: the driver of a client
// or transaction and the counters of its schema. The extension adds a
// HotCounter method returning it to the generated config, so that every
// client, transaction, query and mutation has one.
type Runtime struct {
	Driver dialect.Driver
	Defs   []Def
	// Tables maps every schema type of the client to its table: hot keys
	// name plain fields by table, as they name counters.
	Tables map[string]string
	// State is what the client has learned of its database (where each
	// counter's values live), shared by its transactions. The extension
	// generates one per client.
	State *State
	// Add adds to a counter of one row as the client's UpdateOneID(id).AddX
	// does, through its hooks, privacy policy and interceptors: a buffered
	// add runs it under WithBuffered. Nil in code generated before it.
	Add func(ctx context.Context, typ, field string, id any, delta int64) error
	// NotFound is the client's NotFoundError for schema typ (ent.IsNotFound
	// holds for it). Nil in code generated before it.
	NotFound func(typ string) error
	// Log is the client's logger (ent.Log; the standard logger's Println
	// unless the client was given another). Nil in code generated before
	// it.
	Log func(...any)
}

// State is what an ent client has learned of its database: where each
// counter's values live (a column it was adopted over, a table a change
// of mode left), probed once. Generated code creates one per client with
// [NewState]; users do not.
type State struct {
	storages engine.Storages
	// combined merges concurrent increments of one row outside
	// transactions into one statement, as gormcounter's plugin does.
	combined combine.Group
	// takes merges concurrent takes of one guarded counter's row the same
	// way, split when refused (engine.SplitTakes).
	takes   combine.Group
	obs     atomic.Pointer[observe.Observer]
	obsOnce sync.Mutex
	// widths: per slot table, the width each parent of a slots=auto
	// counter has learned.
	widths sync.Map
	// settings are entcounter.Config's, resolved.
	settings atomic.Pointer[spec.Settings]
	// migrated holds the slot tables of counts whose triggers a load
	// found installed (countsMigrated).
	migrated sync.Map
	// reads merges concurrent reads of one row's visibility that the
	// interceptors render alike (ReadShared), and readFirst the increments
	// that follow them (CombinedAfterRead).
	reads, readFirst combine.Group
	// dialect is the client's database's dialect, once Dialect found
	// whether it is PostgreSQL with Citus.
	dialect atomic.Pointer[engine.Dialect]
}

// ReadShared reports whether query, the read of one row's id as the
// query interceptors and the privacy policy rendered it for an add outside
// a transaction (HotCounterKeys), returns a row, through d, the
// mutation's driver. Concurrent reads of the same query and arguments
// share one execution that starts after they all asked, as concurrent
// increments share a write: each writer of a hot row holding a connection
// for a read of its own would make a pool that keeps few idle connections
// (database/sql's default: 2) close and reopen connections all the time.
// The read runs in a transaction of its own unless d sends every statement
// to one database (OneServer).
func (r Runtime) ReadShared(ctx context.Context, d dialect.Driver, query string, args []any) (bool, error) {
	key, shared := readKey(query, args)
	if !shared || !OneServer(d) {
		// A driver of the application's own may choose where a statement
		// goes by its context, which a shared read would take from the
		// first caller only.
		return readRow(ctx, d, query, args)
	}
	_, v, err := r.state().reads.DoValue(ctx, key, 0, func(ctx context.Context, _ int64) (int64, any, error) {
		found, err := readRow(ctx, d, query, args)
		return 0, found, err
	})
	found, _ := v.(bool)
	return found, err
}

// readKey returns the key under which reads of query with args are shared,
// and whether they may be: every argument a value whose text says all of
// it (integers, strings, booleans, floats, bytes, a time as its instant and
// offset), so that two reads share a key only if they send the same.
func readKey(query string, args []any) (string, bool) {
	var b strings.Builder
	b.WriteString(query)
	for _, a := range args {
		b.WriteByte(0)
		if t, ok := a.(time.Time); ok {
			_, offset := t.Zone()
			fmt.Fprintf(&b, "time:%d:%d", t.UnixNano(), offset)
			continue
		}
		v := reflect.ValueOf(a)
		switch v.Kind() {
		case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
			reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
			reflect.Float32, reflect.Float64, reflect.String:
		case reflect.Array, reflect.Slice:
			if v.Type().Elem().Kind() != reflect.Uint8 {
				return "", false
			}
		default:
			return "", false
		}
		fmt.Fprintf(&b, "%T:%#v", a, a)
	}
	return b.String(), true
}

// readRow reports whether query returns a row, read through d: directly
// when d sends every statement to one database, else in a transaction.
func readRow(ctx context.Context, d dialect.Driver, query string, args []any) (found bool, err error) {
	var ex dialect.ExecQuerier = d
	var tx dialect.Tx
	if !OneServer(d) {
		if tx, err = d.Tx(ctx); err != nil {
			return false, err
		}
		ex = tx
	}
	var rows sql.Rows
	if err = ex.Query(ctx, query, args, &rows); err == nil {
		found = rows.Next()
		if cerr := rows.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = rows.Err()
		}
	}
	if tx != nil {
		if err != nil {
			_ = tx.Rollback()
			return false, err
		}
		err = tx.Commit()
	}
	return found, err
}

// Widths returns the widths that parents of d have learned, or nil when d
// has a fixed number of slots.
func (r Runtime) Widths(d Def) *engine.Widths {
	if !d.AutoSlots {
		return nil
	}
	st := r.state()
	if w, ok := st.widths.Load(d.SlotTable); ok {
		return w.(*engine.Widths)
	}
	w, _ := st.widths.LoadOrStore(d.SlotTable, engine.NewWidths(d.Slots, r.Settings().AutoCooldown))
	return w.(*engine.Widths)
}

// Written is how many slots d's one-statement writers (a write-behind
// flush) spread over.
func (d Def) Written() int { return d.Options().Written() }

// NewState returns an empty State with the default settings.
func NewState() *State {
	st := &State{}
	st.configure(spec.Settings{})
	return st
}

// configure sets the client's settings (resolved).
func (st *State) configure(s spec.Settings) {
	s = s.Resolved()
	st.settings.Store(&s)
	st.combined.Limit = s.InFlight
	// An add that read its row first (ReadShared) already holds the read's
	// turn: one statement fewer, so that a hot row keeps InFlight
	// connections busy in all.
	st.readFirst.Limit = s.InFlight
	if s.InFlight > 1 {
		st.readFirst.Limit = s.InFlight - 1
	}
	st.takes.Limit, st.takes.Split = s.InFlight, engine.SplitTakes
}

// Settings returns the client's settings, defaults filled in.
func (r Runtime) Settings() spec.Settings { return *r.state().settings.Load() }

// OnError is where the client's background work reports (a rollup loop's
// failed pass, a buffer's failed flush): the OnError of
// entcounter.Configure's Config, or the client's logger.
func (r Runtime) OnError() func(error) {
	if f := r.Settings().OnError; f != nil {
		return f
	}
	if r.Log == nil {
		return func(error) {} // code generated before Log: regenerate it to hear of them
	}
	return func(err error) { r.Log("entcounter:", err) }
}

// Configure sets the client's settings (entcounter.Configure), before the
// client is used: the combining groups read InFlight without a lock, and
// slots=auto counters keep the cooldown they started with.
func (r Runtime) Configure(s spec.Settings) { r.state().configure(s) }

// state is the client's State.
func (r Runtime) state() *State { return r.State }

// Observer is the client's observer: the one entcounter.Configure set, or
// one that counts hot keys with the defaults and records no metrics.
func (r Runtime) Observer() *observe.Observer {
	st := r.state()
	if o := st.obs.Load(); o != nil {
		return o
	}
	st.obsOnce.Lock()
	defer st.obsOnce.Unlock()
	if o := st.obs.Load(); o != nil {
		return o
	}
	o, _ := observe.New(observe.Config{System: r.System(context.Background(), false)}) // reads nothing; without a meter provider it cannot fail
	st.obs.Store(o)
	return o
}

// SetObserver replaces the client's observer.
func (r Runtime) SetObserver(o *observe.Observer) {
	st := r.state()
	if old := st.obs.Swap(o); old != nil {
		_ = old.Close()
	}
}

// System is db.system.name of the client's database (engine.System: MySQL
// and MariaDB are told apart by their version when ask is set, as when
// metrics are configured; only then does it read the database).
func (r Runtime) System(ctx context.Context, ask bool) string {
	dl, err := driver.For(r.driver().Dialect())
	if err != nil {
		return r.driver().Dialect()
	}
	return engine.System(ctx, NewSession(r), dl, ask)
}

// Combined is the client's group of increments that share a statement
// (at most 2 statements in flight per row).
func (r Runtime) Combined() *combine.Group { return &r.state().combined }

// CombinedAfterRead is the client's group of increments of rows that each
// add first read through the query interceptors (ReadShared): InFlight
// less the read's statement, at least 1.
func (r Runtime) CombinedAfterRead() *combine.Group { return &r.state().readFirst }

// Takes is the client's group of takes of guarded counters that share a
// statement.
func (r Runtime) Takes() *combine.Group { return &r.state().takes }

func (r Runtime) Storages() *engine.Storages { return &r.state().storages }

// Source is anything with a HotCounter method: a generated *ent.Client,
// *ent.Tx, query or mutation.
type Source interface {
	// GeneratedByEntcounterExtension marks code generated with
	// entcounter's extension. Its name is what the compiler says of a
	// client generated without it ("missing method
	// GeneratedByEntcounterExtension"): it sorts before HotCounter.
	GeneratedByEntcounterExtension()
	HotCounter() Runtime
}

// Dialect is the dialect of the client's database. On PostgreSQL the
// first call asks whether the database has the Citus extension, which
// takes some statements in another form (engine.WithCitus), once per
// client.
func (r Runtime) Dialect(ctx context.Context) (engine.Dialect, error) {
	if d := r.state().dialect.Load(); d != nil {
		return *d, nil
	}
	d, err := driver.For(r.driver().Dialect())
	if err != nil {
		return d, err
	}
	if _, pg := d.OnPostgres(); !pg {
		return d, nil
	}
	// A failed read (in an aborted transaction) is asked again by the
	// next call.
	withCitus, err := engine.WithCitus(ctx, NewSession(r), d)
	if err != nil {
		return d, nil
	}
	r.state().dialect.Store(&withCitus)
	return withCitus, nil
}

// Store returns the engine's view of the client: what every pass takes.
func (r Runtime) Store(ctx context.Context) (engine.Store, error) {
	dl, err := r.Dialect(ctx)
	if err != nil {
		return engine.Store{}, err
	}
	return engine.Store{Dialect: dl, Settings: r.Settings(), Storages: r.Storages(), Observer: r.Observer(), Pkg: "entcounter",
		Migration: "run client.Schema.Create(ctx, entcounter.WithCounters(client)), or apply ent's migration files and the statements of entcounter.SchemaSQL (docs/migrations.md)"}, nil
}

// Counters returns the client's counters that keep says to, as the engine
// takes them, for the database of dialect dl.
func (r Runtime) Counters(dl engine.Dialect, keep func(Def) bool) []engine.Counter {
	var out []engine.Counter
	for _, d := range r.Defs {
		if keep(d) {
			out = append(out, d.Counter(dl))
		}
	}
	return out
}

// Counter returns d as the engine takes it, on the database of dialect dl.
func (d Def) Counter(dl engine.Dialect) engine.Counter {
	t := d.Tables()
	return engine.Counter{Name: d.Name(), Column: t.Column, Options: d.Options(), Precreate: d.PrecreateOn(dl), Count: d.Count != nil, Table: t}
}

func (r Runtime) Def(typ, field string) (Def, bool) {
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
func (r Runtime) InTx() bool {
	drv := r.driver()
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

// Conn runs countersql statements on an ent driver (or transaction).
type Conn struct {
	Ex      dialect.ExecQuerier
	Dialect string
}

func (c Conn) build(fn func(countersql.Writer)) (string, []any) {
	var b sql.Builder
	b.SetDialect(c.Dialect)
	fn(writer{b: &b, mysql: c.Dialect == dialect.MySQL})
	return b.Query()
}

func (c Conn) Exec(ctx context.Context, fn func(countersql.Writer)) (int64, error) {
	query, args := c.build(fn)
	var res sql.Result
	if err := c.Ex.Exec(ctx, query, args, &res); err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (c Conn) Query(ctx context.Context, fn func(countersql.Writer)) (engine.Rows, error) {
	query, args := c.build(fn)
	rows := &sql.Rows{}
	if err := c.Ex.Query(ctx, query, args, rows); err != nil {
		return nil, err
	}
	return rows, nil
}

// session is an engine.Session over an ent driver: the caller's
// transaction (inTx) or the client's pool.
type Session struct {
	Conn
	drv  dialect.Driver
	inTx bool
}

func NewSession(r Runtime) Session {
	return Session{Conn: Conn{r.driver(), r.driver().Dialect()}, drv: r.driver(), inTx: r.InTx()}
}

func (s Session) InTx() bool { return s.inTx }

func (s Session) Begin(ctx context.Context, readCommitted bool, fn func(engine.Session) error) error {
	var (
		tx  dialect.Tx
		err error
	)
	b, ok := s.drv.(interface {
		BeginTx(context.Context, *stdsql.TxOptions) (dialect.Tx, error)
	})
	dl, err := driver.For(s.Dialect)
	if err != nil {
		return err
	}
	if dl.Driver.ReadCommitted(readCommitted) && ok {
		tx, err = b.BeginTx(ctx, &stdsql.TxOptions{Isolation: stdsql.LevelReadCommitted})
	} else {
		tx, err = s.drv.Tx(ctx)
	}
	if err != nil {
		return err
	}
	if err := fn(Session{Conn: Conn{tx, s.Dialect}, drv: s.drv, inTx: true}); err != nil {
		return errors.Join(err, tx.Rollback())
	}
	return tx.Commit()
}

// ParentGone: ent passes the driver's errors through, which the engine
// recognises itself.
func (Session) ParentGone(error) bool { return false }

// writer lets countersql write into an ent SQL builder.
type writer struct {
	b     *sql.Builder
	mysql bool
}

func (w writer) WriteString(s string) { w.b.WriteString(s) }

func (w writer) Arg(v any) { w.b.Arg(v) }

func (w writer) Ident(name string) { w.b.WriteString(countersql.QuoteIdent(name, w.mysql)) }

type liveKey struct{}

// WithLive returns a context under which loads fill rollup counters with
// their exact value, column + pending slots, read in one statement, instead
// of the cached column. Sum counters are always exact.
func WithLive(ctx context.Context) context.Context { return context.WithValue(ctx, liveKey{}, true) }

func isLive(ctx context.Context) bool { v, _ := ctx.Value(liveKey{}).(bool); return v }

type noFillKey struct{}

// WithoutFill returns a context under which loads leave the counter field
// of schema typ unfilled: for a read whose caller sets it from a value it
// already has (the total an increment returned).
func WithoutFill(ctx context.Context, typ, field string) context.Context {
	return context.WithValue(ctx, noFillKey{}, []string{typ + "." + field})
}

func noFill(ctx context.Context, d Def) bool {
	names, _ := ctx.Value(noFillKey{}).([]string)
	return slices.Contains(names, d.Name())
}

type inlineKey struct{}

// inlined is what InlineTotals selected in the statement of one query
// (spec): the counters the fill after it leaves alone.
type inlined struct {
	spec  *sqlgraph.QuerySpec
	names []string
}

// InlineTotals makes a load of one node of typ (Get, Only, First: a limit
// of 1 or 2, no traversal, no Unique, no modifiers of the user's) select
// its sum counters' totals (those among fields, the query's Select, if
// any) beside its columns, one
// correlated subquery each, so that the load is one statement, not a load
// and a fill. It returns ctx marked with what it selected, for
// [InlinedFor]. Counters adopted over a column, append and rollup
// counters, and loads under a write-behind buffer's Live keep the fill.
// The extension's generated query code calls it; users do not.
func InlineTotals(ctx context.Context, r Runtime, typ string, fields []string, qs *sqlgraph.QuerySpec) context.Context {
	if qs.ScanValues == nil || qs.Limit <= 0 || qs.Limit > 2 || qs.From != nil || qs.Unique || len(qs.Modifiers) > 0 || ctx.Value(pendingKey{}) != nil {
		return ctx
	}
	dl, err := r.Dialect(ctx)
	if err != nil {
		return ctx
	}
	var (
		parts []countersql.Inline
		names []string
		key   string
	)
	for _, d := range r.Defs {
		if d.Type != typ || d.Mode() != spec.Sum || noFill(ctx, d) || !slices.Contains(qs.Node.Columns, d.Key) ||
			len(fields) > 0 && !slices.Contains(fields, d.Field) {
			continue
		}
		read, err := r.sources(ctx, NewSession(r), dl, d)
		if err != nil {
			return ctx // the fill reports it
		}
		if read.Column {
			continue
		}
		parts, names, key = append(parts, countersql.Inline{Table: d.Tables(), Read: read, As: d.Field}), append(names, d.Name()), d.Key
	}
	if len(parts) == 0 {
		return ctx
	}
	mysql := r.driver().Dialect() == dialect.MySQL
	qs.Modifiers = append(qs.Modifiers, func(s *sql.Selector) {
		col := s.C(key)
		for _, in := range parts {
			s.AppendSelectExprAs(sql.ExprFunc(func(b *sql.Builder) {
				dl.TotalOf(writer{b: b, mysql: mysql}, in, func(w countersql.Writer) { w.WriteString(col) })
			}), in.As)
		}
	})
	return context.WithValue(ctx, inlineKey{}, inlined{spec: qs, names: names})
}

// InlinedFor returns the context for the fill after the query of spec:
// it leaves alone what InlineTotals selected in that query's statement
// (and nothing of another query's, such as the query that eager-loads
// this one as an edge). The extension's generated query code calls it.
func InlinedFor(ctx context.Context, spec *sqlgraph.QuerySpec) context.Context {
	in, ok := ctx.Value(inlineKey{}).(inlined)
	if !ok || in.spec != spec {
		return ctx
	}
	names, _ := ctx.Value(noFillKey{}).([]string)
	return context.WithValue(ctx, noFillKey{}, append(slices.Clip(names), in.names...))
}

// Load fills the counters of n loaded nodes of schema typ with one grouped
// query. Generated code calls it after every load (including eager-loaded
// edges); selected are the fields the query selected (none: all), key(i) is
// the key of node i and set(i, field, v) assigns a value.
func Load(ctx context.Context, r Runtime, typ string, selected []string, n int, key func(i int) any, set func(i int, field string, v int64)) error {
	if err := r.countsMigrated(ctx, typ); err != nil {
		return err
	}
	live := isLive(ctx)
	var defs []Def
	for _, d := range r.Defs {
		if d.Type != typ || (d.Rollup && !live) || noFill(ctx, d) {
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
	st, err := r.Store(ctx)
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
	c := Conn{r.driver(), r.driver().Dialect()}
	loads := make([]engine.LoadGroup, len(defs))
	for i, d := range defs {
		loads[i] = engine.LoadGroup{Counter: d.Counter(st.Dialect), Keys: keys}
	}
	values := make([]map[string]int64, len(defs)) // what the fill set, for pending deltas to add to
	fill := func(g int, k string, v int64) error {
		if values[g] == nil {
			values[g] = map[string]int64{}
		}
		values[g][k] = v
		for _, i := range byKey[k] {
			set(i, defs[g].Field, v)
		}
		return nil
	}
	err = st.Fill(ctx, c, c, r.InTx(), loads, fill)
	if err != nil {
		return fmt.Errorf("entcounter: load %s: %w", typ, err)
	}
	if pending, ok := ctx.Value(pendingKey{}).(PendingFunc); ok {
		deltas, err := pending(ctx, defs, keys)
		if err != nil {
			return fmt.Errorf("entcounter: load %s: pending: %w", typ, err)
		}
		for g, row := range deltas {
			for j, n := range row {
				if n == 0 {
					continue
				}
				k := engine.KeyText(keys[j])
				for _, i := range byKey[k] {
					set(i, defs[g].Field, values[g][k]+n)
				}
			}
		}
	}
	return nil
}

type pendingKey struct{}

// PendingFunc returns what a write-behind buffer holds for each counter of
// defs and parent of keys: deltas[d][k].
type PendingFunc func(ctx context.Context, defs []Def, keys []any) (deltas [][]int64, err error)

// WithPending returns a live context (WithLive) under which loads add what
// fn returns to each counter they fill.
func WithPending(ctx context.Context, fn PendingFunc) context.Context {
	return context.WithValue(WithLive(ctx), pendingKey{}, fn)
}

// sources returns what adds up to d's value in this database (its tables
// and the column it was adopted over), probed once.
func (r Runtime) sources(ctx context.Context, c engine.Conn, dl engine.Dialect, d Def) (countersql.Sources, error) {
	st, err := r.Store(ctx)
	if err != nil {
		return countersql.Sources{}, err
	}
	return st.Sources(ctx, c, d.Counter(dl))
}

// WithoutColumns returns columns without the sum counters of schema typ,
// which have no column. Generated code calls it on every query and update
// spec; it copies, never edits, the slice it gets.
func WithoutColumns(r Runtime, typ string, columns []string) []string {
	out := columns
	for i := 0; i < len(out); i++ {
		if d, ok := r.Def(typ, out[i]); ok && !d.Rollup {
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
			if f.Column == column && ToInt64(f.Value) != 0 {
				return
			}
		}
	}
	for _, n := range nodes {
		n.Fields = slices.DeleteFunc(n.Fields, func(f *sqlgraph.FieldSpec) bool { return f.Column == column })
	}
}

func ToInt64(v ent.Value) int64 {
	switch x := v.(type) {
	case int64:
		return x
	case nil:
		return 0
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return rv.Int()
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return int64(rv.Uint())
	}
	return 0
}

// countsMigrated checks, once per client and count, that the triggers
// that keep the counts of schema typ kept by triggers exist, so that a
// client whose migration ran without WithCounters fails at its first load
// naming what is missing, instead of reading counts no trigger kept. A
// count found migrated is not read again; one found missing is read again
// at the next load (the migration may have run meanwhile).
func (r Runtime) countsMigrated(ctx context.Context, typ string) error {
	return r.triggersThere(ctx, "load "+typ, func(d Def) bool { return d.Type == typ })
}

// ChildCountsMigrated refuses a mutation of schema typ that writes the
// rows of a count kept by triggers (its child, or a side of its M2M edge)
// when the count has none: the write would succeed uncounted. Checked once
// per client and count, as loads check it.
func (r Runtime) ChildCountsMigrated(ctx context.Context, typ string) error {
	return r.triggersThere(ctx, "write "+typ, func(d Def) bool {
		return d.Count.Type == typ || d.Count.Across != nil && d.Type == typ
	})
}

// triggersThere is countsMigrated for the counts kept by triggers that
// keep selects; what names the statement refused.
func (r Runtime) triggersThere(ctx context.Context, what string, keep func(Def) bool) error {
	for _, d := range r.Defs {
		if d.Count == nil || d.Count.Hooks || !keep(d) {
			continue
		}
		st := r.state()
		if _, ok := st.migrated.Load(d.SlotTable); ok {
			continue
		}
		dl, err := r.Dialect(ctx)
		if err != nil {
			return err
		}
		missing, err := engine.CountTriggersMissing(ctx, Conn{r.driver(), r.driver().Dialect()}, dl, d.CountSpec())
		if err != nil {
			return fmt.Errorf("entcounter: %s: read the triggers that keep %s: %w", what, d.Name(), err)
		}
		if missing {
			return fmt.Errorf("entcounter: %s: the triggers that keep %s (on %s) are missing: migrate with client.Schema.Create(ctx, entcounter.WithCounters(client)), run entcounter.InstallTriggers(ctx, client), or apply the statements of entcounter.SchemaSQL (docs/migrations.md): %w",
				what, d.Name(), d.Count.Table, hotcounter.ErrNotMigrated)
		}
		st.migrated.Store(d.SlotTable, true)
	}
	return nil
}
