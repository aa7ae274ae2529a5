package integration_test

// What a process that writes through the Redis store leaves when it dies,
// and who writes it: any buffer on the store flushes every counter its
// process declares, whichever process added to it.

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/hotcounter/hotcounter"
	"github.com/hotcounter/hotcounter/gormcounter"
	"github.com/hotcounter/hotcounter/internal/countersql"
	"github.com/hotcounter/hotcounter/internal/writebehind"
	"github.com/hotcounter/hotcounter/redisstore"
)

// reports collects what a buffer tells the Config's OnError.
type reports struct {
	mu   sync.Mutex
	errs []error
}

func (r *reports) add(err error) {
	r.mu.Lock()
	r.errs = append(r.errs, err)
	r.mu.Unlock()
}

func (r *reports) all() []error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]error(nil), r.errs...)
}

// keysLeft lists the pending, in-flight and batch-id keys under prefix.
func keysLeft(t testing.TB, rdb redis.UniversalClient, prefix string) []string {
	t.Helper()
	var keys []string
	ctx := context.Background()
	scan := func(ctx context.Context, c *redis.Client) error {
		iter := c.Scan(ctx, 0, prefix+":*", 1000).Iterator()
		for iter.Next(ctx) {
			if k := iter.Val(); strings.HasSuffix(k, ":p") || strings.HasSuffix(k, ":f") || strings.HasSuffix(k, ":b") {
				keys = append(keys, k)
			}
		}
		return iter.Err()
	}
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		var mu sync.Mutex
		must(t, cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
			mu.Lock()
			defer mu.Unlock()
			return scan(ctx, c)
		}))
	} else {
		must(t, scan(ctx, rdb.(*redis.Client)))
	}
	return keys
}

// writesWhatADeadProcessLeft runs the scene on rdb: a process increments
// three posts through the store, takes one batch into flight and dies
// there (its flusher killed after taking it), acknowledges more, and
// never flushes again. A fresh process that serves the same models and
// never increments writes all of it within a few of its intervals,
// reports nothing, and leaves nothing in Redis.
func writesWhatADeadProcessLeft(t *testing.T, o counterORM, rdb redis.UniversalClient, prefix string) {
	t.Helper()
	ctx := context.Background()
	posts := o.createMany(t, modelPost, 3)
	dying := &failingStore{Store: redisstore.New(rdb, redisstore.Options{Prefix: prefix})}
	dead := o.with(t, settings{}).buffer(t, hotcounter.BufferConfig{Interval: time.Hour, Store: dying})
	want := make([][2]int64, len(posts))
	for i, id := range posts {
		must(t, dead.increment(ctx, modelPost, id, "likes", int64(10*(i+1))))
		want[i][0] += int64(10 * (i + 1))
	}
	dying.failTake.Store(true)
	if err := dead.flush(ctx); !errors.Is(err, errDied) {
		t.Fatalf("the dying flush: %v, want it to die after taking its batches", err)
	}
	for i, id := range posts {
		must(t, dead.increment(ctx, modelPost, id, "likes", 1))
		must(t, dead.increment(ctx, modelPost, id, "views", 2))
		want[i][0]++
		want[i][1] += 2
	}

	var heard reports
	fresh := o.with(t, settings{DeclareModels: true, OnError: heard.add}).buffer(t, hotcounter.BufferConfig{Interval: 20 * time.Millisecond,
		Store: redisstore.New(rdb, redisstore.Options{Prefix: prefix})})
	waitFor(t, 10*time.Second, "the fresh process to write what the dead one left", func() bool {
		for i, id := range posts {
			if exactly(t, o, modelPost, id, "likes") != want[i][0] || exactly(t, o, modelPost, id, "views") != want[i][1] {
				return false
			}
		}
		return true
	})
	must(t, fresh.close(ctx))
	for i, id := range posts {
		if got := [2]int64{exactly(t, o, modelPost, id, "likes"), exactly(t, o, modelPost, id, "views")}; got != want[i] {
			t.Errorf("post %d: likes and views %v, want %v (each acknowledged increment once)", id, got, want[i])
		}
	}
	if left := keysLeft(t, rdb, prefix); len(left) != 0 {
		t.Errorf("keys left in Redis: %v", left)
	}
	if errs := heard.all(); len(errs) != 0 {
		t.Errorf("the fresh process reported %v", errs)
	}
	must(t, dead.close(ctx))
}

// A restarted process, or one that only flushes, writes what a dead one
// left in Redis, pending and in flight, without incrementing anything
// itself (GORM declares its models in Config.Models; ent's client
// declares every schema). Both ORMs, every database, standalone Redis.
func TestRedisBufferOfAFreshProcessWritesWhatADeadOneLeft(t *testing.T) {
	eachORM(t, func(t *testing.T, o counterORM) {
		rdb, prefix := redisFor(t)
		writesWhatADeadProcessLeft(t, o, rdb, prefix)
	})
}

// The same on a Redis Cluster (the counter's shards on three masters) and
// behind a Sentinel. Both ORMs, PostgreSQL.
func TestRedisBufferOfAFreshProcessWritesWhatADeadOneLeftOnClusterAndSentinel(t *testing.T) {
	parallel(t)
	for _, topology := range []string{"cluster", "sentinel"} {
		t.Run(topology, func(t *testing.T) {
			var rdb redis.UniversalClient
			if topology == "cluster" {
				rdb = startCluster(t).client(t)
			} else {
				rdb = startSentinel(t).client(t)
			}
			eachORM(t, func(t *testing.T, o counterORM) {
				writesWhatADeadProcessLeft(t, o, rdb, clusterPrefix(t))
			}, on(pg))
		})
	}
}

// What the store holds for a counter that no model of the process
// declares is left as it is: reported to OnError (once, not at every
// flush) with ErrUndeclaredCounter naming it, and in the backlog gauges
// with hotcounter.counter.declared false; Close does not wait for it. The
// counters it declares are flushed as ever. Both ORMs, every database.
func TestRedisBufferLeavesAndReportsCountersItDoesNotDeclare(t *testing.T) {
	eachORM(t, func(t *testing.T, o counterORM) {
		ctx := context.Background()
		rdb, prefix := redisFor(t)
		other := redisstore.New(rdb, redisstore.Options{Prefix: prefix})
		ghost := &writebehind.Counter{Name: "Ghost.Hits", Column: "hits", Slots: 16,
			Table: countersql.Table{Parent: "ghosts", Slots: "ghost_hits_slots"}}
		for k := range 3 {
			must(t, other.Add(ctx, ghost, int64(k+1), int64(k+1)))
		}
		snapshot := func() map[string]map[string]string {
			out := map[string]map[string]string{}
			for _, k := range keysLeft(t, rdb, prefix) {
				if strings.Contains(k, "ghost_hits_slots") {
					out[k] = rdb.HGetAll(ctx, k).Val()
				}
			}
			return out
		}
		before := snapshot()

		reader := sdkmetric.NewManualReader()
		var heard reports
		o = o.with(t, settings{DeclareModels: true, MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)), OnError: heard.add})
		id := o.create(t, modelPost)
		buf := o.buffer(t, hotcounter.BufferConfig{Interval: time.Hour,
			Store: redisstore.New(rdb, redisstore.Options{Prefix: prefix})})
		must(t, buf.increment(ctx, modelPost, id, "likes", 4))
		must(t, buf.flush(ctx))
		must(t, buf.flush(ctx))
		if got := exactly(t, o, modelPost, id, "likes"); got != 4 {
			t.Errorf("likes %d after the flush, want 4", got)
		}
		errs := heard.all()
		if len(errs) != 1 || !errors.Is(errs[0], hotcounter.ErrUndeclaredCounter) || !strings.Contains(errs[0].Error(), "ghosts.hits") {
			t.Fatalf("reported %v; want one ErrUndeclaredCounter naming ghosts.hits", errs)
		}
		m := collect(t, reader)
		ghostAttrs := map[string]string{"db.collection.name": "ghosts", "hotcounter.counter.name": "hits", "hotcounter.counter.declared": "false"}
		n, ok := m.sum("hotcounter.buffer.store.backlog", ghostAttrs)
		m.expect("the backlog gauge of the undeclared counter", n, 3, ok)
		if age, ok := m.gauge("hotcounter.buffer.store.backlog.age", ghostAttrs); !ok || age <= 0 {
			t.Errorf("backlog age of the undeclared counter = %v (reported: %v), want above zero", age, ok)
		}
		must(t, buf.close(ctx))
		if after := snapshot(); len(before) == 0 || !equalHashes(before, after) {
			t.Errorf("the undeclared counter's keys were %v before, %v after; want them untouched", before, after)
		}
	})
}

func equalHashes(a, b map[string]map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, h := range a {
		g, ok := b[k]
		if !ok || len(g) != len(h) {
			return false
		}
		for f, v := range h {
			if g[f] != v {
				return false
			}
		}
	}
	return true
}

// While flushes cannot write (another session holds the slot table), the
// store's backlog grows; MaxBacklog bounds it: OnFull Fail refuses
// increments past it with ErrBufferFull, Block holds them until a flush
// has written the backlog, and Keep accepts them and reports the backlog
// to OnError. Once the table is free, every acknowledged increment is
// written. Both ORMs, every database.
func TestRedisBufferBacklogPastMaxBacklog(t *testing.T) {
	eachORM(t, func(t *testing.T, o counterORM) {
		ctx := context.Background()
		for _, onFull := range []struct {
			name string
			mode hotcounter.OnFull
		}{{"fail", hotcounter.BufferFail}, {"block", hotcounter.BufferBlock}, {"keep", hotcounter.BufferKeep}} {
			t.Run(onFull.name, func(t *testing.T) {
				rdb, prefix := redisFor(t)
				id := o.create(t, modelPost)
				var heard reports
				buf := o.with(t, settings{OnError: heard.add}).buffer(t, hotcounter.BufferConfig{Interval: 20 * time.Millisecond, MaxBacklog: 50,
					OnFull: onFull.mode, Store: redisstore.New(rdb, redisstore.Options{Prefix: prefix})})
				release := holdWrites(t, o.onEnv(), "post_likes_slots")
				defer release()
				var acked atomic.Int64
				var failed atomic.Value
				incrementAll := func(n int) (refused int) {
					for range n {
						err := buf.increment(ctx, modelPost, id, "likes", 1)
						switch {
						case err == nil:
							acked.Add(1)
						case errors.Is(err, hotcounter.ErrBufferFull):
							refused++
						default:
							failed.CompareAndSwap(nil, err)
							return refused
						}
					}
					return refused
				}
				defer func() {
					if err := failed.Load(); err != nil {
						t.Errorf("increment: %v", err)
					}
				}()
				switch onFull.mode {
				case hotcounter.BufferFail:
					if refused := incrementAll(80); refused == 0 || acked.Load() > 50 {
						t.Fatalf("%d acknowledged and %d refused with MaxBacklog 50; want at most 50 acknowledged and the rest refused", acked.Load(), refused)
					}
				case hotcounter.BufferBlock:
					done := make(chan int, 1)
					go func() { done <- incrementAll(80) }()
					// The writer goes until the backlog reaches the bound,
					// then waits (a loaded machine may take a while to get
					// there).
					var last int64 = -1
					waitFor(t, 20*time.Second, "the writer to stop at MaxBacklog", func() bool {
						n := acked.Load()
						stalled := n == last && n >= 25
						last = n
						if !stalled {
							time.Sleep(150 * time.Millisecond)
						}
						return stalled
					})
					if n := acked.Load(); n > 50 {
						t.Fatalf("%d acknowledged while flushes could not write; want the writer held at MaxBacklog 50", n)
					}
					select {
					case <-done:
						t.Fatal("all 80 increments returned while flushes could not write")
					default:
					}
					release()
					if refused := <-done; refused != 0 || acked.Load() != 80 {
						t.Fatalf("%d acknowledged, %d refused after the table was free; want all 80", acked.Load(), refused)
					}
				case hotcounter.BufferKeep:
					if refused := incrementAll(80); refused != 0 {
						t.Fatalf("%d refused with OnFull Keep, want none", refused)
					}
					release()
					waitFor(t, 10*time.Second, "the backlog past MaxBacklog reported", func() bool {
						for _, err := range heard.all() {
							if errors.Is(err, hotcounter.ErrBufferFull) {
								return true
							}
						}
						return false
					})
				}
				release()
				must(t, buf.close(ctx))
				if got := exactly(t, o, modelPost, id, "likes"); got != acked.Load() {
					t.Errorf("likes %d, want the %d acknowledged", got, acked.Load())
				}
			})
		}
	})
}

// While the database is away (another session holds the slot table, so
// flushes wait), 16 writers go on incrementing through the Redis store,
// and Redis is killed with SIGKILL and started again. Without persistence
// it loses what it held; MaxBacklog (with OnFull Fail) bounds that loss.
// With AOF always it loses nothing acknowledged. Nothing is counted twice
// either way. PostgreSQL, GORM (the store is the same for ent).
func TestRedisCrashWhileTheDatabaseIsAwayLosesAtMostMaxBacklog(t *testing.T) {
	e := open(t, pg, pool(writersPool))
	must(t, e.db.AutoMigrate(&Post{}))
	for _, c := range []struct {
		name        string
		persistence []string
		maxBacklog  int64
	}{
		{"no persistence, MaxBacklog 2000", []string{"--appendonly", "no"}, 2000},
		{"AOF always, no bound", []string{"--appendonly", "yes", "--appendfsync", "always"}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			srv := startStandalone(t, c.persistence...)
			rdb := redis.NewClient(&redis.Options{Addr: srv.addr, MaxRetries: -1})
			t.Cleanup(func() { rdb.Close() })
			post := Post{Title: "viral"}
			must(t, e.db.Create(&post).Error)
			store := redisstore.New(rdb, redisstore.Options{})
			buf, err := gormcounter.NewBuffer(context.Background(), withPlugin(t, e, gormcounter.Config{}), hotcounter.BufferConfig{Interval: 50 * time.Millisecond,
				Store: store, MaxBacklog: c.maxBacklog, OnFull: hotcounter.BufferFail})
			must(t, err)
			w := keepIncrementing(buf, post.ID)
			time.Sleep(500 * time.Millisecond)
			release := holdWrites(t, e, "post_likes_slots")
			defer release()
			time.Sleep(2 * time.Second) // the database is away
			backlog, err := store.Backlog(ctx, []string{"post_likes_slots"})
			must(t, err)
			srv.kill(t)
			srv.start(t)
			release()
			time.Sleep(500 * time.Millisecond)
			attempted, acked, counted := w.finish(t, e.db)
			lost := max(0, acked-counted)
			t.Logf("%s: Redis held %d increments (the oldest %v old) when it was killed; attempted %d, acknowledged %d, counted %d, acknowledged and lost %d",
				c.name, backlog["post_likes_slots"].Increments, backlog["post_likes_slots"].Oldest, attempted, acked, counted, lost)
			if counted > attempted {
				t.Fatalf("counted %d, more than the %d attempted: some counted twice", counted, attempted)
			}
			if c.maxBacklog > 0 && lost > c.maxBacklog {
				t.Fatalf("lost %d acknowledged increments, more than MaxBacklog %d", lost, c.maxBacklog)
			}
			if c.maxBacklog == 0 && lost > 0 {
				t.Fatalf("lost %d acknowledged increments with AOF always", lost)
			}
		})
	}
}

// takingStore tells took each time its Take hands back a batch.
type takingStore struct {
	*redisstore.Store
	took chan<- struct{}
}

func (s takingStore) Take(ctx context.Context, cs []*writebehind.Counter) ([]writebehind.StoreBatch, error) {
	bs, err := s.Store.Take(ctx, cs)
	if len(bs) > 0 {
		s.took <- struct{}{}
	}
	return bs, err
}

// Two processes that flush at once take the same batch, the one a dead
// process left in flight: one applies it, the other finds its ledger row
// and forgets the batch. Neither flush fails nor reports anything, and the
// batch counts once. The slot table is held until both have taken it, so
// the second reaches the ledger while the first has not committed. Both
// ORMs, every database.
func TestRedisBuffersThatTakeTheSameBatchApplyItOnceAndReportNothing(t *testing.T) {
	eachORM(t, func(t *testing.T, o counterORM) {
		ctx := context.Background()
		rdb, prefix := redisFor(t)
		post := o.create(t, modelPost)
		dying := &failingStore{Store: redisstore.New(rdb, redisstore.Options{Prefix: prefix})}
		dead := o.with(t, settings{}).buffer(t, hotcounter.BufferConfig{Interval: time.Hour, Store: dying})
		must(t, dead.increment(ctx, modelPost, post, "likes", 7))
		dying.failTake.Store(true)
		if err := dead.flush(ctx); !errors.Is(err, errDied) {
			t.Fatalf("the dying flush: %v, want it to die after taking its batch", err)
		}

		var heard reports
		took := make(chan struct{}, 4)
		live := make([]counterBuffer, 2)
		for i := range live {
			live[i] = o.with(t, settings{DeclareModels: true, OnError: heard.add}).buffer(t, hotcounter.BufferConfig{Interval: time.Hour,
				Store: takingStore{Store: redisstore.New(rdb, redisstore.Options{Prefix: prefix}), took: took}})
		}
		release := holdWrites(t, o.onEnv(), "post_likes_slots")
		flushed := make(chan error, len(live))
		for _, b := range live {
			go func() { flushed <- b.flush(ctx) }()
		}
		for range live {
			select {
			case <-took:
			case <-time.After(30 * time.Second):
				release()
				t.Fatal("both buffers did not take the batch in flight within 30 s")
			}
		}
		release()
		for range live {
			if err := <-flushed; err != nil {
				t.Errorf("a flush of the shared batch failed: %v", err)
			}
		}
		if got := exactly(t, o, modelPost, post, "likes"); got != 7 {
			t.Errorf("likes %d, want the 7 of the batch, once", got)
		}
		if left := keysLeft(t, rdb, prefix); len(left) != 0 {
			t.Errorf("keys left in Redis: %v", left)
		}
		for _, b := range live {
			must(t, b.close(ctx))
		}
		must(t, dead.close(ctx))
		if errs := heard.all(); len(errs) != 0 {
			t.Errorf("the live processes reported %v", errs)
		}
	})
}
