package entcounter

import (
	"context"
	"fmt"
	"time"

	"entgo.io/ent"
	"go.opentelemetry.io/otel/metric"

	"github.com/hotcounter/hotcounter"
	"github.com/hotcounter/hotcounter/internal/observe"
	"github.com/hotcounter/hotcounter/internal/spec"
)

// Config holds a client's settings, the run-time ones of gormcounter.Config
// with the same names and defaults. (Slot counts are declared in the
// schema and checked at generation, so there is no DefaultSlots or Models.)
type Config struct {
	// RollupBatchSize is how many parents one transaction of a pass
	// (RollupPass, CompactPass, MoveToSlots, Recount) takes.
	// Zero means 500.
	RollupBatchSize int
	// InFlight is how many increment statements may run at once for one
	// counter of the same row outside a transaction. Increments that
	// arrive while that many run wait for one of them to finish and then
	// go together, as one statement that adds their sum; a lone increment
	// never waits. Zero means 2; negative turns combining off.
	InFlight int
	// AutoCooldown is how long the increments of a parent of a slots=auto
	// counter must go without two statements in flight at once before its
	// width halves (the widening is immediate). Zero means 5 seconds.
	AutoCooldown time.Duration
	// HotKeys tunes the counting of increments per row that [HotKeys]
	// reports; on unless HotKeys.Off.
	HotKeys hotcounter.HotKeysConfig
	// MeterProvider, when set, receives OpenTelemetry metrics: increments
	// and their duration, rollup and compaction passes, fold lag,
	// write-behind flushes and pending amounts, recounts, and the rate of
	// the hottest rows (see docs/metrics.md). Nil records none.
	MeterProvider metric.MeterProvider
	// OnError hears every error of the work the client's counters do in
	// the background, which no call can return: a pass of [RollupLoop]
	// that failed (the next tick retries it), a [Buffer]'s flush that
	// failed (retried) and its ledger's pruning, and, with a Store,
	// increments the store holds of counters no schema of this process
	// declares (hotcounter.ErrUndeclaredCounter, at most once a minute per
	// counter) and a backlog past MaxBacklog under BufferKeep. Nil: they go
	// to the client's logger (ent.Log; the standard logger by default), as
	// gormcounter's go to GORM's.
	OnError func(error)
}

// Configure sets the client's settings, as gormcounter.New does for a
// *gorm.DB, and returns the hook that counts increments of plain fields
// per row, to register on the client:
//
//	hook, err := entcounter.Configure(client, entcounter.Config{MeterProvider: mp})
//	client.Use(hook)
//
// Without Configure, a client has the defaults: counters' increments
// counted per row, no metrics. Call it once, before the client is used; a
// later call starts the counts and gauges afresh.
//
// The hook counts an UpdateOne mutation's AddX of every field that is not
// a counter (counters are counted where they are written), so a schema
// whose hot field is not a counter yet shows which field to declare and
// which rows are hot. Bulk updates (Update().Where(...)) name no row and
// are not counted.
func Configure(src Source, cfg Config) (ent.Hook, error) {
	r := src.HotCounter()
	// Configure takes no context, as GORM's db.Use: the one read (MySQL or
	// MariaDB, for the metrics' db.system.name) runs under Background.
	o, err := observe.New(observe.Config{System: r.System(context.Background(), cfg.MeterProvider != nil), Keys: cfg.HotKeys.Keys, Window: cfg.HotKeys.Window,
		Off: cfg.HotKeys.Off, MeterProvider: cfg.MeterProvider})
	if err != nil {
		return nil, fmt.Errorf("entcounter: Configure: %w", err)
	}
	r.Configure(spec.Settings{BatchSize: cfg.RollupBatchSize, InFlight: cfg.InFlight, AutoCooldown: cfg.AutoCooldown, OnError: cfg.OnError})
	r.SetObserver(o)
	return func(next ent.Mutator) ent.Mutator {
		return ent.MutateFunc(func(ctx context.Context, m ent.Mutation) (ent.Value, error) {
			if m.Op().Is(ent.OpUpdateOne) {
				countPlainAdds(o, m)
			}
			return next.Mutate(ctx, m)
		})
	}, nil
}
