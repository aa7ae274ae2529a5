package integration_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/hotcounter/hotcounter"
	"github.com/hotcounter/hotcounter/gormcounter"
	"github.com/hotcounter/hotcounter/internal/testdb"
	"github.com/hotcounter/hotcounter/redisstore"
)

// Flush after a failed flush writes the batch that failed and then what is
// pending (it once wrote only the old batch and returned nil).
func TestBufferFlushWritesPendingAfterAFailure(t *testing.T) {
	parallel(t)
	e := open(t, lite)
	db := e.db
	must(t, migrateAll(db))
	posts := freshPosts(t, db, 2)
	ctx := context.Background()
	buf, err := gormcounter.NewBuffer(context.Background(), db, hotcounter.BufferConfig{Interval: time.Hour})
	must(t, err)
	must(t, db.Exec("ALTER TABLE post_likes_slots RENAME TO post_likes_slots_away").Error)
	must(t, buf.Increment(ctx, &Post{ID: posts[0].ID}, "Likes", 1))
	if err := buf.Flush(ctx); err == nil {
		t.Fatal("flush with the table away succeeded")
	}
	must(t, db.Exec("ALTER TABLE post_likes_slots_away RENAME TO post_likes_slots").Error)
	must(t, buf.Increment(ctx, &Post{ID: posts[1].ID}, "Likes", 1))
	must(t, buf.Flush(ctx)) // returns nil
	if got := exact(t, db, posts[1].ID).Likes; got != 1 {
		t.Errorf("Flush returned nil but post 1 likes=%d, want 1 (pending=%d)", got, must2(buf.Pending(context.Background(), &Post{ID: posts[1].ID}, "Likes")))
	}
	must(t, buf.Close(ctx))
}

// A second Close after a timed-out one flushes what is held (it once
// returned nil at once).
func TestBufferSecondCloseFlushes(t *testing.T) {
	parallel(t)
	e := open(t, lite)
	db := e.db
	must(t, migrateAll(db))
	posts := freshPosts(t, db, 1)
	ctx := context.Background()
	buf, err := gormcounter.NewBuffer(context.Background(), db, hotcounter.BufferConfig{Interval: time.Hour})
	must(t, err)
	must(t, db.Exec("ALTER TABLE post_likes_slots RENAME TO post_likes_slots_away").Error)
	must(t, buf.Increment(ctx, &Post{ID: posts[0].ID}, "Likes", 1))
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if err := buf.Close(short); err == nil {
		t.Fatal("first Close succeeded")
	}
	must(t, db.Exec("ALTER TABLE post_likes_slots_away RENAME TO post_likes_slots").Error)
	err = buf.Close(ctx)
	got := exact(t, db, posts[0].ID).Likes
	if err == nil && got != 1 {
		t.Errorf("second Close returned nil, but likes=%d, want 1 (pending %d)", got, must2(buf.Pending(context.Background(), &Post{ID: posts[0].ID}, "Likes")))
	}
}

// Close returns at its deadline while the background flush is blocked.
func TestBufferCloseHonoursItsDeadline(t *testing.T) {
	parallel(t)
	e := open(t, pg)
	db := e.db
	must(t, migrateAll(db))
	posts := freshPosts(t, db, 1)
	ctx := context.Background()
	buf, err := gormcounter.NewBuffer(context.Background(), db, hotcounter.BufferConfig{Interval: 20 * time.Millisecond})
	must(t, err)
	tx := db.Begin()
	must(t, tx.Exec("LOCK TABLE hotcounter_ledger IN ACCESS EXCLUSIVE MODE").Error)
	must(t, buf.Increment(ctx, &Post{ID: posts[0].ID}, "Likes", 1))
	time.Sleep(200 * time.Millisecond) // the loop's flush is now waiting
	release := time.AfterFunc(3*time.Second, func() { tx.Rollback() })
	defer release.Stop()
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	err = buf.Close(short)
	if took := time.Since(start); took > time.Second {
		t.Errorf("Close(ctx 300ms) took %v (err %v): it waited for the blocked loop flush", took, err)
	}
}

// One key that could never be written would poison every later flush:
// Increment refuses it, and the valid increments are written.
func TestBufferRefusesKeysItCouldNeverWrite(t *testing.T) {
	parallel(t)
	e := open(t, pg)
	db := e.db
	must(t, migrateAll(db))
	posts := freshPosts(t, db, 1)
	ctx := context.Background()
	buf, err := gormcounter.NewBuffer(context.Background(), db, hotcounter.BufferConfig{Interval: 10 * time.Millisecond})
	must(t, err)
	must(t, buf.Increment(ctx, &Post{ID: posts[0].ID}, "Likes", 1))
	// A key no database integer holds is refused, not acknowledged: it could
	// never be flushed, and its batch would hold up every other increment.
	if err := buf.Increment(ctx, &Post{ID: ^uint(0)}, "Likes", 1); err == nil || !strings.Contains(err.Error(), "Post.Likes") {
		t.Fatalf("Increment of a key out of range: %v, want an error naming Post.Likes", err)
	}
	time.Sleep(100 * time.Millisecond)
	must(t, buf.Increment(ctx, &Post{ID: posts[0].ID}, "Likes", 1))
	short, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	err = buf.Close(short)
	if got := exact(t, db, posts[0].ID).Likes; got != 2 {
		t.Errorf("likes=%d, want 2; Close: %v", got, err)
	}
}

var _ = errors.New

var _ sync.Mutex

func slugHits(t *testing.T, e *env, id string) int64 {
	var s Slug
	must(t, e.db.First(&s, "id = ?", id).Error)
	return s.Hits
}

// A string key that the database matches but that is not spelled as it
// reads back (MariaDB case-insensitive collation) counts in the buffer as
// it does through Increment.
func TestBufferKeysSpelledAsTheDatabaseMatchesThem(t *testing.T) {
	parallel(t)
	e := open(t, my)
	must(t, e.db.AutoMigrate(&Slug{}))
	must(t, e.db.Create(&Slug{ID: "abc"}).Error)
	ctx := context.Background()
	must(t, gormcounter.Increment(e.db.Model(&Slug{ID: "ABC"}), "Hits", 1).Error)
	if got := slugHits(t, e, "abc"); got != 1 {
		t.Fatalf("direct increment: %d", got)
	}
	buf, err := gormcounter.NewBuffer(context.Background(), e.db, hotcounter.BufferConfig{Interval: time.Hour})
	must(t, err)
	must(t, buf.Increment(ctx, &Slug{ID: "ABC"}, "Hits", 5))
	must(t, buf.Flush(ctx))
	must(t, buf.Close(ctx))
	if got := slugHits(t, e, "abc"); got != 6 {
		t.Errorf("after buffered +5: %d, want 6", got)
	}
}

// Two buffers flushing concurrently on MariaDB do not deadlock (a prune in
// every flush once scanned, and locked, the whole ledger). GORM and ent.
func TestMariaDBConcurrentBuffersDoNotDeadlock(t *testing.T) {
	eachORM(t, func(t *testing.T, o counterORM) {
		posts := []int64{o.create(t, modelPost), o.create(t, modelPost)}
		ctx := context.Background()
		var bufs [2]counterBuffer
		for i := range bufs {
			bufs[i] = o.buffer(t, hotcounter.BufferConfig{Interval: time.Hour})
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		var errs []error
		for i := range bufs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 100 {
					if err := bufs[i].increment(ctx, modelPost, posts[i], "likes", 1); err != nil {
						t.Error(err)
						return
					}
					if err := bufs[i].flush(ctx); err != nil {
						mu.Lock()
						errs = append(errs, err)
						mu.Unlock()
					}
				}
			}()
		}
		wg.Wait()
		for _, b := range bufs {
			must(t, b.close(ctx))
		}
		if len(errs) > 0 {
			t.Errorf("%d of 200 flushes failed; first: %v", len(errs), errs[0])
		}
		for _, id := range posts {
			if got := exactly(t, o, modelPost, id, "likes"); got != 100 {
				t.Errorf("post %d: likes=%d after 100 buffered increments, want 100", id, got)
			}
		}
	}, on(my))
}

// Parents deleted before the flush, mixed with live ones, in all three
// modes: the live ones count exactly, the deleted ones leave nothing, and
// the flush costs a few statements per deleted parent, not one per key.
// Both ORMs.
func TestBufferDropsDeletedParents(t *testing.T) {
	eachORM(t, func(t *testing.T, o counterORM) {
		db := o.db()
		var posts, stories []int64
		for range 3 {
			posts, stories = append(posts, o.create(t, modelPost)), append(stories, o.create(t, modelStory))
		}
		ctx := context.Background()
		buf := o.buffer(t, hotcounter.BufferConfig{Interval: time.Hour})
		for i := range posts {
			must(t, buf.increment(ctx, modelPost, posts[i], "likes", int64(i+1)))
			must(t, buf.increment(ctx, modelPost, posts[i], "views", int64(i+1)))
			must(t, buf.increment(ctx, modelStory, stories[i], "claps", int64(i+1)))
		}
		must(t, o.remove(modelPost, posts[1]))
		must(t, o.remove(modelStory, stories[1]))
		must(t, buf.flush(ctx))
		must(t, buf.close(ctx))
		for _, i := range []int{0, 2} {
			likes, views := exactly(t, o, modelPost, posts[i], "likes"), exactly(t, o, modelPost, posts[i], "views")
			if likes != int64(i+1) || views != int64(i+1) {
				t.Errorf("post %d likes=%d views=%d want %d", i, likes, views, i+1)
			}
			if got := exactly(t, o, modelStory, stories[i], "claps"); got != int64(i+1) {
				t.Errorf("story %d claps=%d want %d", i, got, i+1)
			}
		}
		if n := rawInt(t, db, "SELECT COUNT(*) FROM post_likes_slots WHERE post_id = ?", posts[1]); n != 0 {
			t.Errorf("%d slot rows of a deleted post", n)
		}
		if o.kind() != pg {
			return
		}
		// 3,000 posts, one deleted in each chunk of 1,000.
		many := o.createMany(t, modelPost, 3000)
		buf = o.buffer(t, hotcounter.BufferConfig{Interval: time.Hour})
		for _, id := range many {
			must(t, buf.increment(ctx, modelPost, id, "likes", 1))
		}
		for _, i := range []int{5, 1005, 2005} {
			must(t, o.remove(modelPost, many[i]))
		}
		if n := o.sent(func() { must(t, buf.flush(ctx)) }); n > 300 {
			t.Fatalf("a flush of 3,000 keys with 3 deleted parents sent %d statements", n)
		}
		must(t, buf.close(ctx))
		if got := exactly(t, o, modelPost, many[6], "likes"); got != 1 {
			t.Fatalf("likes=%d, want 1", got)
		}
	})
}

// Batch ids older than LedgerKeep are pruned.
func TestBufferPrunesTheLedger(t *testing.T) {
	parallel(t)
	e := open(t, lite)
	db := e.db
	must(t, migrateAll(db))
	posts := freshPosts(t, db, 1)
	ctx := context.Background()
	buf, err := gormcounter.NewBuffer(context.Background(), db, hotcounter.BufferConfig{Interval: time.Hour})
	must(t, err)
	old := time.Now().Add(-48 * time.Hour).UnixMilli()
	must(t, db.Exec("INSERT INTO hotcounter_ledger (batch, at) VALUES ('old', ?)", old).Error)
	must(t, buf.Increment(ctx, &Post{ID: posts[0].ID}, "Likes", 1))
	must(t, buf.Flush(ctx))
	must(t, buf.Close(ctx))
	if n := rawInt(t, db, "SELECT COUNT(*) FROM hotcounter_ledger WHERE batch = 'old'"); n != 0 {
		t.Fatal("a batch id 48 h old is still in the ledger after a flush")
	}
}

// Increments through a buffer are all written, once, by statements per
// flush, not per increment; a
// field that is not a counter and an increment after Close are refused.
// Both ORMs.
func TestBufferLosesNothing(t *testing.T) {
	eachORM(t, func(t *testing.T, o counterORM) {
		posts := []int64{o.create(t, modelPost), o.create(t, modelPost), o.create(t, modelPost)}
		var flushErrs atomic.Int64
		o = o.with(t, settings{OnError: func(err error) { flushErrs.Add(1); t.Logf("flush: %v", err) }})
		buf := o.buffer(t, hotcounter.BufferConfig{Interval: 20 * time.Millisecond})
		ctx := context.Background()
		// What a flush that writes every row sends, measured on a buffer
		// of its own that flushes only when told.
		probe := o.buffer(t, hotcounter.BufferConfig{Interval: time.Hour})
		for _, id := range posts {
			must(t, probe.increment(ctx, modelPost, id, "likes", 1))
			must(t, probe.increment(ctx, modelPost, id, "views", 2))
		}
		full := o.sent(func() { must(t, probe.flush(ctx)) })
		must(t, probe.close(ctx))
		writers, each := writersFor(o.kind())
		var done int64
		start := time.Now()
		sent := o.sent(func() {
			done = hammer(t, writers, each, func() error {
				for _, id := range posts {
					if err := buf.increment(ctx, modelPost, id, "likes", 1); err != nil {
						return err
					}
					if err := buf.increment(ctx, modelPost, id, "views", 2); err != nil {
						return err
					}
				}
				return nil
			})
			must(t, buf.close(ctx)) // the last flush
		})
		// The ticks that fall in the window (one more than whole intervals,
		// as the ticker started before it), Close's flush, and a retry for
		// each failed flush.
		flushes := int64(time.Since(start)/(20*time.Millisecond)) + 2 + flushErrs.Load()
		if err := buf.increment(ctx, modelPost, posts[0], "likes", 1); err == nil {
			t.Fatal("an increment after Close succeeded")
		}
		for _, id := range posts {
			likes, views := exactly(t, o, modelPost, id, "likes"), exactly(t, o, modelPost, id, "views")
			if likes != done+1 || views != 2*done+2 {
				t.Fatalf("post %d: likes=%d views=%d, want %d and %d", id, likes, views, done+1, 2*done+2)
			}
		}
		// Statements go per flush, not per increment: no more than the
		// flushes its interval allowed, each at most twice one that
		// writes every row.
		if increments := done * int64(2*len(posts)); full == 0 || sent > flushes*2*full || sent*5 > increments {
			t.Fatalf("the buffer sent %d statements for %d increments in at most %d flushes of about %d statements", sent, increments, flushes, full)
		}
		t.Logf("%d increments, %d statements, %d failed flushes", done*int64(2*len(posts)), sent, flushErrs.Load())
		other := o.buffer(t, hotcounter.BufferConfig{})
		if err := other.increment(ctx, modelPost, posts[0], "title", 1); !errors.Is(err, hotcounter.ErrNotCounter) {
			t.Fatalf("a buffered increment of a field that is not a counter: %v; want ErrNotCounter", err)
		}
		must(t, other.close(ctx))
	}, pool(writersPool))
}

// A full buffer blocks or fails, as configured, and drops nothing: when
// flushes fail (here the slot table is gone) the deltas wait for a flush
// that succeeds.
func TestBufferBoundsMemoryAndKeepsFailedFlushes(t *testing.T) {
	parallel(t)
	e := open(t, lite)
	db := e.db
	must(t, migrateAll(db))
	posts := freshPosts(t, db, 20)
	ctx := context.Background()
	must(t, db.Exec("ALTER TABLE post_likes_slots RENAME TO post_likes_slots_away").Error)
	fail, err := gormcounter.NewBuffer(context.Background(), db, hotcounter.BufferConfig{Interval: 5 * time.Millisecond, MaxPending: 10, OnFull: hotcounter.BufferFail})
	must(t, err)
	for _, p := range posts[:10] {
		must(t, fail.Increment(ctx, &Post{ID: p.ID}, "Likes", 1))
	}
	if err := fail.Increment(ctx, &Post{ID: posts[10].ID}, "Likes", 1); !errors.Is(err, hotcounter.ErrBufferFull) {
		t.Fatalf("11th parent in a buffer of 10 whose flushes fail: %v, want ErrBufferFull", err)
	}
	block, err := gormcounter.NewBuffer(context.Background(), db, hotcounter.BufferConfig{Interval: 5 * time.Millisecond, MaxPending: 10, Ledger: "other_ledger"})
	must(t, err)
	for _, p := range posts[10:] {
		must(t, block.Increment(ctx, &Post{ID: p.ID}, "Likes", 1))
	}
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if err := block.Increment(short, &Post{ID: posts[0].ID}, "Likes", 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a blocked Increment returned %v, want the deadline", err)
	}
	if n, err := block.Pending(context.Background(), &Post{ID: posts[12].ID}, "Likes"); err != nil || n != 1 {
		t.Fatalf("Pending = %d, %v; want 1", n, err)
	}
	must(t, db.Exec("ALTER TABLE post_likes_slots_away RENAME TO post_likes_slots").Error)
	must(t, fail.Close(ctx))
	must(t, block.Close(ctx))
	for i, p := range posts {
		if got := exact(t, db, p.ID); got.Likes != 1 {
			t.Fatalf("post %d: likes=%d, want 1", i, got.Likes)
		}
	}
}

// TestBufferFlushSurvivesCutConnections puts a TCP proxy between the
// buffer and the database. It cuts the connection right after the client's
// COMMIT has reached the server, before the reply comes back: the commit
// happened, the client cannot know. The buffer retries those batches with
// the same id, the ledger recognises them, and the totals are exact.
// Meanwhile the buffer's sessions are killed at random points of other
// flushes (pg_terminate_backend; on MariaDB, KILL CONNECTION).
//
// The same with the Redis store: the batches wait in Redis, and a batch
// whose COMMIT reply was lost stays in flight there until the ledger says
// it was applied. GORM and ent, on PostgreSQL and MariaDB.
func TestBufferFlushSurvivesCutConnections(t *testing.T) {
	eachORM(t, func(t *testing.T, o counterORM) {
		for _, store := range []string{"memory", "redis"} {
			t.Run(store, func(t *testing.T) { bufferFlushSurvivesCutConnections(t, o, store == "redis") })
		}
	}, on(pg, my))
}

var bufferFaultRuns atomic.Int64

func bufferFlushSurvivesCutConnections(t *testing.T, o counterORM, inRedis bool) {
	e := o.onEnv()
	server := pgAddr(t)
	if e.kind == my {
		server = "127.0.0.1:3306"
	}
	posts := make([]int64, 4)
	for i := range posts {
		posts[i] = o.create(t, modelPost)
	}

	proxy := newCuttingProxy(t, server)
	// The buffer's sessions, by a name of this run's own: other runs kill
	// their own at the same time.
	app := "hc_buffer_fault_" + strconv.FormatInt(bufferFaultRuns.Add(1), 10)
	viaProxy := testdb.WithParams(e.dsn, map[string]string{"host": "127.0.0.1", "port": strconv.Itoa(proxy.port()), "application_name": app})
	setup := o.db()
	// kill ends the buffer's sessions and returns how many it ended.
	kill := func() (int64, error) {
		var n int64
		err := setup.Raw("SELECT COUNT(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = ? AND pid <> pg_backend_pid()", app).Row().Scan(&n)
		return n, err
	}
	if e.kind == my {
		// The sessions that come through the proxy. A pool of one
		// connection of the test's own names itself.
		viaProxy = strings.Replace(e.dsn, server, "127.0.0.1:"+strconv.Itoa(proxy.port()), 1)
		var err error
		setup, err = gorm.Open(dialectorFor(my, e.dsn), &gorm.Config{Logger: logger.Discard})
		must(t, err)
		sqlSetup, err := setup.DB()
		must(t, err)
		sqlSetup.SetMaxOpenConns(1)
		t.Cleanup(func() { sqlSetup.Close() })
		var own int64
		must(t, setup.Raw("SELECT CONNECTION_ID()").Row().Scan(&own))
		// The sessions that came through the proxy, by their client host
		// (the proxy's side of the loopback), in the test's database: a
		// loopback port the proxy has just let go can be another test's
		// next connection (a run beside a count scene's migration on
		// MariaDB failed it with "bad connection").
		kill = func() (int64, error) {
			var rows []struct {
				ID   int64
				Host string
			}
			if err := setup.Raw("SELECT id, host FROM information_schema.processlist WHERE id <> ? AND db = DATABASE()", own).Scan(&rows).Error; err != nil {
				return 0, err
			}
			via := proxy.sessions()
			var n int64
			for _, r := range rows {
				if via[r.Host] && setup.Exec(fmt.Sprintf("KILL CONNECTION %d", r.ID)).Error == nil {
					n++
				}
			}
			return n, nil
		}
	}
	var flushErrs atomic.Int64
	cfg := hotcounter.BufferConfig{Interval: 10 * time.Millisecond}
	if inRedis {
		rdb, prefix := redisFor(t)
		cfg.Store = redisstore.New(rdb, redisstore.Options{Prefix: prefix})
	}
	buf := o.through(t, viaProxy, settings{OnError: func(error) { flushErrs.Add(1) }}).buffer(t, cfg)

	ctx := context.Background()
	stop := make(chan struct{})
	var killed atomic.Int64
	var killer sync.WaitGroup
	killer.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(37 * time.Millisecond):
			}
			if n, err := kill(); err == nil {
				killed.Add(n)
			}
		}
	})
	proxy.cutCommits.Store(6) // the first six commits lose their reply
	// Writers run for a while, so that flushes meet both kinds of fault:
	// 1.5 s, and on until each fault has happened (a loaded machine's
	// killer once found no session of the buffer's in 1.5 s), for 15 s at
	// most.
	start := time.Now()
	faulted := func() bool { return proxy.cut.Load() > 0 && killed.Load() > 0 && flushErrs.Load() > 0 }
	done := hammer(t, 16, 1<<30, func() error {
		if ran := time.Since(start); ran > 1500*time.Millisecond && (faulted() || ran > 15*time.Second) {
			return errStop
		}
		p := posts[time.Now().Nanosecond()%len(posts)]
		err := errors.Join(
			buf.increment(ctx, modelPost, p, "likes", 1),
			buf.increment(ctx, modelPost, posts[0], "views", 1),
		)
		time.Sleep(200 * time.Microsecond)
		return err
	})
	close(stop)
	killer.Wait()
	closeCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	must(t, buf.close(closeCtx))

	var likes, views int64
	for _, p := range posts {
		likes += exactly(t, o, modelPost, p, "likes")
		views += exactly(t, o, modelPost, p, "views")
	}
	t.Logf("%s, redis store %v: %d increments; commits cut after reaching the server: %d; sessions killed: %d; failed flushes: %d",
		e.kind, inRedis, done*2, proxy.cut.Load(), killed.Load(), flushErrs.Load())
	if likes != done || views != done {
		t.Fatalf("likes %d and views %d after %d acknowledged increments of each", likes, views, done)
	}
	if proxy.cut.Load() == 0 || killed.Load() == 0 || flushErrs.Load() == 0 {
		t.Fatalf("a fault did not happen (commits cut %d, backends killed %d, failed flushes %d): the test proved less than it says",
			proxy.cut.Load(), killed.Load(), flushErrs.Load())
	}
}

// cuttingProxy forwards TCP connections to a server. While cutCommits is
// positive, a connection on which the client sends COMMIT is closed once
// the COMMIT has been forwarded and the server has had time to apply it,
// without passing on the reply.
type cuttingProxy struct {
	ln         net.Listener
	target     string
	cutCommits atomic.Int64
	cut        atomic.Int64
	upstream   sync.Map // the local addresses of its open connections to the server
}

// sessions returns the local addresses of the proxy's open connections to
// the server: the client hosts the server names its sessions by.
func (p *cuttingProxy) sessions() map[string]bool {
	open := map[string]bool{}
	p.upstream.Range(func(k, _ any) bool {
		open[k.(string)] = true
		return true
	})
	return open
}

func newCuttingProxy(t *testing.T, target string) *cuttingProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	p := &cuttingProxy{ln: ln, target: target}
	t.Cleanup(func() { ln.Close() })
	go p.serve()
	return p
}

func (p *cuttingProxy) port() int { return p.ln.Addr().(*net.TCPAddr).Port }

func (p *cuttingProxy) serve() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			client.Close()
			continue
		}
		local := server.LocalAddr().String()
		p.upstream.Store(local, true)
		var holdReplies atomic.Bool
		go func() { // server -> client
			buf := make([]byte, 32<<10)
			for {
				n, err := server.Read(buf)
				if n > 0 && !holdReplies.Load() {
					if _, werr := client.Write(buf[:n]); werr != nil {
						break
					}
				}
				if err != nil {
					break
				}
			}
			client.Close()
		}()
		go func() { // client -> server
			defer client.Close()
			defer server.Close()
			defer p.upstream.Delete(local) // before the port is let go
			buf := make([]byte, 32<<10)
			for {
				n, err := client.Read(buf)
				if n > 0 {
					commit := bytes.Contains(bytes.ToLower(buf[:n]), []byte("commit"))
					if commit && p.cutCommits.Add(-1) >= 0 {
						holdReplies.Store(true)
						if _, werr := server.Write(buf[:n]); werr != nil {
							return
						}
						time.Sleep(100 * time.Millisecond) // the server commits; its reply is dropped
						p.cut.Add(1)
						return
					}
					if _, werr := server.Write(buf[:n]); werr != nil {
						return
					}
				}
				if err != nil {
					return
				}
			}
		}()
	}
}

// Mistakes are errors that name the model and field.
func TestBufferRefusesMistakes(t *testing.T) {
	parallel(t)
	e := open(t, lite)
	db := e.db
	must(t, migrateAll(db))
	buf, err := gormcounter.NewBuffer(context.Background(), db, hotcounter.BufferConfig{})
	must(t, err)
	defer buf.Close(context.Background())
	ctx := context.Background()
	if err := buf.Increment(ctx, &Post{ID: 1}, "Title", 1); !errors.Is(err, hotcounter.ErrNotCounter) || !strings.Contains(err.Error(), "Post.Title") {
		t.Fatalf("Increment of a plain field: %v, want ErrNotCounter naming Post.Title", err)
	}
	if err := buf.Increment(ctx, &Post{}, "Likes", 1); !errors.Is(err, gorm.ErrMissingWhereClause) || !strings.Contains(err.Error(), "Post.Likes") {
		t.Fatalf("Increment of a post without its key: %v, want ErrMissingWhereClause naming Post.Likes", err)
	}
	for _, c := range []struct {
		name string
		cfg  hotcounter.BufferConfig
		says string
	}{
		{"OnFull Keep in memory", hotcounter.BufferConfig{OnFull: hotcounter.BufferKeep}, "needs a Store"},
		{"MaxBacklog in memory", hotcounter.BufferConfig{MaxBacklog: 10}, "MaxPending bounds"},
	} {
		if _, err := gormcounter.NewBuffer(context.Background(), db, c.cfg); err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("NewBuffer with %s: %v, want an error that says %q", c.name, err, c.says)
		}
	}
	plain, err := gorm.Open(dialectorFor(lite, e.dsn), &gorm.Config{Logger: logger.Discard})
	must(t, err)
	if _, err := gormcounter.NewBuffer(context.Background(), plain, hotcounter.BufferConfig{}); !errors.Is(err, hotcounter.ErrNotConfigured) {
		t.Fatalf("NewBuffer without the plugin: %v, want ErrNotConfigured", err)
	}
}

// TestABufferUsesTheLedgerAMigrationFileMade: BufferSchemaSQL's Up makes
// the ledger table (and runs again changing nothing); a buffer started on
// that database sends one statement, its look for the table, and creates
// nothing, so an application role without the right to create tables can
// start it; its increments count exactly; Down takes the table away.
// GORM and ent, every database.
func TestABufferUsesTheLedgerAMigrationFileMade(t *testing.T) {
	eachORM(t, func(t *testing.T, o counterORM) {
		ctx := context.Background()
		cfg := hotcounter.BufferConfig{Interval: time.Hour, Ledger: "filed_ledger"}
		script, err := o.bufferSchema(cfg)
		must(t, err)
		for range 2 {
			for _, st := range script.Up {
				must(t, o.db().Exec(st).Error)
			}
		}
		var buf counterBuffer
		if n := o.sent(func() { buf = o.buffer(t, cfg) }); n != 1 {
			t.Errorf("starting a buffer whose ledger a file made sent %d statements; want 1, its look for the table", n)
		}
		post := o.create(t, modelPost)
		var wg sync.WaitGroup
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 10 {
					if err := buf.increment(ctx, modelPost, post, "likes", 1); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		must(t, buf.close(ctx))
		if got := exactly(t, o, modelPost, post, "likes"); got != 80 {
			t.Errorf("likes %d after 80 buffered increments; want 80", got)
		}
		if n := rawInt(t, o.db(), "SELECT COUNT(*) FROM filed_ledger"); n == 0 {
			t.Error("the buffer's flush recorded no batch in the ledger the file made")
		}
		for _, st := range script.Down {
			must(t, o.db().Exec(st).Error)
		}
		if o.db().Migrator().HasTable("filed_ledger") {
			t.Error("the ledger is still there after Down")
		}
	})
}
