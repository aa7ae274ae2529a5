package integration_test

// Crash trials with real processes: the test binary, run again as a child
// (childEnv), is an application that writes through the Redis store until
// SIGKILL ends it, or one that only flushes. TestMain hands the child its
// job before any test runs.

import (
	"bufio"
	"bytes"
	"context"
	stdsql "database/sql"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/hotcounter/hotcounter"
	"github.com/hotcounter/hotcounter/entcounter"
	"github.com/hotcounter/hotcounter/gormcounter"
	"github.com/hotcounter/hotcounter/integration_test/ent"
	"github.com/hotcounter/hotcounter/redisstore"
)

// childEnv, when set, makes the test binary a child process that runs the
// childJob its value holds (JSON) instead of the tests.
const childEnv = "HOTCOUNTER_TEST_CHILD"

// childJob is what a child process does.
type childJob struct {
	// Role: "writer" increments the posts' likes through a buffer on the
	// Redis store, 8 writers at once, until it is killed, writing
	// "attempt n" before n increments and "ack n" after the n that
	// succeeded; "flusher" opens a buffer that never increments, closes
	// it (which flushes) and exits.
	Role     string
	ORM      string // "gorm" or "ent"
	Kind     dbKind
	DSN      string
	Redis    string
	Prefix   string
	Posts    []int64
	Interval time.Duration
}

// runChild runs the job in env (see childEnv) and returns the exit code.
func runChild(spec string) int {
	var job childJob
	if err := json.Unmarshal([]byte(spec), &job); err != nil {
		fmt.Fprintln(os.Stderr, "child job:", err)
		return 2
	}
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: job.Redis})
	cfg := hotcounter.BufferConfig{Interval: job.Interval, Store: redisstore.New(rdb, redisstore.Options{Prefix: job.Prefix})}
	onError := func(err error) { fmt.Fprintln(os.Stderr, "buffer:", err) }
	var (
		increment func(ctx context.Context, id int64) error
		closeBuf  func(ctx context.Context) error
	)
	switch job.ORM {
	case "gorm":
		// The plugin declares the model, as a process that serves it does.
		db, err := gorm.Open(dialectorFor(job.Kind, job.DSN), &gorm.Config{Logger: logger.Discard})
		if err == nil {
			err = db.Use(gormcounter.New(gormcounter.Config{Models: []any{&Post{}}, OnError: onError}))
		}
		var buf *gormcounter.Buffer
		if err == nil {
			buf, err = gormcounter.NewBuffer(context.Background(), db, cfg)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "open:", err)
			return 2
		}
		increment = func(ctx context.Context, id int64) error { return buf.Increment(ctx, &Post{ID: uint(id)}, "Likes", 1) }
		closeBuf = buf.Close
	case "ent":
		pool, err := stdsql.Open(sqlDriverName(job.Kind), job.DSN)
		if err != nil {
			fmt.Fprintln(os.Stderr, "open:", err)
			return 2
		}
		client := ent.NewClient(ent.Driver(entDriverSending(job.Kind, pool, func(string) {})))
		if _, err := entcounter.Configure(client, entcounter.Config{OnError: onError}); err != nil {
			fmt.Fprintln(os.Stderr, "configure:", err)
			return 2
		}
		buf, err := entcounter.NewBuffer(ctx, client, cfg)
		if err != nil {
			fmt.Fprintln(os.Stderr, "open:", err)
			return 2
		}
		increment = func(ctx context.Context, id int64) error { return client.Post.Buffered(buf).AddLikes(ctx, int(id), 1) }
		closeBuf = buf.Close
	}
	if job.Role == "flusher" {
		ctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		if err := closeBuf(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "close:", err)
			return 1
		}
		return 0
	}
	var out sync.Mutex
	say := func(format string, a ...any) {
		out.Lock()
		defer out.Unlock()
		fmt.Fprintf(os.Stdout, format+"\n", a...) // unbuffered: a line is out before what follows it
	}
	say("ready")
	for w := range 8 {
		go func() {
			for i := 0; ; i++ {
				say("attempt 10")
				acked := 0
				for k := range 10 {
					if err := increment(ctx, job.Posts[(w+i+k)%len(job.Posts)]); err != nil {
						say("error %v", err)
						continue
					}
					acked++
				}
				say("ack %d", acked)
			}
		}()
	}
	select {} // until killed
}

// child is a child process as the test sees it.
type child struct {
	cmd              *exec.Cmd
	attempted, acked atomic.Int64
	ready, done      chan struct{}
	stderr           bytes.Buffer
	mu               sync.Mutex
	errs             []string
}

// startChild starts a writer child and waits until it is ready.
func startChild(t *testing.T, job childJob) *child {
	t.Helper()
	spec, err := json.Marshal(job)
	must(t, err)
	c := &child{cmd: exec.Command(os.Args[0]), ready: make(chan struct{}), done: make(chan struct{})}
	c.cmd.Env = append(os.Environ(), childEnv+"="+string(spec))
	c.cmd.Stderr = &c.stderr
	stdout, err := c.cmd.StdoutPipe()
	must(t, err)
	must(t, c.cmd.Start())
	t.Cleanup(func() { c.kill() })
	go func() {
		defer close(c.done)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			word, rest, _ := strings.Cut(sc.Text(), " ")
			n, _ := strconv.ParseInt(rest, 10, 64)
			switch word {
			case "ready":
				close(c.ready)
			case "attempt":
				c.attempted.Add(n)
			case "ack":
				c.acked.Add(n)
			case "error":
				c.mu.Lock()
				c.errs = append(c.errs, rest)
				c.mu.Unlock()
			}
		}
	}()
	select {
	case <-c.ready:
	case <-c.done:
		t.Fatalf("the child ended before it was ready: %v\n%s", c.cmd.Wait(), c.stderr.String())
	case <-time.After(60 * time.Second):
		t.Fatalf("the child was not ready after a minute:\n%s", c.stderr.String())
	}
	return c
}

// kill ends the child with SIGKILL and waits until its last line is read.
func (c *child) kill() {
	if c.cmd.ProcessState != nil {
		return
	}
	_ = c.cmd.Process.Kill()
	<-c.done
	_ = c.cmd.Wait()
}

// runFlusher runs a flusher child to its end; it must exit cleanly.
func runFlusher(t *testing.T, job childJob) {
	t.Helper()
	job.Role = "flusher"
	spec, err := json.Marshal(job)
	must(t, err)
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), childEnv+"="+string(spec))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the flusher: %v\n%s", err, out)
	}
}

// holdWrites keeps other sessions from writing table until release:
// PostgreSQL's LOCK TABLE ... IN SHARE MODE, MariaDB's LOCK TABLES ...
// READ, SQLite's write lock (BEGIN IMMEDIATE), each on a connection of its
// own. A write that meets it waits, as a flush does while the database is
// away.
func holdWrites(t *testing.T, e *env, table string) (release func()) {
	t.Helper()
	if e.kind == pg {
		return lockTableOf(t, e.db, table)
	}
	ctx := context.Background()
	pool, err := e.db.DB()
	must(t, err)
	conn, err := pool.Conn(ctx)
	must(t, err)
	hold, free := "BEGIN IMMEDIATE", "ROLLBACK"
	if e.kind == my {
		hold, free = "LOCK TABLES "+table+" READ", "UNLOCK TABLES"
	}
	if _, err := conn.ExecContext(ctx, hold); err != nil {
		conn.Close()
		t.Fatal(err)
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			if _, err := conn.ExecContext(ctx, free); err != nil {
				t.Errorf("%s: %v", free, err)
			}
			conn.Close()
		})
	}
}

// likesOf sums the likes of the posts.
func likesOf(t *testing.T, o counterORM, posts []int64) int64 {
	t.Helper()
	var n int64
	for _, id := range posts {
		n += exactly(t, o, modelPost, id, "likes")
	}
	return n
}

// A process that writes through the Redis store is killed with SIGKILL
// before its first flush, in the middle of a flush (its batches taken
// from Redis, its transaction waiting on a lock that the test holds), and
// after flushes have written part of what it acknowledged. A fresh
// process that never increments, declaring the model it serves, then
// writes what is left: every acknowledged increment is counted, none
// beyond those attempted, and Redis holds nothing after. Both ORMs, every
// database.
func TestRedisBufferOfAKilledProcessIsWrittenByAFreshOne(t *testing.T) {
	eachORM(t, func(t *testing.T, o counterORM) {
		orm := "gorm"
		if _, ok := o.(entORM); ok {
			orm = "ent"
		}
		for _, when := range []string{"before a flush", "during a flush", "after a flush"} {
			t.Run(strings.ReplaceAll(when, " ", "_"), func(t *testing.T) {
				rdb, prefix := redisFor(t)
				posts := o.createMany(t, modelPost, 4)
				job := childJob{Role: "writer", ORM: orm, Kind: o.kind(), DSN: o.onEnv().dsn, Redis: rdb.Options().Addr,
					Prefix: prefix, Posts: posts, Interval: 50 * time.Millisecond}
				release := func() {}
				switch when {
				case "before a flush":
					job.Interval = time.Hour
				case "during a flush":
					release = holdWrites(t, o.onEnv(), "post_likes_slots")
					defer release()
				}
				c := startChild(t, job)
				waitFor(t, 30*time.Second, "the child to be where it should die ("+when+")", func() bool {
					switch {
					case c.acked.Load() < 300:
						return false
					case when == "during a flush":
						return len(rdb.Keys(context.Background(), prefix+":*:b").Val()) > 0
					case when == "after a flush":
						return likesOf(t, o, posts) > 0
					}
					return true
				})
				c.kill()
				release()
				before := likesOf(t, o, posts)
				runFlusher(t, job)
				counted, attempted, acked := likesOf(t, o, posts), c.attempted.Load(), c.acked.Load()
				t.Logf("killed %s: attempted %d, acknowledged %d, counted %d before the fresh process, %d after", when, attempted, acked, before, counted)
				if len(c.errs) > 0 {
					t.Errorf("the writer's increments failed: %v", c.errs[:min(3, len(c.errs))])
				}
				if when == "before a flush" && before != 0 {
					t.Errorf("%d counted before any flush", before)
				}
				if counted < acked || counted > attempted {
					t.Errorf("counted %d; want at least the %d acknowledged and at most the %d attempted", counted, acked, attempted)
				}
				if left := keysLeft(t, rdb, prefix); len(left) != 0 {
					t.Errorf("keys left in Redis after the fresh process: %v", left)
				}
			})
		}
	})
}
