// Package generated is what the code that entcounter's extension generates
// calls: the list of a schema's counters, what a client has learned of its
// database, the fill after every load, the columns a sum counter does not
// have, and the hook that keeps counts of child rows. Users do not call it;
// they call entcounter. It is kept apart from entcounter as ent keeps its
// own runtime helpers (sqlgraph) apart from what users call.
package generated

import (
	"context"

	"entgo.io/ent"
	"entgo.io/ent/dialect"
	"entgo.io/ent/dialect/sql/sqlgraph"

	"github.com/hotcounter/hotcounter"
	"github.com/hotcounter/hotcounter/internal/countersql"
	"github.com/hotcounter/hotcounter/internal/engine"
	"github.com/hotcounter/hotcounter/internal/entrt"
)

// Runtime is what generated code hands entcounter: the driver of a client
// or transaction, the counters of its schema and the client's State. The
// extension adds a HotCounter method returning it to the generated config,
// so that every client, transaction, query and mutation has one.
type Runtime = entrt.Runtime

// Def describes one counter of a generated schema.
type Def = entrt.Def

// CountDef is what the extension resolves of a Counts declaration: the
// child table that the edge reaches and how its rows reference the parent.
type CountDef = entrt.CountDef

// Across is, for a count through an M2M edge, the join table's column
// naming the other side's row, that side's table and its key.
type Across = countersql.Across

// Via is, for a count over two O2M edges, the middle table: its key and
// its column naming the parent.
type Via = countersql.Via

// State is what an ent client has learned of its database: where each
// counter's values live (a column it was adopted over, a table a change of
// mode left), probed once and shared by the client's transactions.
type State = entrt.State

// NewState returns an empty State, one per client.
func NewState() *State { return entrt.NewState() }

// Load fills the counters of n loaded nodes of schema typ with one grouped
// query. Generated code calls it after every load (including eager-loaded
// edges); selected are the fields the query selected (none: all), key(i) is
// the key of node i and set(i, field, v) assigns a value.
func Load(ctx context.Context, r Runtime, typ string, selected []string, n int, key func(i int) any, set func(i int, field string, v int64)) error {
	return entrt.Load(ctx, r, typ, selected, n, key, set)
}

// WithoutColumns returns columns without the sum counters of schema typ,
// which have no column. Generated code calls it on every query and update
// spec; it copies, never edits, the slice it gets.
func WithoutColumns(r Runtime, typ string, columns []string) []string {
	return entrt.WithoutColumns(r, typ, columns)
}

// DropZeroColumn removes column from the rows of a batch upsert when every
// row gives it 0 (its default): an upsert that updates with the new values
// would otherwise reset a rollup counter's cached column.
func DropZeroColumn(nodes []*sqlgraph.CreateSpec, column string) { entrt.DropZeroColumn(nodes, column) }

// CountHook returns the ent hook that keeps counts declared with
// entcounter.ByHooks. The generated config registers it on the child and
// parent schemas of such counts.
func CountHook() ent.Hook { return entrt.CountHook() }

// InlineTotals makes a load of one node select its sum counters' totals in
// its own statement, and returns the context that tells InlinedFor so.
func InlineTotals(ctx context.Context, r Runtime, typ string, fields []string, spec *sqlgraph.QuerySpec) context.Context {
	return entrt.InlineTotals(ctx, r, typ, fields, spec)
}

// Rewriting returns the driver of a query builder of schema typ, wrapped
// so that its queries read the schema's counters' values wherever they
// name them (predicates, order, GroupBy, Select(...).Scan). Generated code
// calls it on the builder's own copy of the driver.
func Rewriting(drv dialect.Driver, r Runtime, typ string) dialect.Driver {
	return entrt.Rewriting(drv, r, typ)
}

// InlinedFor returns the context under which the fill after the query of
// spec leaves alone what InlineTotals selected in it.
func InlinedFor(ctx context.Context, spec *sqlgraph.QuerySpec) context.Context {
	return entrt.InlinedFor(ctx, spec)
}

// Intercepted reports whether a schema's query interceptors hold one of
// the user's: an UpdateOne by id then reads its row through them before
// writing a counter, so that a row they hide is not found.
func Intercepted(inters []ent.Interceptor) bool { return entrt.Intercepted(inters) }

// OnlyTraversers reports whether the interceptors of a schema are all
// Traversers (or entcounter's own): a read of a row through them is then
// what its rendered SQL says.
func OnlyTraversers(inters ...[]ent.Interceptor) bool { return entrt.OnlyTraversers(inters...) }

// ReadShared reports whether query, a read of one row's id rendered through
// the interceptors and the privacy policy, returns a row; concurrent reads
// of the same query and arguments share one execution.
func ReadShared(ctx context.Context, r Runtime, d dialect.Driver, query string, args []any) (bool, error) {
	return r.ReadShared(ctx, d, query, args)
}

// MaxPinned is how many rows an update or delete whose predicates read a
// counter may write (HotCounterPin names them by id in one statement,
// within every database's limit of arguments).
const MaxPinned = engine.FillArgs

// ReadsCounter returns query, a read of schema typ's rows, with its
// references to counters that have no column replaced by their values, and
// whether it had any.
func ReadsCounter(ctx context.Context, r Runtime, typ, query string) (string, bool, error) {
	return r.ReadsCounter(ctx, typ, query)
}

// OneServer reports whether d sends every statement to one database (ent's
// own SQL driver, or its debug driver around it): a read outside a
// transaction then reads where the write goes.
func OneServer(d dialect.Driver) bool { return entrt.OneServer(d) }

// WrittenLate reports whether m, about to be sent by a generated update,
// still writes a counter: a hook that ent ran after entcounter's wrote it.
func WrittenLate(r Runtime, m ent.Mutation) bool { return entrt.Written(r, m) }

// WriteLate runs entcounter's hooks of the counters m writes around save,
// the generated update's own write (which it calls again without them).
func WriteLate(ctx context.Context, r Runtime, m ent.Mutation, save func(context.Context) (ent.Value, error)) (ent.Value, error) {
	return entrt.Late(ctx, r, m, save)
}

// Source is what has a Runtime: a generated client, transaction or typed
// client (their config).
type Source = entrt.Source

// KeyAs converts an id given to a buffer to the id type of schema typ
// (the generated hotcounterAdd).
func KeyAs[T any](typ string, id any) (T, error) { return entrt.KeyAs[T](typ, id) }

// ErrNotCounter is hotcounter.ErrNotCounter.
var ErrNotCounter = hotcounter.ErrNotCounter

// Incrementer is what a generated typed buffered add writes to: an
// entcounter.Buffer.
type Incrementer = entrt.Incrementer

// Take is the body of a generated TakeX method (entcounter.Take of the
// counter field of schema typ).
func Take(ctx context.Context, src Source, typ, field string, id any, amount int64) error {
	return entrt.TakeTyped(ctx, src, typ, field, id, amount)
}

// Recount is the body of a generated RecountX method (entcounter.Recount
// of the count field of schema typ).
func Recount(ctx context.Context, src Source, typ, field string, ids ...any) (int64, error) {
	return entrt.RecountTyped(ctx, src, typ, field, ids...)
}

// Bulk is one CreateBulk, whose rows' starting values entcounter's hook
// writes at once, after the last row's.
type Bulk = entrt.Bulk

// NewBulk returns the Bulk of a CreateBulk of n rows.
func NewBulk(n int) *Bulk { return entrt.NewBulk(n) }

// WithLive is the context of a generated query's Live: its loads fill
// rollup counters with their exact value (entcounter.WithLive).
func WithLive(ctx context.Context) context.Context { return entrt.WithLive(ctx) }
