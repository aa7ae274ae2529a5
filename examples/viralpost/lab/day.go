package lab

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"sync"
	"text/tabwriter"
	"time"

	"gorm.io/gorm"

	"github.com/hotcounter/hotcounter/gormcounter"
)

// DayConfig is the whole day of a viral post (-scenario day): one strategy
// takes the likes for the whole Duration (20 minutes in the seed's story)
// on a table that also holds many ordinary posts, and every Every the run
// records what the likes saw and what became of the slot table: its size
// and its indexes' size, dead tuples, HOT updates, autovacuum runs, and the
// latency of a load of the hot post. PostgreSQL only: the figures are its
// statistics views.
type DayConfig struct {
	Config
	// Every is the period of one report line (1m).
	Every time.Duration
	// Posts is how many ordinary posts the table holds besides the hot one
	// (100,000), each liked once or twice before the load.
	Posts int
	// Background is the rate of likes of random ordinary posts during the
	// load (100/s): the table's other writers.
	Background float64
	// HotReads is the rate of loads of the hot post during the load (10/s),
	// through the application's pool, as a post page would read it.
	HotReads float64
	// Covering adds the covering index (<owner>) INCLUDE (n) to the slot
	// table before the load, to weigh it: it makes a load's sum an
	// index-only scan, and every increment an update of an indexed column.
	Covering bool
}

func (c *DayConfig) defaults() {
	if c.Duration == 0 {
		c.Duration = 20 * time.Minute
	}
	c.Config.defaults()
	setDefault(&c.Every, time.Minute)
	setDefault(&c.Posts, 100_000)
	setDefault(&c.Background, 100)
	setDefault(&c.HotReads, 10)
	if len(c.Strategies) == 0 {
		c.Strategies = []string{"slots16"}
	}
}

// DayResult is what a whole-day run measured; it is also the JSON file.
type DayResult struct {
	Started    time.Time `json:"started"`
	Machine    string    `json:"machine"`
	Server     Server    `json:"server"`
	Strategy   string    `json:"strategy"`
	What       string    `json:"what"`
	Rate       float64   `json:"offered_per_s"`
	Background float64   `json:"background_per_s"`
	HotReads   float64   `json:"hot_reads_per_s"`
	Posts      int       `json:"posts"`
	Covering   bool      `json:"covering_index"`
	Duration   string    `json:"duration"`
	Every      string    `json:"every"`
	Pool       int       `json:"pool"`
	Timeout    string    `json:"timeout"`
	SlotTable  string    `json:"slot_table"`
	// Start is the slot table when the load began (after the seed, a
	// VACUUM ANALYZE and the warm-up).
	Start   TableStats `json:"start"`
	Periods []Period   `json:"periods"`
	// Acked and Counted are over every like of the load, the hot post's
	// and the background's; Lost is Acked - Counted when positive.
	Acked     int      `json:"acked"`
	TimedOut  int      `json:"timed_out"`
	Failed    int      `json:"failed"`
	Errors    []string `json:"errors,omitempty"`
	Counted   int64    `json:"counted"`
	Lost      int64    `json:"lost"`
	Deadlocks int64    `json:"deadlocks"`
}

// Period is one report line of a whole-day run: the likes due in it, and
// the slot table at its end.
type Period struct {
	EndMinute float64 `json:"end_min"`
	// Likes are the hot post's likes due in the period.
	Likes    Latency `json:"likes"`
	AckedPer float64 `json:"acked_per_s"`
	// Waits counts the pool's statements seen waiting for a lock (pg_locks,
	// every 10 ms) whose wait began in the period; Logged those the server
	// logged as lasting the threshold (-1 when the log is unread).
	Waits  int `json:"waits_sampled"`
	Logged int `json:"waits_logged"`
	// HotLoad is the latency of the loads of the hot post due in the period.
	HotLoad Latency `json:"hot_load"`
	// Updates and HotUpdates are the slot table's updates in the period
	// and how many of them were HOT (no new index entry).
	Updates    int64      `json:"updates"`
	HotUpdates int64      `json:"hot_updates"`
	Table      TableStats `json:"table"`
}

// TableStats is a slot table as PostgreSQL's statistics see it.
type TableStats struct {
	HeapBytes  int64 `json:"heap_bytes"`
	IndexBytes int64 `json:"index_bytes"`
	// Rows is count(*); Dead is n_dead_tup, the statistics' estimate.
	Rows int64 `json:"rows"`
	Dead int64 `json:"dead_tuples"`
	// Updates and HotUpdates are cumulative (n_tup_upd, n_tup_hot_upd).
	Updates     int64 `json:"updates_total"`
	HotUpdates  int64 `json:"hot_updates_total"`
	Autovacuums int64 `json:"autovacuums"`
	// HotRows is how many slot rows the hot post has.
	HotRows int64 `json:"hot_post_rows"`
}

// Day runs the whole day of a viral post.
func Day(ctx context.Context, cfg DayConfig) (*DayResult, error) {
	cfg.defaults()
	if cfg.Driver == "mysql" {
		return nil, fmt.Errorf("the day scenario reads PostgreSQL's statistics views: run it with -driver postgres")
	}
	strategies, err := selectStrategies(cfg.Strategies)
	if err != nil {
		return nil, err
	}
	if len(strategies) != 1 || strategies[0].model == nil || strategies[0].redis || strategies[0].Name == "naive" {
		return nil, fmt.Errorf("the day scenario runs one slot strategy (slots16, slots64, skiplocked64 or append), not %v", cfg.Strategies)
	}
	s := strategies[0]
	tg, obs, closeObserver, err := watch(ctx, cfg.Driver, cfg.DSN, cfg.ServerLog)
	if err != nil {
		return nil, err
	}
	defer closeObserver()
	p, err := tg.openPool(cfg.Config, obs.server.Superuser)
	if err != nil {
		return nil, err
	}
	defer p.sql.Close()
	db := p.db.WithContext(ctx)

	hot, err := s.prepare(ctx, db)
	if err != nil {
		return nil, err
	}
	slots, err := slotTableOf(ctx, obs, db, s.model)
	if err != nil {
		return nil, err
	}
	if cfg.Covering {
		owner, err := obs.ownerColumn(ctx, slots)
		if err != nil {
			return nil, err
		}
		if err := db.Exec(fmt.Sprintf("CREATE INDEX %s_covering ON %s (%s) INCLUDE (n)", slots, slots, owner)).Error; err != nil {
			return nil, err
		}
	}
	lo, hi, err := seedOrdinaryPosts(ctx, db, s, cfg.Posts, slots)
	if err != nil {
		return nil, err
	}
	res := &DayResult{
		Started: time.Now().UTC(), Server: obs.server, Strategy: s.Name, What: s.What,
		Machine: fmt.Sprintf("%d CPUs, %s/%s, %s", runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version()),
		Rate:    cfg.Rate, Background: cfg.Background, HotReads: cfg.HotReads, Posts: cfg.Posts, Covering: cfg.Covering,
		Duration: cfg.Duration.String(), Every: cfg.Every.String(), Pool: cfg.Pool, Timeout: cfg.Timeout.String(),
		SlotTable: slots,
	}

	var wg sync.WaitGroup
	for range cfg.Pool { // open every connection of the pool
		wg.Go(func() { _ = s.like(db, hot) })
	}
	wg.Wait()
	total := func() (int64, error) {
		var n int64
		err := obs.db.QueryRowContext(ctx, "SELECT COALESCE(SUM(n), 0) FROM "+slots).Scan(&n)
		return n, err
	}
	before, err := total()
	if err != nil {
		return nil, err
	}
	deadlocksBefore, err := obs.deadlocks(ctx)
	if err != nil {
		return nil, err
	}
	if res.Start, err = obs.tableStats(ctx, slots, hot); err != nil {
		return nil, err
	}
	logFrom := int64(-1)
	if obs.log != nil {
		if logFrom, err = obs.log.Size(ctx); err != nil {
			return nil, err
		}
	}

	// The load: the hot post's likes, the other posts' likes and loads of
	// the hot post, all open loop through the one pool; the table's figures
	// at the end of every period.
	sampling := obs.sample(ctx)
	var likes, others, reads counters
	stop := make(chan struct{})
	go progress(cfg.Progress, s.Name, cfg.Duration, &likes, stop)
	start := time.Now()
	var (
		snapshots []TableStats
		logged    []int
		snapErr   error
	)
	ticked := make(chan struct{})
	go func() {
		defer close(ticked)
		for i := 1; time.Duration(i)*cfg.Every <= cfg.Duration; i++ {
			select {
			case <-time.After(time.Until(start.Add(time.Duration(i) * cfg.Every))):
			case <-ctx.Done():
				return
			}
			st, err := obs.tableStats(ctx, slots, hot)
			if err != nil {
				snapErr = err
				return
			}
			snapshots = append(snapshots, st)
			waits := -1
			if logFrom >= 0 {
				if text, err := obs.log.ReadFrom(ctx, logFrom); err == nil {
					var lw LockWaits
					parseLog(text, p.backends(), &lw)
					waits, logFrom = lw.Logged, logFrom+int64(len(text))
				}
			}
			logged = append(logged, waits)
		}
	}()
	var otherLoad, readLoad *load
	wg.Go(func() {
		otherLoad = openLoop(ctx, cfg.Background, cfg.Duration, cfg.Timeout, &others, func(ctx context.Context) error {
			return s.like(db.WithContext(ctx), lo+uint(rand.IntN(int(hi-lo+1))))
		})
	})
	wg.Go(func() {
		readLoad = openLoop(ctx, cfg.HotReads, cfg.Duration, cfg.Timeout, &reads, func(ctx context.Context) error {
			_, err := s.count(db.WithContext(ctx), hot)
			return err
		})
	})
	l := openLoop(ctx, cfg.Rate, cfg.Duration, cfg.Timeout, &likes, func(ctx context.Context) error { return s.like(db.WithContext(ctx), hot) })
	wg.Wait()
	close(stop)
	<-ticked
	var lw LockWaits
	sampled := sampling.periods(start, cfg.Every, p.backends())
	sampling.finish(&lw, cfg.Threshold, p.backends())
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if snapErr != nil {
		return nil, snapErr
	}

	after, err := total()
	if err != nil {
		return nil, err
	}
	res.Acked = l.count(ok) + otherLoad.count(ok)
	res.TimedOut = l.count(timedOut) + otherLoad.count(timedOut)
	res.Failed = l.count(failed) + l.count(deadlock) + otherLoad.count(failed) + otherLoad.count(deadlock)
	res.Errors = append(append(res.Errors, l.errs...), otherLoad.errs...)
	res.Counted = after - before
	res.Lost = max(0, int64(res.Acked)-res.Counted)
	prev := res.Start
	for i, st := range snapshots {
		from, to := time.Duration(i)*cfg.Every, time.Duration(i+1)*cfg.Every
		acked := 0
		for _, r := range l.requests {
			if r.due >= from && r.due < to && r.outcome == ok {
				acked++
			}
		}
		per := Period{
			EndMinute: to.Minutes(), Likes: l.summarise(from, to), AckedPer: float64(acked) / cfg.Every.Seconds(),
			Logged: logged[i], HotLoad: readLoad.summarise(from, to),
			Updates: st.Updates - prev.Updates, HotUpdates: st.HotUpdates - prev.HotUpdates, Table: st,
		}
		if i < len(sampled) {
			per.Waits = sampled[i]
		}
		res.Periods = append(res.Periods, per)
		prev = st
	}
	if res.Deadlocks, err = obs.deadlocksSince(ctx, p, deadlocksBefore); err != nil {
		return nil, err
	}
	return res, nil
}

// slotTableOf returns the name of model's likes slot table: the table whose
// foreign key references model's table.
func slotTableOf(ctx context.Context, obs *observer, db *gorm.DB, model any) (string, error) {
	stmt := &gorm.Statement{DB: db}
	if err := stmt.Parse(model); err != nil {
		return "", err
	}
	var name string
	err := obs.db.QueryRowContext(ctx, `SELECT conrelid::regclass::text FROM pg_constraint
		WHERE contype = 'f' AND confrelid = $1::regclass ORDER BY conrelid::regclass::text LIMIT 1`, stmt.Schema.Table).Scan(&name)
	if err != nil {
		return "", fmt.Errorf("find the slot table of %s: %w", stmt.Schema.Table, err)
	}
	return name, nil
}

// seedOrdinaryPosts adds n posts and likes each once or twice through the
// library (two increments of many parents), then VACUUM ANALYZEs the
// tables, and returns the new posts' key range.
func seedOrdinaryPosts(ctx context.Context, db *gorm.DB, s Strategy, n int, slots string) (lo, hi uint, err error) {
	stmt := &gorm.Statement{DB: db}
	if err := stmt.Parse(s.model); err != nil {
		return 0, 0, err
	}
	posts := stmt.Schema.Table
	if err := db.Exec(fmt.Sprintf("INSERT INTO %s (title) SELECT 'post ' || g FROM generate_series(1, %d) g", posts, n)).Error; err != nil {
		return 0, 0, fmt.Errorf("seed %d posts: %w", n, err)
	}
	if err := db.Raw(fmt.Sprintf("SELECT MIN(id), MAX(id) FROM %s WHERE title <> 'a celebrity''s post'", posts)).Row().Scan(&lo, &hi); err != nil {
		return 0, 0, err
	}
	for _, where := range []string{"id BETWEEN ? AND ?", "id BETWEEN ? AND ? AND id % 2 = 0"} {
		if err := gormcounter.Increment(db.Model(s.model).Where(where, lo, hi), "Likes", 1).Error; err != nil {
			return 0, 0, fmt.Errorf("seed the posts' likes: %w", err)
		}
	}
	for _, t := range []string{posts, slots} {
		if err := db.Exec("VACUUM ANALYZE " + t).Error; err != nil {
			return 0, 0, err
		}
	}
	return lo, hi, nil
}

// tableStats reads a slot table's size and statistics, and the hot post's
// slot rows.
func (o *observer) tableStats(ctx context.Context, table string, hot uint) (TableStats, error) {
	var st TableStats
	err := o.db.QueryRowContext(ctx, `SELECT pg_relation_size(s.relid), pg_indexes_size(s.relid), s.n_dead_tup,
		s.n_tup_upd, s.n_tup_hot_upd, s.autovacuum_count
		FROM pg_stat_user_tables s WHERE s.relid = $1::regclass`, table).
		Scan(&st.HeapBytes, &st.IndexBytes, &st.Dead, &st.Updates, &st.HotUpdates, &st.Autovacuums)
	if err != nil {
		return st, fmt.Errorf("read the statistics of %s: %w", table, err)
	}
	owner, err := o.ownerColumn(ctx, table)
	if err != nil {
		return st, err
	}
	err = o.db.QueryRowContext(ctx, fmt.Sprintf("SELECT count(*), count(*) FILTER (WHERE %s = $1) FROM %s", owner, table), hot).
		Scan(&st.Rows, &st.HotRows)
	return st, err
}

// ownerColumn returns the column of a slot table that references its
// parent.
func (o *observer) ownerColumn(ctx context.Context, table string) (string, error) {
	var owner string
	err := o.db.QueryRowContext(ctx, `SELECT a.attname FROM pg_constraint c JOIN pg_attribute a
		ON a.attrelid = c.conrelid AND a.attnum = c.conkey[1] WHERE c.contype = 'f' AND c.conrelid = $1::regclass`, table).Scan(&owner)
	return owner, err
}

// periods counts the sampled waits of the given backends by the period
// (of length every, from start) in which each wait began.
func (s *sampler) periods(start time.Time, every time.Duration, pids map[int]bool) []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []int
	from := float64(start.UnixNano()) / 1e9
	for k, sp := range s.waits {
		if !pids[k.pid] {
			continue
		}
		i := int((sp.first - from) / every.Seconds())
		if i < 0 {
			continue
		}
		for len(out) <= i {
			out = append(out, 0)
		}
		out[i]++
	}
	return out
}

// WriteTable prints the run: one line per period.
func (r *DayResult) WriteTable(w io.Writer) {
	fmt.Fprintf(w, "%s %s (%s), %s\n", r.Server.Product, r.Server.Version, r.Server.Durability, r.Machine)
	fmt.Fprintf(w, "%s: %.0f likes/s offered on one post for %s, %.0f/s on %d other posts, %.0f loads/s of the hot post; pool %d, timeout %s\n",
		r.Strategy, r.Rate, r.Duration, r.Background, r.Posts, r.HotReads, r.Pool, r.Timeout)
	mb := func(b int64) float64 { return float64(b) / (1 << 20) }
	if r.Covering {
		fmt.Fprintf(w, "with the covering index (owner) INCLUDE (n) on %s\n", r.SlotTable)
	}
	fmt.Fprintf(w, "%s at the start: heap %.1f MB, indexes %.1f MB, %d rows, %d dead tuples\n\n",
		r.SlotTable, mb(r.Start.HeapBytes), mb(r.Start.IndexBytes), r.Start.Rows, r.Start.Dead)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "min\tlikes/s\tp50 ms\tp99 ms\tmax ms\ttimed out\twaits sampled\twaits logged\tload p50/p99 ms\theap MB\tindex MB\trows\tdead\tupdates\tHOT %\tautovacuums\thot post rows\t")
	for _, p := range r.Periods {
		hotPct := 0.0
		if p.Updates > 0 {
			hotPct = 100 * float64(p.HotUpdates) / float64(p.Updates)
		}
		logged := "n/a"
		if p.Logged >= 0 {
			logged = fmt.Sprint(p.Logged)
		}
		fmt.Fprintf(tw, "%.4g\t%.0f\t%.1f\t%.1f\t%.0f\t%d\t%d\t%s\t%.2f / %.2f\t%.2f\t%.2f\t%d\t%d\t%d\t%.1f\t%d\t%d\t\n",
			p.EndMinute, p.AckedPer, p.Likes.P50, p.Likes.P99, p.Likes.Max, p.Likes.TimedOut, p.Waits, logged,
			p.HotLoad.P50, p.HotLoad.P99, mb(p.Table.HeapBytes), mb(p.Table.IndexBytes), p.Table.Rows, p.Table.Dead,
			p.Updates, hotPct, p.Table.Autovacuums, p.Table.HotRows)
	}
	tw.Flush()
	fmt.Fprintf(w, "\nacked %d (hot post and others), counted %d, lost %d, timed out %d, failed %d, deadlocks %d\n",
		r.Acked, r.Counted, r.Lost, r.TimedOut, r.Failed, r.Deadlocks)
	for _, e := range r.Errors {
		fmt.Fprintln(w, "error:", e)
	}
}

// WriteJSON writes the whole-day result as indented JSON.
func (r *DayResult) WriteJSON(path string) error { return writeJSON(path, r) }
