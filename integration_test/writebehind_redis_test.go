package integration_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"

	"github.com/hotcounter/hotcounter/gormcounter"
	"github.com/hotcounter/hotcounter/gormcounter/redisstore"
	"github.com/hotcounter/hotcounter/internal/writebehind"
)

// redisFor returns a client of the Redis server (HOTCOUNTER_REDIS_ADDR,
// default 127.0.0.1:6379) and a key prefix of the test's own, whose keys
// are deleted when the test ends. Without a server the test is skipped,
// or fails under CI=true.
func redisFor(t testing.TB) (*redis.Client, string) {
	t.Helper()
	addr := os.Getenv("HOTCOUNTER_REDIS_ADDR")
	if addr == "" {
		addr = "127.0.0.1:6379"
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := rdb.Ping(ctx).Err(); err != nil {
		rdb.Close()
		if os.Getenv("CI") == "true" {
			t.Fatalf("Redis (%s) is required under CI=true but unreachable: %v", addr, err)
		}
		t.Skipf("Redis (%s) unreachable, skipping (set CI=true to make this a failure): %v", addr, err)
	}
	prefix := fmt.Sprintf("hctest%x", rand.Uint64())
	t.Cleanup(func() {
		ctx := context.Background()
		iter := rdb.Scan(ctx, 0, prefix+":*", 1000).Iterator()
		for iter.Next(ctx) {
			rdb.Del(ctx, iter.Val())
		}
		rdb.Close()
	})
	return rdb, prefix
}

// redisBuffer opens one "app instance": its own pool and plugin on e's
// database, and a write-behind buffer in Redis under prefix.
func redisBuffer(t *testing.T, e *env, rdb redis.UniversalClient, prefix string, interval time.Duration) (*gorm.DB, *gormcounter.Buffer) {
	t.Helper()
	db := withPlugin(t, e, gormcounter.Config{})
	buf, err := gormcounter.NewBuffer(db, gormcounter.BufferConfig{Interval: interval,
		Store: redisstore.New(rdb, redisstore.Options{Prefix: prefix})})
	must(t, err)
	return db, buf
}

func TestRedisBufferCountsEveryAcknowledgedIncrementOnce(t *testing.T) {
	eachDB(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		rdb, prefix := redisFor(t)
		must(t, e.db.AutoMigrate(&Post{}))
		posts := make([]Post, 20)
		for i := range posts {
			posts[i].Title = "post"
		}
		must(t, e.db.Create(&posts).Error)

		// Two app instances share the counts in Redis and flush every 20 ms,
		// each while the other does.
		_, a := redisBuffer(t, e, rdb, prefix, 20*time.Millisecond)
		_, b := redisBuffer(t, e, rdb, prefix, 20*time.Millisecond)
		writers, each := writersFor(e.kind)
		var acked [20]atomic.Int64
		var wg sync.WaitGroup
		errs := make(chan error, writers)
		for w := 0; w < writers; w++ {
			buf := a
			if w%2 == 1 {
				buf = b
			}
			wg.Go(func() {
				for i := 0; i < each; i++ {
					p, delta := 0, int64(1) // most likes go to the viral post
					if i%10 == 9 {
						p, delta = 1+rand.IntN(len(posts)-1), int64(1+rand.IntN(3))
					}
					if err := buf.Increment(ctx, &Post{ID: posts[p].ID}, "Likes", delta); err != nil {
						errs <- err
						return
					}
					acked[p].Add(delta)
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("increment: %v", err)
		}
		must(t, a.Close(ctx))
		must(t, b.Close(ctx))

		var loaded []Post
		must(t, e.db.Order("id").Find(&loaded).Error)
		for i, p := range loaded {
			if p.Likes != acked[i].Load() {
				t.Errorf("post %d: %d likes counted, %d acknowledged", p.ID, p.Likes, acked[i].Load())
			}
		}
		if n := rdb.Keys(ctx, prefix+":*:[pfb]").Val(); len(n) != 0 {
			t.Errorf("keys left in Redis after both buffers closed: %v", n)
		}
	}, pool(writersPool))
}

// failingStore fails the first Done, or the first Take after taking: a
// flusher that died after COMMIT, or after moving the batch out of the
// pending hash.
type failingStore struct {
	writebehind.Store
	failDone, failTake atomic.Bool
}

var errDied = errors.New("the flusher died")

func (s *failingStore) Done(ctx context.Context, b writebehind.StoreBatch) error {
	if s.failDone.CompareAndSwap(true, false) {
		return errDied
	}
	return s.Store.Done(ctx, b)
}

func (s *failingStore) Take(ctx context.Context, cs []*writebehind.Counter) ([]writebehind.StoreBatch, error) {
	bs, err := s.Store.Take(ctx, cs)
	if err == nil && s.failTake.CompareAndSwap(true, false) {
		return nil, errDied
	}
	return bs, err
}

func TestRedisBufferWritesABatchOnceWhateverStepItsFlusherDiedAt(t *testing.T) {
	eachDB(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		rdb, prefix := redisFor(t)
		must(t, e.db.AutoMigrate(&Post{}))
		post := Post{Title: "post"}
		must(t, e.db.Create(&post).Error)
		likes := func() int64 {
			var p Post
			must(t, e.db.First(&p, post.ID).Error)
			return p.Likes
		}
		for _, step := range []string{"after taking the batch", "after COMMIT, before forgetting the batch"} {
			store := &failingStore{Store: redisstore.New(rdb, redisstore.Options{Prefix: prefix})}
			store.failTake.Store(step == "after taking the batch")
			store.failDone.Store(step != "after taking the batch")
			db := withPlugin(t, e, gormcounter.Config{})
			dying, err := gormcounter.NewBuffer(db, gormcounter.BufferConfig{Interval: time.Hour, Store: store})
			must(t, err)
			before := likes()
			must(t, dying.Increment(ctx, &Post{ID: post.ID}, "Likes", 5))
			if err := dying.Flush(ctx); !errors.Is(err, errDied) {
				t.Fatalf("%s: flush = %v, want the flusher to die", step, err)
			}
			pending, err := dying.Pending(&Post{ID: post.ID}, "Likes")
			must(t, err)
			if pending != 5 {
				t.Fatalf("%s: %d pending in Redis, want the 5 of the batch in flight", step, pending)
			}
			// Another instance flushes: it resumes the batch in flight, and
			// the ledger tells it whether the batch was applied.
			_, other := redisBuffer(t, e, rdb, prefix, time.Hour)
			must(t, other.Increment(ctx, &Post{ID: post.ID}, "Likes", 1))
			must(t, other.Flush(ctx))
			must(t, other.Flush(ctx)) // the new increment, in a batch of its own
			if got := likes() - before; got != 6 {
				t.Errorf("%s: %d likes counted, want 6 (5 + 1, each once)", step, got)
			}
			must(t, other.Close(ctx))
			must(t, dying.Close(ctx))
		}
	})
}
