package redisstore

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/hotcounter/hotcounter/internal/countersql"
	"github.com/hotcounter/hotcounter/internal/testdb"
	"github.com/hotcounter/hotcounter/internal/writebehind"
)

// BenchmarkAdd: 32 goroutines add to one parent, through the store alone
// and, for scale, through go-redis's own INCRBY, one command per add.
func BenchmarkAdd(b *testing.B) {
	rdb, prefix := testdb.Redis(b)
	s := New(rdb, Options{Prefix: prefix})
	c := &writebehind.Counter{Name: "Post.Likes", Table: countersql.Table{Slots: "post_likes_slots"}}
	ctx := context.Background()
	run := func(b *testing.B, op func() error) {
		b.SetParallelism(16) // 32 goroutines on 2 CPUs
		var failed atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if op() != nil {
					failed.Add(1)
				}
			}
		})
		if failed.Load() > 0 {
			b.Fatalf("%d adds failed", failed.Load())
		}
	}
	b.Run("store", func(b *testing.B) {
		run(b, func() error { return s.Add(ctx, c, uint(1), 1) })
	})
	b.Run("incrby", func(b *testing.B) {
		run(b, func() error { return rdb.IncrBy(ctx, prefix+":raw", 1).Err() })
	})
}
