package integration_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/hotcounter/hotcounter/entcounter"
	"github.com/hotcounter/hotcounter/integration_test/ent/post"
	"github.com/hotcounter/hotcounter/redisstore"
)

// PendingContext reads the store (Redis) under its context: with an ended
// one it returns the context's error
// (TestRedisBufferLiveLoadsAddWhatEveryInstanceHolds has the loads, for
// both ORMs).
func TestEntRedisBufferPendingContextEndsWithItsContext(t *testing.T) {
	eachEnt(t, func(t *testing.T, e *entEnv) {
		ctx := context.Background()
		rdb, prefix := redisFor(t)
		p := e.client.Post.Create().SetTitle("buffered").SaveX(ctx)
		buf, err := entcounter.NewBuffer(ctx, e.client, entcounter.BufferConfig{Interval: time.Hour,
			Store: redisstore.New(rdb, redisstore.Options{Prefix: prefix})})
		must(t, err)
		defer buf.Close(ctx)
		must(t, buf.Increment(ctx, "Post", post.FieldLikes, p.ID, 4))
		if n, err := buf.PendingContext(ctx, "Post", post.FieldLikes, p.ID); err != nil || n != 4 {
			t.Fatalf("PendingContext = %d, %v; want 4", n, err)
		}
		gone, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := buf.PendingContext(gone, "Post", post.FieldLikes, p.ID); !errors.Is(err, context.Canceled) {
			t.Fatalf("PendingContext with an ended context: %v, want context.Canceled", err)
		}
	}, on(lite))
}

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
			cfg := entcounter.BufferConfig{Interval: time.Hour}
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
				if n, err := buf.Pending(name, post.FieldLikes, p.ID); err != nil || n != 60 {
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
