package integration_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/hotcounter/hotcounter/entcounter"
	_ "github.com/hotcounter/hotcounter/integration_test/ent/runtime"
	_ "github.com/jackc/pgx/v5/stdlib"
)

func TestEntConcurrentIncrementsLoseNothing(t *testing.T) {
	parallel(t)
	eachEnt(t, func(t *testing.T, e *entEnv) {
		ctx := context.Background()
		c := e.client
		p := c.Post.Create().SetTitle("viral").SaveX(ctx)
		writers, each := writersFor(e.kind)
		var wg sync.WaitGroup
		var failed atomic.Int64
		for w := 0; w < writers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < each; i++ {
					if err := c.Post.UpdateOneID(p.ID).AddLikes(1).AddViews(1).Exec(ctx); err != nil {
						failed.Add(1)
						t.Errorf("increment: %v", err)
						return
					}
				}
			}()
		}
		wg.Wait()
		want := int64(writers * each)
		got := c.Post.GetX(entcounter.WithLive(ctx), p.ID)
		if failed.Load() != 0 || got.Likes != want || got.Views != want {
			t.Fatalf("likes=%d views=%d, want %d each (%d failed)", got.Likes, got.Views, want, failed.Load())
		}
	}, pool(writersPool))
}
