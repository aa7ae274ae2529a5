package integration_test

import (
	"context"
	"errors"
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
