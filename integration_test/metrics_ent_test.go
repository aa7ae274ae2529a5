package integration_test

import (
	"context"
	"fmt"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/hotcounter/hotcounter/entcounter"
)

func TestMetricsAndHotKeysMatchTheOperationsPerformed_ent(t *testing.T) {
	eachEnt(t, func(t *testing.T, e *entEnv) {
		ctx := context.Background()
		reader := sdkmetric.NewManualReader()
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
		t.Cleanup(func() { _ = mp.Shutdown(ctx) })
		hook, err := entcounter.Configure(e.client, entcounter.Config{MeterProvider: mp})
		must(t, err)
		e.client.Use(hook)

		post := e.client.Post.Create().SetTitle("hot").SaveX(ctx)
		naive := e.client.NaivePost.Create().SaveX(ctx)
		for i := 0; i < 12; i++ {
			must(t, e.client.Post.UpdateOneID(post.ID).AddLikes(1).Exec(ctx))
		}
		for i := 0; i < 4; i++ {
			must(t, e.client.Post.UpdateOneID(post.ID).AddViews(2).Exec(ctx))
		}
		for i := 0; i < 5; i++ {
			must(t, e.client.NaivePost.UpdateOneID(naive.ID).AddLikes(1).Exec(ctx))
		}
		must(t, entcounter.RollupPass(ctx, e.client))

		attrs := func(counter string) map[string]string {
			return map[string]string{"db.system.name": systemOf(e.kind), "db.collection.name": "posts", "hotcounter.counter.name": counter}
		}
		m := collect(t, reader)
		n, ok := m.sum("hotcounter.increments", attrs("likes"))
		m.expect("increments of likes", n, 12, ok)
		n, ok = m.sum("hotcounter.increments", attrs("views"))
		m.expect("increments of views", n, 4, ok)
		if got := m.histogramCount("hotcounter.increment.duration", attrs("views")); got != 4 {
			t.Errorf("increment durations of views recorded = %d, want 4", got)
		}
		rollup := attrs("views")
		rollup["hotcounter.pass.name"] = "rollup"
		n, ok = m.sum("hotcounter.passes", rollup)
		m.expect("rollup passes of views", n, 1, ok)
		n, ok = m.sum("hotcounter.pass.parents", rollup)
		m.expect("parents the rollup folded", n, 1, ok)

		keys := entcounter.HotKeys(e.client, 10)
		want := map[string]int64{
			"posts.likes " + fmt.Sprint(post.ID) + " counter":      12,
			"posts.views " + fmt.Sprint(post.ID) + " counter":      4,
			"naive_posts.likes " + fmt.Sprint(naive.ID) + " plain": 5,
		}
		got := map[string]int64{}
		for _, k := range keys {
			kind := "plain"
			if k.Counter {
				kind = "counter"
			}
			got[k.Table+"."+k.Column+" "+k.Key+" "+kind] = k.Count
			if k.Error != 0 || k.Rate <= 0 {
				t.Errorf("hot key %+v: want an exact count and a rate", k)
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("hot keys = %v, want %v", got, want)
		}
	})
}
