package integration_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/hotcounter/hotcounter"
	"github.com/hotcounter/hotcounter/entcounter"
	"github.com/hotcounter/hotcounter/integration_test/ent/post"
	"github.com/hotcounter/hotcounter/redisstore"
)

// Increments of one counter named by the schema's type, its label or its
// table (Post, post, posts) are one counter's: Pending under any name sees
// them all, and one flush writes them. In memory and in Redis, whose adds
// under the names once shared the shards' sequence numbers and dropped
// one another's.
func TestEntBufferNamesOfOneSchemaAreOneCounter(t *testing.T) {
	eachEnt(t, func(t *testing.T, e *entEnv) {
		ctx := context.Background()
		rdb, prefix := redisFor(t)
		for _, store := range []string{"memory", "redis"} {
			p := e.client.Post.Create().SetTitle("named").SaveX(ctx)
			cfg := hotcounter.BufferConfig{Interval: time.Hour}
			if store == "redis" {
				cfg.Store = redisstore.New(rdb, redisstore.Options{Prefix: prefix})
			}
			buf, err := entcounter.NewBuffer(ctx, e.client, cfg)
			must(t, err)
			names := []string{"Post", "post", "posts"}
			var wg sync.WaitGroup
			for i := range 60 {
				wg.Go(func() { must(t, buf.Increment(ctx, names[i%3], post.FieldLikes, p.ID, 1)) })
			}
			wg.Wait()
			for _, name := range names {
				if n, err := buf.Pending(context.Background(), name, post.FieldLikes, p.ID); err != nil || n != 60 {
					t.Errorf("%s: Pending(%q) = %d, %v; want the 60 added under the three names", store, name, n, err)
				}
			}
			must(t, buf.Close(ctx))
			if got := e.client.Post.GetX(ctx, p.ID).Likes; got != 60 {
				t.Errorf("%s: %d likes after the flush, want 60", store, got)
			}
		}
	}, on(lite))
}
