// Package observe is what gormcounter and entcounter share to watch their
// counters run: the per-row count of increments (hot keys) and the
// OpenTelemetry metrics. An ORM package makes one Observer per plugin or
// client and calls it where counters are written, folded and flushed.
//
// Metric names and attributes follow the OpenTelemetry semantic
// conventions: dot-separated names under hotcounter., units in metadata,
// db.system.name and db.collection.name (the parent table) on every
// measurement, hotcounter.counter.name for the counter or column, and
// error.type on failed operations. Hot keys are exported for the top k rows
// only, so that label cardinality stays bounded.
package observe

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/hotcounter/hotcounter"
	"github.com/hotcounter/hotcounter/internal/hotkeys"
)

// Scope is the instrumentation scope of hotcounter's meters.
const Scope = "github.com/hotcounter/hotcounter"

// Attribute keys.
const (
	SystemKey     = attribute.Key("db.system.name")
	TableKey      = attribute.Key("db.collection.name")
	CounterKey    = attribute.Key("hotcounter.counter.name")
	PassKey       = attribute.Key("hotcounter.pass.name")
	ErrorTypeKey  = attribute.Key("error.type")
	HotKeyKey     = attribute.Key("hotcounter.hot_key.key")
	HotCounterKey = attribute.Key("hotcounter.hot_key.counter")
	DeclaredKey   = attribute.Key("hotcounter.counter.declared")
)

// Config configures an Observer.
type Config struct {
	// System is db.system.name: postgresql, mysql, mariadb or sqlite.
	System string
	// HotKeys configures the hot-key sketch; Off turns it off.
	Keys   int
	Window time.Duration
	Off    bool
	// MeterProvider, when set, receives the metrics.
	MeterProvider metric.MeterProvider
	// TopKeys is how many hot keys per counter or column the hot-key gauge
	// exports (default 5).
	TopKeys int
}

// Observer counts hot keys and records metrics. A nil *Observer does
// nothing, so callers need not check.
type Observer struct {
	system string
	hot    *hotkeys.Tracker
	// counters: "table.column" names that are counters, not plain columns.
	counters sync.Map

	meter metric.Meter
	top   int

	increments    metric.Int64Counter
	incrementTime metric.Float64Histogram
	passes        metric.Int64Counter
	passTime      metric.Float64Histogram
	folded        metric.Int64Counter
	flushes       metric.Int64Counter
	flushed       metric.Int64Counter
	replays       metric.Int64Counter
	recounts      metric.Int64Counter
	corrections   metric.Int64Counter
	registrations []metric.Registration
	mu            sync.Mutex
	lastFold      map[[2]string]time.Time // (table, counter) -> start of the last rollup pass that finished
	pending       map[*PendingSource]struct{}
	backlogs      map[*BacklogSource]struct{}
}

// BacklogItem is what a write-behind store holds for one counter,
// acknowledged and not yet written, as a buffer's last flush read it.
type BacklogItem struct {
	Table, Counter string // the parent table and the counter's column
	// Declared: the buffer's process declares the counter (it flushes it).
	Declared   bool
	Increments int64
	Oldest     time.Duration
}

// BacklogSource reports what a write-behind buffer with a store last read
// of the store's backlog.
type BacklogSource struct {
	Fn func() []BacklogItem
}

// PendingSource reports what a write-behind buffer holds: the increments
// acknowledged and not yet written, per table and counter.
type PendingSource struct {
	Fn func() map[[2]string]int64
}

// New returns an Observer, or an error if the meter provider refused an
// instrument.
func New(cfg Config) (*Observer, error) {
	o := &Observer{system: cfg.System, top: cfg.TopKeys, lastFold: map[[2]string]time.Time{}, pending: map[*PendingSource]struct{}{}, backlogs: map[*BacklogSource]struct{}{}}
	if o.top <= 0 {
		o.top = 5
	}
	if !cfg.Off {
		o.hot = hotkeys.New(hotkeys.Options{K: cfg.Keys, Window: cfg.Window})
	}
	if cfg.MeterProvider == nil {
		return o, nil
	}
	m := cfg.MeterProvider.Meter(Scope)
	o.meter = m
	var errs []error
	counter := func(name, unit, desc string) metric.Int64Counter {
		c, err := m.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return c
	}
	seconds := func(name, desc string) metric.Float64Histogram {
		h, err := m.Float64Histogram(name, metric.WithUnit("s"), metric.WithDescription(desc),
			metric.WithExplicitBucketBoundaries(0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10))
		errs = append(errs, err)
		return h
	}
	o.increments = counter("hotcounter.increments", "{increment}", "Increments of counters (each call, whatever its amount).")
	o.incrementTime = seconds("hotcounter.increment.duration", "Duration of increments, from the call to its statement's commit.")
	o.passes = counter("hotcounter.passes", "{pass}", "Rollup and compaction passes run, by hotcounter.pass.name (rollup, compact).")
	o.passTime = seconds("hotcounter.pass.duration", "Duration of rollup and compaction passes.")
	o.folded = counter("hotcounter.pass.parents", "{parent}", "Parents whose slot rows a pass folded or compacted (an append counter's delta rows are folded by id and not counted here).")
	o.flushes = counter("hotcounter.buffer.flushes", "{flush}", "Flushes of the write-behind buffer; failed ones carry error.type (they are retried).")
	o.flushed = counter("hotcounter.buffer.flushed", "{increment}", "Increments the write-behind buffer wrote to the database.")
	o.replays = counter("hotcounter.buffer.ledger.replays", "{batch}", "Batches the write-behind buffer found already applied in its ledger (a commit whose outcome was unknown had succeeded).")
	o.recounts = counter("hotcounter.count.recounts", "{recount}", "Recounts of counts of child rows.")
	o.corrections = counter("hotcounter.count.corrections", "{parent}", "Parents whose count a recount found wrong and corrected.")

	lag, err := m.Float64ObservableGauge("hotcounter.rollup.lag", metric.WithUnit("s"),
		metric.WithDescription("Time since the start of the last rollup pass that finished, per counter: increments older than this are folded into the column."))
	errs = append(errs, err)
	pending, err := m.Int64ObservableGauge("hotcounter.buffer.pending", metric.WithUnit("{increment}"),
		metric.WithDescription("Amount acknowledged by write-behind buffers and not yet written, per counter."))
	errs = append(errs, err)
	backlog, err := m.Int64ObservableGauge("hotcounter.buffer.store.backlog", metric.WithUnit("{increment}"),
		metric.WithDescription("Increments a write-behind store (Redis) holds, acknowledged and not yet written, from every process, per counter, as the last flush read them; hotcounter.counter.declared is false for a counter no model of this process declares (it does not flush them)."))
	errs = append(errs, err)
	backlogAge, err := m.Float64ObservableGauge("hotcounter.buffer.store.backlog.age", metric.WithUnit("s"),
		metric.WithDescription("Age of the oldest increment a write-behind store holds not yet written, per counter, as the last flush read it."))
	errs = append(errs, err)
	rate, err := m.Float64ObservableGauge("hotcounter.hot_key.rate", metric.WithUnit("{increment}/s"),
		metric.WithDescription("Increments per second of the hottest rows of each counter or plain column (the top few only)."))
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("hotcounter: metrics: %w", err)
	}
	reg, err := m.RegisterCallback(func(_ context.Context, ob metric.Observer) error {
		now := time.Now()
		o.mu.Lock()
		for k, at := range o.lastFold {
			ob.ObserveFloat64(lag, now.Sub(at).Seconds(), metric.WithAttributes(o.attrs(k[0], k[1])...))
		}
		sources := make([]*PendingSource, 0, len(o.pending))
		for s := range o.pending {
			sources = append(sources, s)
		}
		backlogSources := make([]*BacklogSource, 0, len(o.backlogs))
		for s := range o.backlogs {
			backlogSources = append(backlogSources, s)
		}
		o.mu.Unlock()
		// Buffers on one store read the same backlog: the gauge is the
		// largest any of them read, not their sum.
		type backlogKey struct {
			table, counter string
			declared       bool
		}
		held := map[backlogKey]BacklogItem{}
		for _, s := range backlogSources {
			for _, it := range s.Fn() {
				k := backlogKey{it.Table, it.Counter, it.Declared}
				cur := held[k]
				cur.Increments, cur.Oldest = max(cur.Increments, it.Increments), max(cur.Oldest, it.Oldest)
				held[k] = cur
			}
		}
		for k, it := range held {
			set := metric.WithAttributes(o.attrs(k.table, k.counter, DeclaredKey.Bool(k.declared))...)
			ob.ObserveInt64(backlog, it.Increments, set)
			ob.ObserveFloat64(backlogAge, it.Oldest.Seconds(), set)
		}
		sums := map[[2]string]int64{}
		for _, s := range sources {
			for k, v := range s.Fn() {
				sums[k] += v
			}
		}
		for k, v := range sums {
			ob.ObserveInt64(pending, v, metric.WithAttributes(o.attrs(k[0], k[1])...))
		}
		if o.hot != nil {
			for _, name := range o.hot.Names() {
				table, column := split(name)
				_, isCounter := o.counters.Load(name)
				for _, k := range o.hot.Top(name, o.top) {
					ob.ObserveFloat64(rate, k.Rate, metric.WithAttributes(append(o.attrs(table, column),
						HotKeyKey.String(k.Key), HotCounterKey.Bool(isCounter))...))
				}
			}
		}
		return nil
	}, lag, pending, backlog, backlogAge, rate)
	if err != nil {
		return nil, fmt.Errorf("hotcounter: metrics: %w", err)
	}
	o.registrations = append(o.registrations, reg)
	return o, nil
}

func (o *Observer) attrs(table, counter string, more ...attribute.KeyValue) []attribute.KeyValue {
	return append([]attribute.KeyValue{SystemKey.String(o.system), TableKey.String(table), CounterKey.String(counter)}, more...)
}

func errAttrs(err error) []attribute.KeyValue {
	if err == nil {
		return nil
	}
	return []attribute.KeyValue{ErrorTypeKey.String(ErrorType(err))}
}

// ErrorType is the error.type of err: the context's error, or the Go type
// of the innermost error (low cardinality, as the convention asks).
func ErrorType(err error) string {
	switch {
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	}
	for {
		next := errors.Unwrap(err)
		if next == nil {
			break
		}
		err = next
	}
	return fmt.Sprintf("%T", err)
}

// Increment records one increment of counter (a column of table) that
// took d.
func (o *Observer) Increment(ctx context.Context, table, counter string, d time.Duration, err error) {
	if o == nil || o.increments == nil {
		return
	}
	set := metric.WithAttributes(o.attrs(table, counter, errAttrs(err)...)...)
	o.increments.Add(ctx, 1, set)
	o.incrementTime.Record(ctx, d.Seconds(), set)
}

// Counting reports whether hot keys are counted, so that callers skip
// working out keys when they are not.
func (o *Observer) Counting() bool { return o != nil && o.hot != nil }

// CountWrite counts one write to a row (key) of a counter or of a plain
// column, for the hot keys, named by table and column in both ORMs.
func (o *Observer) CountWrite(table, column, key string, counter bool) {
	if o == nil || o.hot == nil {
		return
	}
	o.CountWriteTo(table+"."+column, key, counter)
}

// CountWriteTo is CountWrite with the name "table.column" made once by the
// caller (a write path that names the same counter on every write).
func (o *Observer) CountWriteTo(name, key string, counter bool) {
	if o == nil || o.hot == nil {
		return
	}
	if counter {
		if _, seen := o.counters.Load(name); !seen {
			o.counters.Store(name, true)
		}
	}
	o.hot.Add(name, key, 1) // writes, whatever their size: each takes the row's lock once
}

// Pass records a pass (rollup, compact) over one counter that started at
// started and folded or compacted parents.
func (o *Observer) Pass(ctx context.Context, pass, table, counter string, started time.Time, parents int64, err error) {
	if o == nil {
		return
	}
	if pass == "rollup" && err == nil {
		o.mu.Lock()
		o.lastFold[[2]string{table, counter}] = started
		o.mu.Unlock()
	}
	if o.passes == nil {
		return
	}
	set := metric.WithAttributes(o.attrs(table, counter, append(errAttrs(err), PassKey.String(pass))...)...)
	o.passes.Add(ctx, 1, set)
	o.passTime.Record(ctx, time.Since(started).Seconds(), set)
	if parents > 0 {
		o.folded.Add(ctx, parents, metric.WithAttributes(o.attrs(table, counter, PassKey.String(pass))...))
	}
}

// Recount records a recount of a count that corrected parents.
func (o *Observer) Recount(ctx context.Context, table, counter string, corrected int64, err error) {
	if o == nil || o.recounts == nil {
		return
	}
	o.recounts.Add(ctx, 1, metric.WithAttributes(o.attrs(table, counter, errAttrs(err)...)...))
	if corrected > 0 {
		o.corrections.Add(ctx, corrected, metric.WithAttributes(o.attrs(table, counter)...))
	}
}

// Flush records a flush of a write-behind buffer: the increments it wrote
// per (table, counter), and the error that failed it.
func (o *Observer) Flush(ctx context.Context, written map[[2]string]int64, err error) {
	if o == nil || o.flushes == nil {
		return
	}
	o.flushes.Add(ctx, 1, metric.WithAttributes(append([]attribute.KeyValue{SystemKey.String(o.system)}, errAttrs(err)...)...))
	for k, n := range written {
		o.flushed.Add(ctx, n, metric.WithAttributes(o.attrs(k[0], k[1])...))
	}
}

// Replay records a batch the buffer found already applied.
func (o *Observer) Replay(ctx context.Context) {
	if o == nil || o.replays == nil {
		return
	}
	o.replays.Add(ctx, 1, metric.WithAttributes(SystemKey.String(o.system)))
}

// WatchPending adds a buffer's pending amounts to the pending gauge until
// the returned function is called.
func (o *Observer) WatchPending(fn func() map[[2]string]int64) (stop func()) {
	if o == nil {
		return func() {}
	}
	return watch(&o.mu, o.pending, &PendingSource{Fn: fn})
}

// WatchBacklog adds a buffer's reading of its store's backlog to the
// backlog gauges until the returned function is called.
func (o *Observer) WatchBacklog(fn func() []BacklogItem) (stop func()) {
	if o == nil {
		return func() {}
	}
	return watch(&o.mu, o.backlogs, &BacklogSource{Fn: fn})
}

// watch adds s to the sources a gauge reads, under mu, until stop.
func watch[S any](mu *sync.Mutex, sources map[*S]struct{}, s *S) (stop func()) {
	mu.Lock()
	sources[s] = struct{}{}
	mu.Unlock()
	return func() {
		mu.Lock()
		delete(sources, s)
		mu.Unlock()
	}
}

// HotKeys returns the k rows with the most writes among all counters and
// columns, hottest (highest rate) first; with the counting off, an error
// saying so.
func (o *Observer) HotKeys(k int) ([]hotcounter.HotKey, error) {
	if o == nil || o.hot == nil {
		return nil, hotcounter.ErrHotKeysOff
	}
	var out []hotcounter.HotKey
	for _, name := range o.hot.Names() {
		table, column := split(name)
		_, isCounter := o.counters.Load(name)
		for _, key := range o.hot.Top(name, k) {
			out = append(out, hotcounter.HotKey{Table: table, Column: column, Counter: isCounter, Key: key.Key,
				Count: key.Count, Error: key.Error, Rate: key.Rate, Span: key.Span})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Rate > out[j].Rate })
	if k >= 0 && len(out) > k {
		out = out[:k] // the k hottest rows of all counters and columns
	}
	return out, nil
}

// Close unregisters the gauges' callback.
func (o *Observer) Close() error {
	if o == nil {
		return nil
	}
	var errs []error
	for _, r := range o.registrations {
		errs = append(errs, r.Unregister())
	}
	return errors.Join(errs...)
}

func split(name string) (string, string) {
	i := strings.LastIndexByte(name, '.')
	return name[:i], name[i+1:]
}
