// Package lab is the viral-post lab: it puts one post under an open-loop
// load of likes, strategy by strategy, through a bounded connection pool like
// an application's, and measures what users of the application would see
// (latency, timeouts, an unrelated endpoint) and what the database saw (lock
// waits, deadlocks), and checks that every acknowledged like was counted.
//
// It runs on PostgreSQL. examples/viralpost is its command; the integration
// tests run a short version of it.
package lab

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"

	"github.com/hotcounter/hotcounter"
	"github.com/hotcounter/hotcounter/gormcounter"
	"github.com/hotcounter/hotcounter/internal/detect"
	"github.com/hotcounter/hotcounter/redisstore"
)

// Config is one run of the lab. Zero fields take the defaults of the
// viralpost command.
type Config struct {
	DSN        string        // required
	Driver     string        // "postgres" (the default) or "mysql" (MySQL/MariaDB)
	Rate       float64       // offered likes per second (2000)
	Duration   time.Duration // load per strategy (20s)
	Pool       int           // the application's max open connections (20)
	Timeout    time.Duration // a request's deadline, from its arrival (2s)
	Threshold  time.Duration // a lock wait at least this long is counted (100ms)
	Unrelated  float64       // reads per second of the unrelated endpoint (50)
	Strategies []string      // names to run, in the lab's order; nil runs all
	// Redis is the address of the Redis server the redis strategy uses
	// (127.0.0.1:6379); unreachable, the strategy is skipped and said so.
	Redis string
	// ServerLog is where logged lock waits are read: "auto" (the default),
	// "off", or the path of the server's log file on the server.
	ServerLog string
	// Reads also measures loads of 1 and 100 posts; ReadRounds sets how
	// many alternating rounds (15).
	Reads      bool
	ReadRounds int
	// Progress, when set, receives a status line about twice a second.
	Progress func(line string)
}

func (c *Config) defaults() {
	setDefault(&c.Rate, 2000)
	setDefault(&c.Duration, 20*time.Second)
	setDefault(&c.Pool, 20)
	setDefault(&c.Timeout, 2*time.Second)
	setDefault(&c.Threshold, 100*time.Millisecond)
	setDefault(&c.Unrelated, 50)
	setDefault(&c.ReadRounds, 15)
	c.ReadRounds = max(c.ReadRounds, 2) // the first round only warms up
	if c.ServerLog == "" {
		c.ServerLog = "auto"
	}
	if c.Redis == "" {
		c.Redis = "127.0.0.1:6379"
	}
}

func setDefault[T comparable](v *T, d T) {
	var zero T
	if *v == zero {
		*v = d
	}
}

// Result is everything one run measured; it is also the JSON file.
type Result struct {
	Started    time.Time        `json:"started"`
	Machine    string           `json:"machine"`
	Server     Server           `json:"server"`
	Rate       float64          `json:"offered_per_s"`
	Duration   string           `json:"duration"`
	Pool       int              `json:"pool"`
	Timeout    string           `json:"timeout"`
	Threshold  string           `json:"lock_wait_threshold"`
	Strategies []StrategyResult `json:"strategies"`
	Skipped    []string         `json:"skipped,omitempty"`
	Reads      []ReadResult     `json:"reads,omitempty"`
}

// StrategyResult is what one strategy did under the load.
type StrategyResult struct {
	Name     string  `json:"name"`
	What     string  `json:"what"`
	Achieved float64 `json:"achieved_per_s"` // acknowledged likes per second of load
	Sent     int     `json:"sent"`
	Acked    int     `json:"acked"`
	TimedOut int     `json:"timed_out"`
	// Deadlocked counts likes that failed with a deadlock error; Deadlocks
	// is the server's count (pg_stat_database) over the run.
	Deadlocked int      `json:"deadlocked"`
	Deadlocks  int64    `json:"deadlocks"`
	Failed     int      `json:"failed"`
	Errors     []string `json:"errors,omitempty"`
	// Counted is what the post's count gained during the load. Lost is
	// Acked - Counted when positive: acknowledged likes that were not
	// counted, which must be zero. A like that timed out has an unknown
	// outcome (its deadline may have passed while its COMMIT was under way),
	// so Counted may exceed Acked by up to TimedOut; only without timeouts
	// is Counted == Acked an exact check, and Lost a lower bound otherwise.
	Counted   int64     `json:"counted"`
	Lost      int64     `json:"lost"`
	Likes     Latency   `json:"likes"`
	Unrelated Latency   `json:"unrelated"`
	LockWaits LockWaits `json:"lock_waits"`
	Timeline  []Bucket  `json:"timeline"`
	// Detected is what hotcounter detect named during the load (the three
	// hottest rows); DetectErr why it could not run. HotKeys are the
	// library's three most incremented rows (gormcounter.HotKeys).
	Detected  []detect.Row        `json:"detected"`
	DetectErr string              `json:"detect_error,omitempty"`
	HotKeys   []hotcounter.HotKey `json:"hot_keys"`
}

// redisBuffer opens a write-behind buffer in Redis on db, under a key
// prefix of this run's own; close flushes it (giving up after 30 s) and
// deletes the prefix's keys.
func redisBuffer(ctx context.Context, cfg Config, db *gorm.DB) (*gormcounter.Buffer, func() error, error) {
	rdb := redis.NewClient(&redis.Options{Addr: cfg.Redis, PoolSize: cfg.Pool})
	prefix := fmt.Sprintf("viralpost%d", time.Now().UnixNano())
	buf, err := gormcounter.NewBuffer(ctx, db, hotcounter.BufferConfig{Interval: time.Second,
		Store: redisstore.New(rdb, redisstore.Options{Prefix: prefix})})
	if err != nil {
		rdb.Close()
		return nil, nil, err
	}
	return buf, func() error {
		closeCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		err := buf.Close(closeCtx)
		iter := rdb.Scan(ctx, 0, prefix+":*", 1000).Iterator()
		for iter.Next(ctx) {
			rdb.Del(ctx, iter.Val())
		}
		rdb.Close()
		return err
	}, nil
}

// detection is what detectDuring found.
type detection struct {
	rows []detect.Row
	err  string
}

// detectDuring runs hotcounter detect for most of a strategy's load, as an
// operator on call would, on a connection of its own.
func detectDuring(ctx context.Context, cfg Config) detection {
	db, err := detect.Open(ctx, cfg.DSN)
	if err != nil {
		return detection{err: err.Error()}
	}
	defer db.Close()
	rep, err := detect.Detect(ctx, db, detect.Options{For: max(cfg.Duration*3/4, time.Second)})
	if err != nil {
		return detection{err: err.Error()}
	}
	return detection{rows: rep.Rows[:min(3, len(rep.Rows))]}
}

// Run runs the lab: each selected strategy in turn, then the read side.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	cfg.defaults()
	strategies, err := selectStrategies(cfg.Strategies)
	if err != nil {
		return nil, err
	}
	tg, obs, closeObserver, err := watch(ctx, cfg.Driver, cfg.DSN, cfg.ServerLog)
	if err != nil {
		return nil, err
	}
	defer closeObserver()
	res := &Result{
		Started: time.Now().UTC(), Server: obs.server,
		Machine: fmt.Sprintf("%d CPUs, %s/%s, %s", runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version()),
		Rate:    cfg.Rate, Duration: cfg.Duration.String(), Pool: cfg.Pool,
		Timeout: cfg.Timeout.String(), Threshold: cfg.Threshold.String(),
	}
	if err := seedUsers(ctx, tg, cfg); err != nil {
		return nil, err
	}
	for _, s := range strategies {
		if s.redis {
			rdb := redis.NewClient(&redis.Options{Addr: cfg.Redis})
			err := rdb.Ping(ctx).Err()
			rdb.Close()
			if err != nil {
				res.Skipped = append(res.Skipped, fmt.Sprintf("%s: Redis at %s unreachable (%v)", s.Name, cfg.Redis, err))
				continue
			}
		}
		r, err := runStrategy(ctx, cfg, tg, obs, s)
		if err != nil {
			return res, err
		}
		res.Strategies = append(res.Strategies, *r)
	}
	if cfg.Reads {
		if res.Reads, err = measureReads(ctx, cfg, tg); err != nil {
			return res, err
		}
	}
	return res, nil
}

// selectStrategies returns the named strategies in the lab's order.
func selectStrategies(names []string) ([]Strategy, error) {
	all := Strategies()
	if len(names) == 0 {
		return all, nil
	}
	var out []Strategy
	for _, s := range all {
		if slices.Contains(names, s.Name) {
			out = append(out, s)
		}
	}
	for _, n := range names {
		if !slices.ContainsFunc(all, func(s Strategy) bool { return s.Name == n }) {
			return nil, fmt.Errorf("unknown strategy %q", n)
		}
	}
	return out, nil
}

// backends returns the pool's server process ids so far.
func (p *pool) backends() map[int]bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.pids)
}

// usersSeeded is the number of rows the unrelated endpoint reads from.
const usersSeeded = 1000

// seedUsers creates the table the unrelated endpoint reads.
func seedUsers(ctx context.Context, tg target, cfg Config) error {
	p, err := tg.openPool(cfg, false)
	if err != nil {
		return err
	}
	defer p.sql.Close()
	db := p.db.WithContext(ctx)
	if err := db.Migrator().DropTable(&User{}); err != nil {
		return err
	}
	if err := db.AutoMigrate(&User{}); err != nil {
		return err
	}
	users := make([]User, usersSeeded)
	for i := range users {
		users[i].Name = "user " + strconv.Itoa(i+1)
	}
	return db.CreateInBatches(users, 500).Error
}

// runStrategy puts one strategy under the load.
func runStrategy(ctx context.Context, cfg Config, tg target, obs *observer, s Strategy) (*StrategyResult, error) {
	p, err := tg.openPool(cfg, obs.server.Superuser)
	if err != nil {
		return nil, err
	}
	defer p.sql.Close()
	id, err := s.prepare(ctx, p.db)
	if err != nil {
		return nil, err
	}
	db := p.db
	like := func(ctx context.Context) error { return s.like(db.WithContext(ctx), id) }
	closeBuf := func() error { return nil }
	var closed atomic.Bool // the buffer has flushed everything and closed
	if s.redis {
		buf, closeRedis, err := redisBuffer(ctx, cfg, db)
		if err != nil {
			return nil, err
		}
		closeBuf = sync.OnceValue(func() error { closed.Store(true); return closeRedis() })
		defer closeBuf() // on an early return; normally closed after the load
		like = func(ctx context.Context) error { return buf.Increment(ctx, &RedisPost{ID: id}, "Likes", 1) }
		s.count = func(db *gorm.DB, id uint) (int64, error) {
			var p RedisPost
			q := db
			if !closed.Load() {
				q = db.Clauses(buf.Live()) // SQL and what Redis holds
			}
			err := q.First(&p, id).Error
			return p.Likes, err
		}
	}

	// Warm up: open every connection of the pool and prepare the statements.
	var wg sync.WaitGroup
	for range cfg.Pool {
		wg.Go(func() { _ = like(ctx) })
	}
	wg.Wait()
	before, err := s.count(db.WithContext(ctx), id)
	if err != nil {
		return nil, fmt.Errorf("%s: count before: %w", s.Name, err)
	}

	logFrom := int64(-1)
	if obs.log != nil {
		if logFrom, err = obs.log.Size(ctx); err != nil {
			return nil, err
		}
	}
	deadlocksBefore, err := obs.deadlocks(ctx)
	if err != nil {
		return nil, err
	}
	var rowWaitsBefore int64
	if obs.mysql {
		if rowWaitsBefore, err = obs.status(ctx, "Innodb_row_lock_waits"); err != nil {
			return nil, err
		}
	}
	sampling := obs.sample(ctx)
	var likes, reads counters
	stop := make(chan struct{})
	go progress(cfg.Progress, s.Name, cfg.Duration, &likes, stop)
	unrelated := make(chan *load, 1)
	go func() {
		unrelated <- openLoop(ctx, cfg.Unrelated, cfg.Duration, cfg.Timeout, &reads, func(ctx context.Context) error {
			var u User
			return db.WithContext(ctx).First(&u, 1+rand.IntN(usersSeeded)).Error
		})
	}()
	detected := make(chan detection, 1)
	go func() { detected <- detectDuring(ctx, cfg) }()
	l := openLoop(ctx, cfg.Rate, cfg.Duration, cfg.Timeout, &likes, like)
	u := <-unrelated
	close(stop)
	// The buffer flushes what Redis holds before the count, while the pool
	// is open.
	if err := closeBuf(); err != nil {
		return nil, fmt.Errorf("%s: close the buffer: %w", s.Name, err)
	}
	r := &StrategyResult{Name: s.Name, What: s.What}
	found := <-detected
	r.Detected, r.DetectErr = found.rows, found.err
	if r.HotKeys, err = gormcounter.HotKeys(db, 3); err != nil {
		return nil, err
	}
	sampling.finish(&r.LockWaits, cfg.Threshold, p.backends())
	if err := ctx.Err(); err != nil {
		return nil, err
	}

	after, err := s.count(db.WithContext(ctx), id)
	if err != nil {
		return nil, fmt.Errorf("%s: count after: %w", s.Name, err)
	}
	r.Sent, r.Acked, r.TimedOut = len(l.requests), l.count(ok), l.count(timedOut)
	r.Deadlocked, r.Failed, r.Errors = l.count(deadlock), l.count(failed), l.errs
	r.Achieved = float64(r.Acked) / cfg.Duration.Seconds()
	r.Counted = after - before
	r.Lost = max(0, int64(r.Acked)-r.Counted)
	r.Likes = l.summarise(0, l.duration)
	r.Unrelated = u.summarise(0, u.duration)
	r.Timeline = l.timeline()

	// Close the pool so its server processes exit and report their
	// statistics, then read the deadlock count and the log.
	pids := p.backends()
	if r.Deadlocks, err = obs.deadlocksSince(ctx, p, deadlocksBefore); err != nil {
		return nil, err
	}
	if obs.mysql {
		rowWaitsAfter, err := obs.status(ctx, "Innodb_row_lock_waits")
		if err != nil {
			return nil, err
		}
		r.LockWaits.RowLockWaits = rowWaitsAfter - rowWaitsBefore
	}
	r.LockWaits.Logged = -1
	r.LockWaits.LogNote = obs.server.LockWaitLog
	if logFrom >= 0 {
		if text, err := obs.log.ReadFrom(ctx, logFrom); err != nil {
			r.LockWaits.LogNote = err.Error()
		} else {
			r.LockWaits.LogNote = ""
			parseLog(text, pids, &r.LockWaits)
		}
	}
	return r, nil
}
