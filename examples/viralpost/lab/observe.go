package lab

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/hotcounter/hotcounter/internal/detect"
)

// Server describes the database server a run measured.
type Server struct {
	Product string `json:"product"` // PostgreSQL, MariaDB or MySQL
	Version string `json:"version"`
	// Durability names the settings that decide what a commit waits for:
	// synchronous_commit and fsync, or innodb_flush_log_at_trx_commit.
	Durability string `json:"durability"`
	Superuser  bool   `json:"superuser"`
	// Sampled says where and how often lock waits were sampled.
	Sampled string `json:"sampled"`
	// LockWaitLog is how logged lock waits are counted: the server log file
	// read through pg_read_file, or why they are not.
	LockWaitLog string `json:"lock_wait_log"`
}

// observer watches the server from its own connection, outside the pool
// under test, so that watching never queues behind the load.
type observer struct {
	db     *sql.DB
	mysql  bool              // MySQL/MariaDB, else PostgreSQL
	app    string            // PostgreSQL application_name of the pool under test
	log    *detect.ServerLog // PostgreSQL server log, nil when it cannot be read
	server Server            // settings, read once
	every  time.Duration     // lock wait sampling period
}

// watch opens the target of driverName and dsn, and an observer of it on
// a pool of two connections of its own; close closes that pool. logPath is
// as Config.ServerLog.
func watch(ctx context.Context, driverName, dsn, logPath string) (tg target, obs *observer, close func() error, err error) {
	if tg, err = newTarget(driverName, dsn); err != nil {
		return tg, nil, nil, err
	}
	db, err := tg.sqlDB(nil, nil)
	if err != nil {
		return tg, nil, nil, err
	}
	db.SetMaxOpenConns(2)
	if obs, err = newObserver(ctx, db, tg, logPath); err != nil {
		db.Close()
		return tg, nil, nil, err
	}
	return tg, obs, db.Close, nil
}

// newObserver reads the server's settings and finds its log.
func newObserver(ctx context.Context, db *sql.DB, tg target, logPath string) (*observer, error) {
	o := &observer{db: db, mysql: tg.isMySQL(), app: tg.app, every: 10 * time.Millisecond}
	if o.mysql {
		// InnoDB refreshes its INNODB_TRX cache only when it has not been read
		// for 100 ms: polled faster, the view never changes.
		o.every = 150 * time.Millisecond
	}
	defer func() {
		from := "pg_locks"
		if o.mysql {
			from = "information_schema.INNODB_TRX"
		}
		o.server.Sampled = fmt.Sprintf("every %v from %s", o.every, from)
	}()
	s := &o.server
	if o.mysql {
		var flush, syncBinlog string
		err := db.QueryRowContext(ctx, `SELECT VERSION(), @@innodb_flush_log_at_trx_commit, @@sync_binlog`).Scan(&s.Version, &flush, &syncBinlog)
		if err != nil {
			return nil, fmt.Errorf("read server settings: %w", err)
		}
		s.Product = "MySQL"
		if strings.Contains(strings.ToLower(s.Version), "mariadb") {
			s.Product = "MariaDB"
		}
		s.Durability = "innodb_flush_log_at_trx_commit=" + flush + ", sync_binlog=" + syncBinlog
		s.LockWaitLog = "none: InnoDB logs no lock waits by duration (Innodb_row_lock_waits counts them all)"
		return o, nil
	}
	var syncCommit, fsync string
	err := db.QueryRowContext(ctx, `SELECT current_setting('server_version'),
		current_setting('synchronous_commit'), current_setting('fsync'),
		current_setting('is_superuser') = 'on'`).
		Scan(&s.Version, &syncCommit, &fsync, &s.Superuser)
	if err != nil {
		return nil, fmt.Errorf("read server settings: %w", err)
	}
	s.Product = "PostgreSQL"
	s.Durability = "synchronous_commit=" + syncCommit + ", fsync=" + fsync
	o.log, s.LockWaitLog = o.findLog(ctx, logPath)
	return o, nil
}

// findLog returns the PostgreSQL server log to read logged lock waits from, and a
// description of the choice. "auto" takes pg_current_logfile() when the
// logging collector runs, else the Debian default for the server's version.
func (o *observer) findLog(ctx context.Context, path string) (*detect.ServerLog, string) {
	if path == "off" {
		return nil, "off (-pglog off)"
	}
	if !o.server.Superuser {
		return nil, "unavailable: reading the server log needs a superuser"
	}
	l, err := detect.FindServerLog(ctx, o.db, path)
	if err != nil {
		return nil, fmt.Sprintf("unavailable: %s: %v", l.Path, err)
	}
	return &l, "server log " + l.Path + " (log_lock_waits = on, deadlock_timeout = threshold, set per session)"
}

// deadlocks returns the database's deadlock count so far.
func (o *observer) deadlocks(ctx context.Context) (int64, error) {
	var n int64
	if o.mysql {
		return o.status(ctx, "Innodb_deadlocks")
	}
	err := o.db.QueryRowContext(ctx, `SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()`).Scan(&n)
	return n, err
}

// deadlocksSince closes the pool p, waits until its server processes have
// exited (a process reports its statistics, deadlocks among them, as it
// exits), and returns the deadlocks since the count before.
func (o *observer) deadlocksSince(ctx context.Context, p *pool, before int64) (int64, error) {
	pids := p.backends()
	p.sql.Close()
	o.awaitExit(ctx, pids)
	after, err := o.deadlocks(ctx)
	return after - before, err
}

// status reads a MySQL/MariaDB global status counter.
func (o *observer) status(ctx context.Context, name string) (int64, error) {
	var n int64
	err := o.db.QueryRowContext(ctx, `SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = ?`, name).Scan(&n)
	return n, err
}

// awaitExit waits, up to five seconds, until the given server processes
// have exited: a process reports its statistics, deadlocks among them, as it
// exits.
func (o *observer) awaitExit(ctx context.Context, pids map[int]bool) {
	list := make([]int32, 0, len(pids))
	for pid := range pids {
		list = append(list, int32(pid))
	}
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		var alive int
		var err error
		if o.mysql {
			alive = 0
			for _, id := range list {
				var n int
				if err = o.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = ?`, id).Scan(&n); err != nil {
					break
				}
				alive += n
			}
		} else {
			err = o.db.QueryRowContext(ctx, `SELECT count(*) FROM pg_stat_activity WHERE pid = ANY($1)`, list).Scan(&alive)
		}
		if err != nil || alive == 0 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// LockWaits counts lock waits of the pool under test.
type LockWaits struct {
	// Logged counts the waits the server logged as lasting at least the
	// threshold ("still waiting for ... after"); -1 when the log is unread.
	Logged int `json:"logged"`
	// LoggedRelations counts logged waits by the relation the server names
	// in the wait's context, where it names one.
	LoggedRelations map[string]int `json:"logged_relations,omitempty"`
	// Sampled counts statements of the pool seen waiting for a lock in
	// pg_locks, sampled every 10 ms; short waits fall between samples. A
	// statement that waits for a row's tuple lock and then for its holder's
	// transaction is one wait, from the first lock's waitstart.
	Sampled int `json:"sampled"`
	// SampledOver counts sampled waits that had lasted at least the
	// threshold when last seen.
	SampledOver int `json:"sampled_over_threshold"`
	// LongestMs is the longest wait seen, in milliseconds, from the log's
	// "acquired ... after" lines and the samples.
	LongestMs float64 `json:"longest_ms"`
	// LogNote says why the log was not read, when Logged is -1.
	LogNote string `json:"log_note,omitempty"`
	// RowLockWaits is what MySQL/MariaDB counted (Innodb_row_lock_waits)
	// over the run: every row lock wait of the server, of any duration.
	RowLockWaits int64 `json:"row_lock_waits,omitempty"`
}

// sampler records the lock waits of the pool's statements from pg_locks
// until stopped.
type sampler struct {
	mu      sync.Mutex
	waits   map[stmtKey]span
	stop    chan struct{}
	stopped chan struct{}
}

// stmtKey is one statement of one backend.
type stmtKey struct {
	pid   int
	start string // pg_stat_activity.query_start
}

// span is how long a statement had been waiting when last seen: from the
// earliest waitstart seen to the latest sample, in seconds since the epoch.
type span struct{ first, last float64 }

func (o *observer) sample(ctx context.Context) *sampler {
	s := &sampler{waits: map[stmtKey]span{}, stop: make(chan struct{}), stopped: make(chan struct{})}
	go func() {
		defer close(s.stopped)
		t := time.NewTicker(o.every)
		defer t.Stop()
		for {
			select {
			case <-s.stop:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
			var rows *sql.Rows
			var err error
			if o.mysql {
				// trx_wait_started has whole seconds only: the span of a wait is
				// measured by the samples (150 ms apart), from the server's clock.
				rows, err = o.db.QueryContext(ctx, `SELECT trx_mysql_thread_id, CONCAT(trx_id, '@', trx_wait_started),
					UNIX_TIMESTAMP(NOW(6)), UNIX_TIMESTAMP(NOW(6))
					FROM information_schema.INNODB_TRX WHERE trx_state = 'LOCK WAIT'`)
			} else {
				// waitstart is PostgreSQL 14's: on 13 (through to_jsonb it is
				// NULL there) a wait counts from its statement's start.
				rows, err = o.db.QueryContext(ctx, `SELECT l.pid, a.query_start::text,
				EXTRACT(EPOCH FROM COALESCE((to_jsonb(l) ->> 'waitstart')::timestamptz, a.query_start)), EXTRACT(EPOCH FROM clock_timestamp())
				FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
				WHERE NOT l.granted AND a.query_start IS NOT NULL
				AND a.application_name = $1 AND a.datname = current_database()`, o.app)
			}
			if err != nil {
				continue
			}
			s.mu.Lock()
			for rows.Next() {
				var k stmtKey
				var waitstart, now float64
				if rows.Scan(&k.pid, &k.start, &waitstart, &now) == nil {
					sp, seen := s.waits[k]
					if !seen || waitstart < sp.first {
						sp.first = waitstart
					}
					sp.last = max(sp.last, now)
					s.waits[k] = sp
				}
			}
			s.mu.Unlock()
			rows.Close()
		}
	}()
	return s
}

// finish stops sampling and adds the waits of the given backends to w.
func (s *sampler) finish(w *LockWaits, threshold time.Duration, pids map[int]bool) {
	close(s.stop)
	<-s.stopped
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, sp := range s.waits {
		if !pids[k.pid] {
			continue
		}
		ms := (sp.last - sp.first) * 1000
		w.Sampled++
		if ms >= float64(threshold.Milliseconds()) {
			w.SampledOver++
		}
		w.LongestMs = max(w.LongestMs, ms)
	}
}

// parseLog counts the logged lock waits of the given backends in a piece of
// server log.
func parseLog(text string, pids map[int]bool, w *LockWaits) {
	lw := detect.ParseLockWaitLog(text, func(pid int) bool { return pids[pid] })
	w.Logged = lw.Waits
	w.LoggedRelations = lw.Relations
	w.LongestMs = max(w.LongestMs, lw.LongestMs)
}
