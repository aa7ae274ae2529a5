package integration_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hotcounter/hotcounter/entcounter"
	_ "github.com/hotcounter/hotcounter/integration_test/ent/runtime"
	_ "github.com/jackc/pgx/v5/stdlib"
)

func TestEntRollupUnderWriters(t *testing.T) {
	parallel(t)
	eachEnt(t, func(t *testing.T, e *entEnv) {
		ctx := context.Background()
		c := e.client
		p := c.Post.Create().SetTitle("busy").SaveX(ctx)
		loopCtx, stop := context.WithCancel(ctx)
		loopDone := make(chan error, 1)
		var loopErrs atomic.Int64
		go func() {
			loopDone <- entcounter.RollupLoop(loopCtx, c, 5*time.Millisecond, func(err error) {
				loopErrs.Add(1)
				t.Logf("rollup pass: %v", err)
			})
		}()
		const writers, each = 8, 100
		var wg sync.WaitGroup
		readerDone := make(chan struct{})
		go func() { // exact reads never go backwards
			defer close(readerDone)
			var last int64
			for loopCtx.Err() == nil {
				got, err := c.Post.Get(entcounter.WithLive(ctx), p.ID)
				if err != nil {
					t.Errorf("live read: %v", err)
					return
				}
				if got.Views < last {
					t.Errorf("live views went back from %d to %d", last, got.Views)
					return
				}
				last = got.Views
			}
		}()
		for w := 0; w < writers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < each; i++ {
					if err := c.Post.UpdateOneID(p.ID).AddViews(1).Exec(ctx); err != nil {
						t.Errorf("increment: %v", err)
						return
					}
				}
			}()
		}
		wg.Wait()
		stop()
		must(t, <-loopDone)
		<-readerDone
		if n := loopErrs.Load(); n != 0 {
			t.Fatalf("%d rollup passes failed under the writers", n)
		}
		must(t, entcounter.RollupPass(ctx, c))
		if got := c.Post.GetX(ctx, p.ID); got.Views != writers*each {
			t.Fatalf("views=%d after the final pass, want %d", got.Views, writers*each)
		}
	})
}
