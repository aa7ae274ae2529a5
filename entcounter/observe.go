package entcounter

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"time"

	"entgo.io/ent"
	entsql "entgo.io/ent/dialect/sql"
	"go.opentelemetry.io/otel/metric"

	"github.com/hotcounter/hotcounter/internal/engine"
	"github.com/hotcounter/hotcounter/internal/entrt"
	"github.com/hotcounter/hotcounter/internal/observe"
)

// HotKeysConfig tunes the counting of increments per row that [HotKeys]
// reports.
type HotKeysConfig struct {
	// Keys is how many rows are counted per counter or field and window:
	// exactly while no more rows than that are incremented in a window,
	// within a known bound (HotKey.Error) after that. Zero means 64.
	Keys int
	// Window is the length of the time windows; a report covers the last
	// complete window and the current one. Zero means one minute.
	Window time.Duration
	// Off turns the counting off.
	Off bool
}

// ObserveConfig says how [Observe] watches a client's counters.
type ObserveConfig struct {
	HotKeys HotKeysConfig
	// MeterProvider, when set, receives OpenTelemetry metrics: increments
	// and their duration, rollup and compaction passes, fold lag,
	// write-behind flushes and pending amounts, recounts, and the rate of
	// the hottest rows (see docs/metrics.md). Nil records none.
	MeterProvider metric.MeterProvider
}

// HotKey is how often one row of one counter or plain field was
// incremented lately, named by table and column; gormcounter.HotKey is
// the same type.
type HotKey = observe.HotKey

// Observe sets how the client's counters are watched, and returns the hook
// that counts increments of plain fields per row, to register on the
// client:
//
//	hook, err := entcounter.Observe(client, entcounter.ObserveConfig{MeterProvider: mp})
//	client.Use(hook)
//
// Without Observe, increments of counters are counted per row with the
// default [HotKeysConfig] and no metrics are recorded. Call it once, before
// the client is used; a later call starts the counts and gauges afresh.
//
// The hook counts an UpdateOne mutation's AddX of every field that is not
// a counter (counters are counted where they are written), so a schema
// whose hot field is not a counter yet shows which field to declare and
// which rows are hot. Bulk updates (Update().Where(...)) name no row and
// are not counted.
func Observe(src Source, cfg ObserveConfig) (ent.Hook, error) {
	r := src.HotCounter()
	system := r.System()
	if system == "mysql" && cfg.MeterProvider != nil {
		system = mysqlOrMariaDB(r)
	}
	o, err := observe.New(observe.Config{System: system, Keys: cfg.HotKeys.Keys, Window: cfg.HotKeys.Window,
		Off: cfg.HotKeys.Off, MeterProvider: cfg.MeterProvider})
	if err != nil {
		return nil, fmt.Errorf("entcounter: Observe: %w", err)
	}
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

// HotKeys returns the k rows with the most increments, among all counters
// and the plain fields counted by [Observe]'s hook, over the last one to
// two windows, hottest (highest Rate) first. An increment is counted for
// its row when it names one: UpdateOneID(id).AddX(n), or a Buffer's
// Increment.
func HotKeys(src Source, k int) []HotKey { return src.HotCounter().Observer().HotKeys(k) }

// countPlainAdds counts the adds of an UpdateOne mutation to fields that
// are not counters.
func countPlainAdds(o *observe.Observer, m ent.Mutation) {
	fields := m.AddedFields()
	if len(fields) == 0 {
		return
	}
	id, ok := mutationID(m)
	if !ok {
		return
	}
	src, generated := m.(Source)
	table := m.Type()
	if generated {
		if t, ok := src.HotCounter().Tables[m.Type()]; ok {
			table = t
		}
	}
	for _, f := range fields {
		if generated {
			if _, isCounter := src.HotCounter().Def(m.Type(), f); isCounter {
				continue
			}
		}
		o.CountWrite(table, f, engine.KeyText(id), false)
	}
}

// mutationID is the id of the row a mutation updates: generated mutations
// have ID() (T, bool) with the schema's id type.
func mutationID(m ent.Mutation) (any, bool) {
	if h, ok := m.(interface{ HotCounterID() (any, bool) }); ok {
		return h.HotCounterID()
	}
	method := reflect.ValueOf(m).MethodByName("ID")
	if !method.IsValid() || method.Type().NumIn() != 0 || method.Type().NumOut() != 2 || method.Type().Out(1).Kind() != reflect.Bool {
		return nil, false
	}
	out := method.Call(nil)
	return out[0].Interface(), out[1].Bool()
}

// mysqlOrMariaDB tells MariaDB from MySQL by the server's version.
func mysqlOrMariaDB(r entrt.Runtime) string {
	rows := &entsql.Rows{}
	if err := r.Driver.Query(context.Background(), "SELECT VERSION()", []any{}, rows); err != nil {
		return "mysql"
	}
	defer rows.Close()
	var v string
	if rows.Next() && rows.Scan(&v) == nil && strings.Contains(strings.ToLower(v), "mariadb") {
		return "mariadb"
	}
	return "mysql"
}
