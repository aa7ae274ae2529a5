package integration_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/hotcounter/hotcounter"
)

// metrics reads everything a manual reader holds.
type metrics struct {
	t  *testing.T
	rm metricdata.ResourceMetrics
}

func collect(t *testing.T, r *sdkmetric.ManualReader) metrics {
	t.Helper()
	m := metrics{t: t}
	must(t, r.Collect(context.Background(), &m.rm))
	return m
}

func (m metrics) find(name string) (metricdata.Metrics, bool) {
	for _, sm := range m.rm.ScopeMetrics {
		for _, x := range sm.Metrics {
			if x.Name == name {
				return x, true
			}
		}
	}
	return metricdata.Metrics{}, false
}

// matches reports whether a point's attributes hold every want pair.
func matches(set attribute.Set, want map[string]string) bool {
	for k, v := range want {
		got, ok := set.Value(attribute.Key(k))
		if !ok || got.Emit() != v {
			return false
		}
	}
	return true
}

// sum adds up the points of an integer sum or gauge named name whose
// attributes match want; ok is false when there is none.
func (m metrics) sum(name string, want map[string]string) (int64, bool) {
	x, found := m.find(name)
	if !found {
		return 0, false
	}
	var n int64
	ok := false
	switch d := x.Data.(type) {
	case metricdata.Sum[int64]:
		for _, p := range d.DataPoints {
			if matches(p.Attributes, want) {
				n, ok = n+p.Value, true
			}
		}
	case metricdata.Gauge[int64]:
		for _, p := range d.DataPoints {
			if matches(p.Attributes, want) {
				n, ok = n+p.Value, true
			}
		}
	default:
		m.t.Fatalf("%s is %T, not an integer sum or gauge", name, x.Data)
	}
	return n, ok
}

// histogramCount is the number of measurements of a histogram whose
// attributes match want.
func (m metrics) histogramCount(name string, want map[string]string) uint64 {
	x, found := m.find(name)
	if !found {
		return 0
	}
	var n uint64
	for _, p := range x.Data.(metricdata.Histogram[float64]).DataPoints {
		if matches(p.Attributes, want) {
			n += p.Count
		}
	}
	return n
}

// gauge is the value of the float gauge point matching want.
func (m metrics) gauge(name string, want map[string]string) (float64, bool) {
	x, found := m.find(name)
	if !found {
		return 0, false
	}
	for _, p := range x.Data.(metricdata.Gauge[float64]).DataPoints {
		if matches(p.Attributes, want) {
			return p.Value, true
		}
	}
	return 0, false
}

// expect fails the test unless got equals want.
func (m metrics) expect(what string, got, want int64, ok bool) {
	m.t.Helper()
	if !ok || got != want {
		m.t.Errorf("%s = %d (recorded: %v), want %d", what, got, ok, want)
	}
}

func systemOf(k dbKind) string {
	switch k {
	case pg:
		return "postgresql"
	case my:
		return "mariadb"
	}
	return "sqlite"
}

// The metrics and the hot keys a client reports match what it did:
// increments and their durations (an increment that failed is none), a
// rollup pass and the parents it folded, the rollup's lag, a buffer's
// pending and flushed amounts and its flushes, and the hot keys of
// counters by table, column and row. GORM and ent, on every database.
func TestMetricsAndHotKeysMatchTheOperationsPerformed(t *testing.T) {
	eachORM(t, func(t *testing.T, o counterORM) {
		ctx := context.Background()
		reader := sdkmetric.NewManualReader()
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
		t.Cleanup(func() { _ = mp.Shutdown(ctx) })
		o = o.with(t, settings{MeterProvider: mp})
		posts := []int64{o.create(t, modelPost), o.create(t, modelPost)}
		for i := 0; i < 25; i++ {
			must(t, o.increment(modelPost, posts[0], "likes", 2))
		}
		for i := 0; i < 10; i++ {
			must(t, o.increment(modelPost, posts[i%2], "views", 1))
		}
		// An increment that fails (the model has no such counter) is not one.
		if err := o.increment(modelPost, posts[0], "title", 1); err == nil {
			t.Fatal("incrementing a string field succeeded")
		}
		keys := map[string]int64{}
		hot, err := o.hotKeys(10)
		must(t, err)
		for _, k := range hot {
			keys[fmt.Sprintf("%s.%s %s", k.Table, k.Column, k.Key)] = k.Count
			if !k.Counter || k.Error != 0 || k.Rate <= 0 {
				t.Errorf("hot key %+v: want a counter's, with an exact count and a rate", k)
			}
		}
		wantKeys := map[string]int64{
			fmt.Sprintf("posts.likes %d", posts[0]): 25,
			fmt.Sprintf("posts.views %d", posts[0]): 5,
			fmt.Sprintf("posts.views %d", posts[1]): 5,
		}
		if fmt.Sprint(keys) != fmt.Sprint(wantKeys) {
			t.Errorf("hot keys = %v, want %v", keys, wantKeys)
		}
		must(t, o.rollup(modelPost))
		buf := o.buffer(t, hotcounter.BufferConfig{Interval: time.Hour})
		for i := 0; i < 7; i++ {
			must(t, buf.increment(ctx, modelPost, posts[1], "likes", 3))
		}
		attrs := func(counter string) map[string]string {
			return map[string]string{"db.system.name": systemOf(o.kind()), "db.collection.name": "posts", "hotcounter.counter.name": counter}
		}

		m := collect(t, reader)
		n, ok := m.sum("hotcounter.increments", attrs("likes"))
		m.expect("increments of likes", n, 25, ok)
		n, ok = m.sum("hotcounter.increments", attrs("views"))
		m.expect("increments of views", n, 10, ok)
		if got := m.histogramCount("hotcounter.increment.duration", attrs("likes")); got != 25 {
			t.Errorf("increment durations of likes recorded = %d, want 25", got)
		}
		rollup := attrs("views")
		rollup["hotcounter.pass.name"] = "rollup"
		n, ok = m.sum("hotcounter.passes", rollup)
		m.expect("rollup passes of views", n, 1, ok)
		n, ok = m.sum("hotcounter.pass.parents", rollup)
		m.expect("parents the rollup folded", n, 2, ok)
		if lag, ok := m.gauge("hotcounter.rollup.lag", attrs("views")); !ok || lag < 0 || lag > 60 {
			t.Errorf("rollup lag of views = %v (recorded: %v), want the seconds since the pass", lag, ok)
		}
		n, ok = m.sum("hotcounter.buffer.pending", attrs("likes"))
		m.expect("buffer pending for likes", n, 21, ok)
		key := map[string]string{"db.collection.name": "posts", "hotcounter.counter.name": "likes", "hotcounter.hot_key.key": fmt.Sprint(posts[0])}
		if rate, ok := m.gauge("hotcounter.hot_key.rate", key); !ok || rate <= 0 {
			t.Errorf("hot key rate of post %d's likes = %v (recorded: %v), want > 0", posts[0], rate, ok)
		}

		must(t, buf.close(ctx))
		m = collect(t, reader)
		n, ok = m.sum("hotcounter.buffer.flushes", map[string]string{"db.system.name": systemOf(o.kind())})
		m.expect("buffer flushes", n, 1, ok)
		n, ok = m.sum("hotcounter.buffer.flushed", attrs("likes"))
		m.expect("amount the buffer flushed to likes", n, 21, ok)
		if n, ok := m.sum("hotcounter.buffer.pending", attrs("likes")); ok {
			t.Errorf("a closed buffer still reports %d pending", n)
		}
		if got := o.cached(t, modelPost, posts[1], "likes"); got != 21 {
			t.Errorf("post %d likes = %d after the flush, want 21", posts[1], got)
		}
	})
}
