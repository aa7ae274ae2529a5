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

// buf.Live(ctx): ent loads include what every instance's increments left
// in Redis; plain loads read SQL only.
func TestEntRedisBufferLiveLoadsAddWhatEveryInstanceHolds(t *testing.T) {
	eachEnt(t, func(t *testing.T, e *entEnv) {
		ctx := context.Background()
		rdb, prefix := redisFor(t)
		p := e.client.Post.Create().SetTitle("buffered").SaveX(ctx)
		var bufs []*entcounter.Buffer
		for range 2 {
			buf, err := entcounter.NewBuffer(ctx, reopenEnt(t, e), entcounter.BufferConfig{Interval: time.Hour,
				Store: redisstore.New(rdb, redisstore.Options{Prefix: prefix})})
			must(t, err)
			bufs = append(bufs, buf)
		}
		for range 4 {
			must(t, bufs[0].Increment(ctx, "Post", post.FieldLikes, p.ID, 1))
			must(t, bufs[1].Increment(ctx, "Post", post.FieldViews, p.ID, 2))
		}
		if got := e.client.Post.GetX(ctx, p.ID); got.Likes != 0 || got.Views != 0 {
			t.Fatalf("a plain load read likes %d views %d, want SQL only (0, 0)", got.Likes, got.Views)
		}
		// Pending reads every instance's increments from Redis, under its
		// context.
		if n, err := bufs[1].PendingContext(ctx, "Post", post.FieldLikes, p.ID); err != nil || n != 4 {
			t.Fatalf("PendingContext = %d, %v; want 4 (the other instance's likes)", n, err)
		}
		gone, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := bufs[1].PendingContext(gone, "Post", post.FieldLikes, p.ID); !errors.Is(err, context.Canceled) {
			t.Fatalf("PendingContext with an ended context: %v, want context.Canceled", err)
		}
		got := e.client.Post.GetX(bufs[0].Live(ctx), p.ID)
		if got.Likes != 4 || got.Views != 8 {
			t.Fatalf("a load with the buffer read likes %d views %d, want 4 and 8 (both instances' increments in Redis)", got.Likes, got.Views)
		}
		for _, buf := range bufs {
			must(t, buf.Close(ctx))
		}
		if got := e.client.Post.GetX(entcounter.WithLive(ctx), p.ID); got.Likes != 4 || got.Views != 8 {
			t.Fatalf("after the flush, likes %d views %d, want 4 and 8", got.Likes, got.Views)
		}
	})
}
