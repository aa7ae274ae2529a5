package entcounter

import (
	"context"

	"entgo.io/ent"
	"entgo.io/ent/dialect/sql/sqlgraph"

	"github.com/hotcounter/hotcounter/internal/entrt"
)

// Source is anything with a HotCounter method: a generated *ent.Client,
// *ent.Tx, query or mutation. Every function of this package that works on
// a client takes one.
type Source = entrt.Source

// WithLive returns a context under which loads fill rollup counters with
// their exact value, column + pending slots, read in one statement, instead
// of the cached column. Sum counters are always exact.
func WithLive(ctx context.Context) context.Context { return entrt.WithLive(ctx) }

// ErrNeedsTx is wrapped by the error for a write to a child table, outside
// a transaction, that changes a count kept by hooks ([ByHooks]).
var ErrNeedsTx = entrt.ErrNeedsTx

// ErrHookedUpsert is wrapped by the error for an upsert (OnConflict) of
// rows whose count is kept by hooks: it may update rows the hook cannot
// name before the write. The write ran in the caller's transaction, which
// must roll back.
var ErrHookedUpsert = entrt.ErrHookedUpsert

// What code generated before entcounter/generated existed calls. Regenerate
// (go generate ./ent) to use entcounter/generated instead.

// Runtime is what generated code hands entcounter.
//
// Deprecated: generated code uses generated.Runtime; regenerate.
type Runtime = entrt.Runtime

// Def describes one counter of a generated schema.
//
// Deprecated: generated code uses generated.Def; regenerate.
type Def = entrt.Def

// CountDef describes a count of child rows of a generated schema.
//
// Deprecated: generated code uses generated.CountDef; regenerate.
type CountDef = entrt.CountDef

// State is what a client has learned of its database.
//
// Deprecated: generated code uses generated.State; regenerate.
type State = entrt.State

// NewState returns an empty State.
//
// Deprecated: generated code uses generated.NewState; regenerate.
func NewState() *State { return entrt.NewState() }

// Load fills the counters of loaded nodes.
//
// Deprecated: generated code uses generated.Load; regenerate.
func Load(ctx context.Context, r Runtime, typ string, selected []string, n int, key func(i int) any, set func(i int, field string, v int64)) error {
	return entrt.Load(ctx, r, typ, selected, n, key, set)
}

// WithoutColumns returns columns without the sum counters of a schema.
//
// Deprecated: generated code uses generated.WithoutColumns; regenerate.
func WithoutColumns(r Runtime, typ string, columns []string) []string {
	return entrt.WithoutColumns(r, typ, columns)
}

// DropZeroColumn removes a column that every row of a batch upsert gives 0.
//
// Deprecated: generated code uses generated.DropZeroColumn; regenerate.
func DropZeroColumn(nodes []*sqlgraph.CreateSpec, column string) { entrt.DropZeroColumn(nodes, column) }

// CountHook returns the ent hook that keeps counts declared with [ByHooks].
//
// Deprecated: generated code uses generated.CountHook; regenerate.
func CountHook() ent.Hook { return entrt.CountHook() }
