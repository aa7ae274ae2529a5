package entcounter

import (
	"context"

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
