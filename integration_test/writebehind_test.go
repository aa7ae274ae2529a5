package integration_test

import (
	"bytes"
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/hotcounter/hotcounter/gormcounter"
	"github.com/hotcounter/hotcounter/internal/testdb"
)

// Increments through a buffer are all written, once, by few statements.
func TestBufferLosesNothing(t *testing.T) {
	for _, k := range allKinds {
		t.Run(string(k), func(t *testing.T) {
			e := open(t, k)
			db := e.db
			must(t, migrateAll(db))
			posts := freshPosts(t, db, 3)
			var flushErrs atomic.Int64
			buf, err := gormcounter.NewBuffer(db, gormcounter.BufferConfig{
				Interval: 20 * time.Millisecond,
				OnError:  func(err error) { flushErrs.Add(1); t.Logf("flush: %v", err) },
			})
			must(t, err)
			ctx := context.Background()
			writers, each := writersFor(k)
			e.log.reset()
			done := hammer(t, writers, each, func() error {
				for _, p := range posts {
					if err := buf.Increment(ctx, &Post{ID: p.ID}, "Likes", 1); err != nil {
						return err
					}
					if err := buf.Increment(ctx, &Post{ID: p.ID}, "views", 2); err != nil {
						return err
					}
				}
				return nil
			})
			must(t, buf.Close(ctx))
			sent := e.log.count()
			if err := buf.Increment(ctx, &Post{ID: posts[0].ID}, "Likes", 1); err == nil {
				t.Fatal("Increment after Close succeeded")
			}
			for _, p := range posts {
				got := exact(t, db, p.ID)
				if got.Likes != done || got.Views != 2*done {
					t.Fatalf("post %d: likes=%d views=%d, want %d and %d", p.ID, got.Likes, got.Views, done, 2*done)
				}
			}
			if increments := done * int64(2*len(posts)); sent*50 > increments {
				t.Fatalf("the buffer sent %d statements for %d increments", sent, increments)
			}
			t.Logf("%d increments, %d statements, %d failed flushes", done*int64(2*len(posts)), sent, flushErrs.Load())
		})
	}
}

// A full buffer blocks or fails, as configured, and drops nothing: when
// flushes fail (here the slot table is gone) the deltas wait for a flush
// that succeeds.
func TestBufferBoundsMemoryAndKeepsFailedFlushes(t *testing.T) {
	e := open(t, lite)
	db := e.db
	must(t, migrateAll(db))
	posts := freshPosts(t, db, 20)
	ctx := context.Background()
	must(t, db.Exec("ALTER TABLE post_likes_slots RENAME TO post_likes_slots_away").Error)
	fail, err := gormcounter.NewBuffer(db, gormcounter.BufferConfig{Interval: 5 * time.Millisecond, MaxPending: 10, OnFull: gormcounter.BufferFail})
	must(t, err)
	for _, p := range posts[:10] {
		must(t, fail.Increment(ctx, &Post{ID: p.ID}, "Likes", 1))
	}
	if err := fail.Increment(ctx, &Post{ID: posts[10].ID}, "Likes", 1); !errors.Is(err, gormcounter.ErrBufferFull) {
		t.Fatalf("11th parent in a buffer of 10 whose flushes fail: %v, want ErrBufferFull", err)
	}
	block, err := gormcounter.NewBuffer(db, gormcounter.BufferConfig{Interval: 5 * time.Millisecond, MaxPending: 10, Ledger: "other_ledger"})
	must(t, err)
	for _, p := range posts[10:] {
		must(t, block.Increment(ctx, &Post{ID: p.ID}, "Likes", 1))
	}
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if err := block.Increment(short, &Post{ID: posts[0].ID}, "Likes", 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a blocked Increment returned %v, want the deadline", err)
	}
	if n, err := block.Pending(&Post{ID: posts[12].ID}, "Likes"); err != nil || n != 1 {
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
// buffer and PostgreSQL. It cuts the connection right after the client's
// COMMIT has reached the server, before the reply comes back: the commit
// happened, the client cannot know. The buffer retries those batches with
// the same id, the ledger recognises them, and the totals are exact.
// Meanwhile pg_terminate_backend kills the buffer's sessions at random
// points of other flushes.
func TestBufferFlushSurvivesCutConnections(t *testing.T) {
	dsn := testdb.Postgres(t)
	setup, err := gorm.Open(postgres.Open(dsn), &gorm.Config{Logger: logger.Discard})
	must(t, err)
	must(t, setup.Use(gormcounter.New(gormcounter.Config{})))
	must(t, migrateAll(setup))
	posts := freshPosts(t, setup, 4)

	proxy := newCuttingProxy(t, "127.0.0.1:5432")
	viaProxy := testdb.WithParams(dsn, map[string]string{"host": "127.0.0.1", "port": strconv.Itoa(proxy.port()), "application_name": "hc_buffer_fault"})
	db, err := gorm.Open(postgres.Open(viaProxy), &gorm.Config{Logger: logger.Discard})
	must(t, err)
	must(t, db.Use(gormcounter.New(gormcounter.Config{})))
	var flushErrs atomic.Int64
	buf, err := gormcounter.NewBuffer(db, gormcounter.BufferConfig{
		Interval: 10 * time.Millisecond,
		OnError:  func(error) { flushErrs.Add(1) },
	})
	must(t, err)

	ctx := context.Background()
	stop := make(chan struct{})
	var killed atomic.Int64
	var killer sync.WaitGroup
	killer.Add(1)
	go func() {
		defer killer.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(37 * time.Millisecond):
			}
			var n int64
			if err := setup.Raw("SELECT COUNT(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = 'hc_buffer_fault' AND pid <> pg_backend_pid()").Row().Scan(&n); err == nil {
				killed.Add(n)
			}
		}
	}()
	proxy.cutCommits.Store(6) // the first six commits lose their reply
	// Writers run for a while, so that flushes meet both kinds of fault.
	deadline := time.Now().Add(1500 * time.Millisecond)
	done := hammer(t, 16, 1<<30, func() error {
		if time.Now().After(deadline) {
			return errStop
		}
		p := posts[time.Now().Nanosecond()%len(posts)]
		err := errors.Join(
			buf.Increment(ctx, &Post{ID: p.ID}, "Likes", 1),
			buf.Increment(ctx, &Post{ID: posts[0].ID}, "Views", 1),
		)
		time.Sleep(200 * time.Microsecond)
		return err
	})
	close(stop)
	killer.Wait()
	closeCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	must(t, buf.Close(closeCtx))

	var likes, views int64
	for _, p := range posts {
		got := exact(t, setup, p.ID)
		likes += got.Likes
		views += got.Views
	}
	t.Logf("%d increments; commits cut after reaching the server: %d; backends killed: %d; failed flushes: %d",
		done*2, proxy.cut.Load(), killed.Load(), flushErrs.Load())
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
			defer server.Close()
			defer client.Close()
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

// freshPosts creates n posts whose counters are zero.
func freshPosts(t *testing.T, db *gorm.DB, n int) []Post {
	t.Helper()
	posts := make([]Post, n)
	for i := range posts {
		posts[i].Title = "fresh"
	}
	must(t, db.Create(&posts).Error)
	return posts
}

// Mistakes are errors that name the model and field.
func TestBufferRefusesMistakes(t *testing.T) {
	e := open(t, lite)
	db := e.db
	must(t, migrateAll(db))
	buf, err := gormcounter.NewBuffer(db, gormcounter.BufferConfig{})
	must(t, err)
	defer buf.Close(context.Background())
	ctx := context.Background()
	if err := buf.Increment(ctx, &Post{ID: 1}, "Title", 1); !errors.Is(err, gormcounter.ErrNotCounter) || !strings.Contains(err.Error(), "Post.Title") {
		t.Fatalf("Increment of a plain field: %v, want ErrNotCounter naming Post.Title", err)
	}
	if err := buf.Increment(ctx, &Post{}, "Likes", 1); !errors.Is(err, gorm.ErrMissingWhereClause) || !strings.Contains(err.Error(), "Post.Likes") {
		t.Fatalf("Increment of a post without its key: %v, want ErrMissingWhereClause naming Post.Likes", err)
	}
	plain, err := gorm.Open(dialectorFor(lite, e.dsn), &gorm.Config{Logger: logger.Discard})
	must(t, err)
	if _, err := gormcounter.NewBuffer(plain, gormcounter.BufferConfig{}); !errors.Is(err, gormcounter.ErrNotRegistered) {
		t.Fatalf("NewBuffer without the plugin: %v, want ErrNotRegistered", err)
	}
}
