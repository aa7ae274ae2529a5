// Package detect finds hot rows: it samples a database's lock views for a
// while and reports the rows that sessions queued on, hottest first, with
// the counter declaration that would spread their writes. It also reports
// the state of the counter tables hotcounter keeps (Status). The hotcounter
// command (cmd/hotcounter) prints what it finds.
package detect

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/hotcounter/hotcounter/internal/countersql"
)

// DB is a database to sample: an open pool and the kind of server behind
// it.
type DB struct {
	SQL *sql.DB
	// System is "postgresql", "mariadb", "mysql" or "sqlite" (OpenTelemetry's
	// db.system.name values).
	System string
	d      countersql.Dialect
	// views reads the database's lock views its own way: nil on SQLite,
	// which has no row locks.
	views lockViews
}

// Open opens dsn: a MySQL/MariaDB DSN (user@tcp(host:port)/db), an SQLite
// file (file:..., or a path ending in .db, .sqlite or .sqlite3), or else
// PostgreSQL (URL or key=value). It pings the server and finds out which
// kind it is.
func Open(ctx context.Context, dsn string) (*DB, error) {
	driver, dialect := "pgx", "postgres"
	switch {
	case strings.Contains(dsn, "@tcp(") || strings.Contains(dsn, "@unix("):
		driver, dialect = "mysql", "mysql"
	case strings.HasPrefix(dsn, "file:") || strings.HasSuffix(dsn, ".db") || strings.HasSuffix(dsn, ".sqlite") || strings.HasSuffix(dsn, ".sqlite3"):
		driver, dialect = "sqlite", "sqlite"
	}
	d, err := countersql.For(dialect)
	if err != nil {
		return nil, err
	}
	db, err := sql.Open(driver, dsn)
	if err != nil {
		return nil, err
	}
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, err
	}
	out := &DB{SQL: db, d: d, System: d.System("")}
	if pg, ok := d.OnPostgres(); ok {
		out.views = postgresViews{db: out, pg: pg}
	}
	if my, ok := d.OnMySQL(); ok {
		var version string
		query, _ := out.build(my.ServerVersion)
		if err := db.QueryRowContext(ctx, query).Scan(&version); err != nil {
			db.Close()
			return nil, err
		}
		out.System = d.System(version)
		out.views = innodbViews{db: out, locks: my.RowLocks, mysql8: out.System == "mysql"}
	}
	return out, nil
}

// lockViews is what a run does its database's own way: PostgreSQL's
// (postgres.go) and InnoDB's (mysql.go).
type lockViews interface {
	// begin readies a run of o: it returns the least time between samples,
	// the schema to report ("" for all), and what the run cannot see
	// (notes); end, called after the last sample, adds what the server
	// logged meanwhile.
	begin(ctx context.Context, o Options) (every time.Duration, schema string, notes []string, end func(context.Context, *Report), err error)
	// sample reads the sessions waiting on a row now.
	sample(ctx context.Context) ([]sampled, error)
	// tableWrites is a table's rows written so far, or -1 when unknown.
	tableWrites(ctx context.Context, schema, table string) int64
	// relationID is the table's id as the server log names it, or "".
	relationID(ctx context.Context, table string) string
	// privilege explains err when a missing privilege caused it.
	privilege(err error) error
}

// Close closes the pool.
func (db *DB) Close() error { return db.SQL.Close() }

// Options tune a sampling run.
type Options struct {
	// For is how long to sample (default 10s).
	For time.Duration
	// Every is the time between samples (default 50ms; at least 150ms on
	// MySQL/MariaDB, whose lock views refresh only after 100 ms unread).
	Every time.Duration
	// Schema limits the report to one schema (PostgreSQL) or database
	// (MySQL/MariaDB). Empty: the whole database on PostgreSQL, the DSN's
	// database on MySQL/MariaDB.
	Schema string
	// Progress, when set, is called after each sample.
	Progress func(Progress)
}

// Progress is how far a run has come.
type Progress struct {
	Elapsed, Total time.Duration
	Samples        int
	Waits          int // wait episodes seen so far
	Rows           int // distinct rows waited on so far
}

// Row is one hot row.
type Row struct {
	// Table is schema.table; Key the row's primary key as text (columns
	// joined by ", "), or on MySQL/MariaDB the lock data of Index when the
	// wait was on another index.
	Table string `json:"table"`
	Key   string `json:"key"`
	Index string `json:"index,omitempty"`
	// Sessions is how many distinct sessions were seen waiting on the row,
	// Waits how many waits the samples caught (a session that waited twice
	// counts twice; waits shorter than the time between samples are missed
	// in proportion). WaitSeconds estimates the total time sessions spent
	// waiting on the row: each waiter seen counts for the time between
	// samples. LongestWaitSeconds is the longest single wait seen.
	Sessions           int     `json:"sessions"`
	Waits              int     `json:"waits"`
	WaitSeconds        float64 `json:"wait_seconds"`
	LongestWaitSeconds float64 `json:"longest_wait_seconds"`
	// PeakWaiting is the most sessions seen waiting at once; MeanWriters
	// the mean number of writers on the row at once (those waiting and the
	// one holding it) over the samples that saw it busy: by Little's law,
	// the writes per second times the lock hold time.
	PeakWaiting int     `json:"peak_waiting"`
	MeanWriters float64 `json:"mean_writers"`
	// Samples is how many samples saw sessions waiting on the row.
	Samples int `json:"samples"`
	// Statement is the statement most often seen waiting on the row, and
	// Column the column it adds to, when it is an increment (SET c = c + ...).
	Statement string `json:"statement"`
	Column    string `json:"column,omitempty"`
	// LoggedWaits is how many waits on rows of the table the server log
	// recorded during the run (PostgreSQL with log_lock_waits on: waits
	// longer than deadlock_timeout, in any database, by table name).
	LoggedWaits int `json:"logged_waits,omitempty"`
	// TableWritesPerSecond is the rows written per second in the whole
	// table during the run (PostgreSQL's statistics; 0 where unknown).
	TableWritesPerSecond float64 `json:"table_writes_per_second,omitempty"`
	// Slots is the suggested slot count: MeanWriters times a margin of 2,
	// rounded up to a power of two, at least 4 and at most 1024.
	Slots int `json:"slots"`
	// GORM and Ent are the declarations to add.
	GORM string `json:"gorm"`
	Ent  string `json:"ent"`
}

// Report is what a run found.
type Report struct {
	System   string        `json:"system"`
	Duration time.Duration `json:"-"`
	Samples  int           `json:"samples"`
	Rows     []Row         `json:"rows"`
	// Unresolved counts, per table, the waits whose row could not be named
	// (PostgreSQL: the row had moved before its key was read).
	Unresolved map[string]int `json:"unresolved,omitempty"`
	// Logged is what the server log recorded of lock waits during the run
	// (PostgreSQL, where the role can read the log); nil when unread.
	Logged *LoggedWaits `json:"logged,omitempty"`
	// Notes say what the run could not see and how to let it.
	Notes []string `json:"notes,omitempty"`
}

// ErrPrivilege wraps an error caused by a missing privilege.
var ErrPrivilege = errors.New("missing privilege")

// sampled is one waiting session in one sample.
type sampled struct {
	session, schema, table, index, key string
	page, tuple                        int64
	started                            string        // when the wait began, as the server writes it
	waited                             time.Duration // how long it has lasted
	statement                          string
}

type rowID struct{ table, index, key string }

type tally struct {
	sessions        map[string]bool
	waits           map[string]bool // wait episodes: session and start
	waited, longest time.Duration
	peak, busySum   int
	samples         int
	statements      map[string]int
}

// row names the row s waits on, or the key another wait of its place
// named (places); false when neither names it. A wait on InnoDB's
// primary key names the row itself, with no index.
func (s sampled) row(places map[string]string) (rowID, bool) {
	id := rowID{table: s.schema + "." + s.table, index: s.index, key: s.key}
	if id.key == "" {
		id.key = places[s.place()]
	}
	if s.index == "PRIMARY" {
		id.index = ""
	}
	return id, id.key != ""
}

// place is where a PostgreSQL row version lives.
func (s sampled) place() string {
	return s.schema + "." + s.table + "(" + strconv.FormatInt(s.page, 10) + "," + strconv.FormatInt(s.tuple, 10) + ")"
}

// Detect samples db for o.For and returns the hot rows, hottest (longest
// total wait) first. A row is hot when it was seen waited on in at least
// two samples, or by at least two sessions at once.
func Detect(ctx context.Context, db *DB, o Options) (Report, error) {
	if o.For <= 0 {
		o.For = 10 * time.Second
	}
	if o.Every <= 0 {
		o.Every = 50 * time.Millisecond
	}
	rep := Report{System: db.System, Unresolved: map[string]int{}}
	if db.views == nil {
		return rep, errors.New("SQLite has one writer for the whole database: there are no row locks to wait on (hot rows show as SQLITE_BUSY in the application instead)")
	}
	every, schema, notes, end, err := db.views.begin(ctx, o)
	if err != nil {
		return rep, err
	}
	o.Every = every
	rep.Notes = append(rep.Notes, notes...)
	r := run{db: db, rep: &rep, schema: schema, tallies: map[rowID]*tally{}, tableWrites: map[string]int64{}}
	start := time.Now()
	ticker := time.NewTicker(o.Every)
	defer ticker.Stop()
	last := start
	for {
		waits, err := db.views.sample(ctx)
		if err != nil {
			return rep, db.privilege(err)
		}
		rep.Samples++
		now := time.Now()
		interval := now.Sub(last) // what this sample stands for
		if rep.Samples == 1 {
			interval = o.Every
		}
		last = now
		r.add(ctx, waits, interval)
		elapsed := time.Since(start)
		if o.Progress != nil {
			o.Progress(Progress{Elapsed: elapsed, Total: o.For, Samples: rep.Samples, Waits: r.seen, Rows: len(r.tallies)})
		}
		if elapsed >= o.For {
			break
		}
		select {
		case <-ctx.Done():
			return rep, ctx.Err()
		case <-ticker.C:
		}
	}
	rep.Duration = time.Since(start)
	end(ctx, &rep)
	r.report(ctx)
	return rep, nil
}

// run is what a Detect run has seen so far.
type run struct {
	db          *DB
	rep         *Report
	schema      string // "" for all
	tallies     map[rowID]*tally
	tableWrites map[string]int64 // rows written in each table before the run
	seen        int              // wait episodes
}

// add tallies one sample's waits, each standing for interval.
func (r *run) add(ctx context.Context, waits []sampled, interval time.Duration) {
	// Waiters queued on one row version (PostgreSQL) or record (InnoDB)
	// share its place: where the key of one of them was read, it names
	// them all.
	places := map[string]string{}
	for _, s := range waits {
		if s.key != "" {
			places[s.place()] = s.key
		}
	}
	busy := map[rowID]int{}
	for _, s := range waits {
		if r.schema != "" && s.schema != r.schema {
			continue
		}
		id, ok := s.row(places)
		if !ok {
			r.rep.Unresolved[id.table]++
			continue
		}
		if _, ok := r.tableWrites[id.table]; !ok {
			r.tableWrites[id.table] = r.db.views.tableWrites(ctx, s.schema, s.table)
		}
		t := r.tallies[id]
		if t == nil {
			t = &tally{sessions: map[string]bool{}, waits: map[string]bool{}, statements: map[string]int{}}
			r.tallies[id] = t
		}
		t.sessions[s.session] = true
		episode := s.session + "@" + s.started
		if s.started == "" {
			episode = s.session + "@" + strconv.Itoa(r.rep.Samples)
		}
		if !t.waits[episode] {
			t.waits[episode] = true
			r.seen++
		}
		t.longest = max(t.longest, s.waited)
		// Each waiter seen stands for the time between samples (sampling
		// as PostgreSQL's wait-event samplers do).
		t.waited += interval
		t.statements[oneLine(s.statement)]++
		busy[id]++
	}
	for id, n := range busy {
		t := r.tallies[id]
		t.samples++
		t.busySum += n + 1 // the holder as well
		t.peak = max(t.peak, n)
	}
}

// report puts the hot rows of the run into its Report, hottest first.
func (r *run) report(ctx context.Context) {
	rep := r.rep
	for table, before := range r.tableWrites {
		schema, name, _ := strings.Cut(table, ".")
		if after := r.db.views.tableWrites(ctx, schema, name); after > before && before >= 0 {
			r.tableWrites[table] = after - before
		} else {
			r.tableWrites[table] = 0
		}
	}
	for id, t := range r.tallies {
		if t.samples < 2 && t.peak < 2 {
			continue
		}
		row := Row{Table: id.table, Key: id.key, Index: id.index, Sessions: len(t.sessions), Waits: len(t.waits),
			PeakWaiting: t.peak, Samples: t.samples, MeanWriters: float64(t.busySum) / float64(t.samples)}
		row.WaitSeconds = t.waited.Seconds()
		row.LongestWaitSeconds = t.longest.Seconds()
		row.Statement = mostCommon(t.statements)
		row.Column = incrementedColumn(row.Statement)
		if w := r.tableWrites[id.table]; w > 0 {
			row.TableWritesPerSecond = float64(w) / rep.Duration.Seconds()
		}
		if rep.Logged != nil {
			row.LoggedWaits = rep.Logged.Relations[strings.TrimPrefix(id.table, schemaOf(id.table)+".")] +
				rep.Logged.RelationIDs[r.db.views.relationID(ctx, id.table)]
		}
		row.Slots = slotsFor(row.MeanWriters)
		row.GORM, row.Ent = declarations(row.Column, row.Slots)
		rep.Rows = append(rep.Rows, row)
	}
	sort.Slice(rep.Rows, func(i, j int) bool {
		a, b := rep.Rows[i], rep.Rows[j]
		if a.WaitSeconds != b.WaitSeconds {
			return a.WaitSeconds > b.WaitSeconds
		}
		if a.Waits != b.Waits {
			return a.Waits > b.Waits
		}
		return a.Table+a.Key < b.Table+b.Key
	})
	if rep.Rows == nil {
		rep.Rows = []Row{}
	}
}

// scanWaits reads the rows of a lock views query.
func scanWaits(ctx context.Context, db *DB, query string, args []any) ([]sampled, error) {
	rows, err := db.SQL.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []sampled
	for rows.Next() {
		var s sampled
		var us int64
		if err := rows.Scan(&s.session, &s.schema, &s.table, &s.index, &s.key, &s.page, &s.tuple, &s.started, &us, &s.statement); err != nil {
			return nil, err
		}
		s.waited = time.Duration(us) * time.Microsecond
		out = append(out, s)
	}
	return out, rows.Err()
}

// privilege explains err when a missing privilege caused it, the
// database's way.
func (db *DB) privilege(err error) error {
	if db.views != nil {
		return db.views.privilege(err)
	}
	return privilege(err)
}

// privilege explains an error caused by a missing privilege that every
// database reports alike: SELECT on a table.
func privilege(err error) error {
	if strings.Contains(strings.ToLower(err.Error()), "permission denied") {
		return fmt.Errorf("%w: naming the row needs SELECT on its table: %v", ErrPrivilege, err)
	}
	return err
}

// build renders a statement for database/sql.
func (db *DB) build(fn func(countersql.Writer)) (string, []any) {
	return build(db.d, db.System == "sqlite", fn)
}

func build(d countersql.Dialect, sqlite bool, fn func(countersql.Writer)) (string, []any) {
	w := &writer{mysql: d.MySQL(), sqlite: sqlite}
	fn(w)
	return w.b.String(), w.args
}

type writer struct {
	b             strings.Builder
	args          []any
	mysql, sqlite bool
}

func (w *writer) WriteString(s string) { w.b.WriteString(s) }

func (w *writer) Ident(name string) { w.b.WriteString(countersql.QuoteIdent(name, w.mysql)) }

func (w *writer) Arg(v any) {
	w.args = append(w.args, v)
	if w.mysql || w.sqlite {
		w.b.WriteString("?")
		return
	}
	w.b.WriteString("$" + strconv.Itoa(len(w.args)))
}

// schemaOf is the schema part of schema.table.
func schemaOf(table string) string {
	schema, _, _ := strings.Cut(table, ".")
	return schema
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	return s
}

func mostCommon(m map[string]int) string {
	best, n := "", -1
	for s, c := range m {
		if c > n || (c == n && s < best) {
			best, n = s, c
		}
	}
	return best
}

var increment = regexp.MustCompile("(?i)\\bSET\\s+[`\"]?(\\w+)[`\"]?\\s*=\\s*(?:COALESCE\\s*\\(\\s*)?(?:[`\"]?\\w+[`\"]?\\.)?[`\"]?(\\w+)[`\"]?")

// incrementedColumn returns the column an UPDATE adds to (SET c = c + ...),
// or "".
func incrementedColumn(statement string) string {
	m := increment.FindStringSubmatch(statement)
	if m == nil || !strings.EqualFold(m[1], m[2]) {
		return ""
	}
	return m[1]
}

// slotsFor applies the sizing rule: slots >= writes/s x lock hold time x
// margin, where writes/s x hold time is the mean number of writers on the
// row at once; margin 2, rounded up to a power of two within [4, 1024].
func slotsFor(writers float64) int {
	n := int(math.Ceil(writers * 2))
	slots := 4
	for slots < n && slots < 1024 {
		slots *= 2
	}
	return slots
}

// declarations returns the GORM and ent declarations of a counter on
// column with the given slots.
func declarations(column string, slots int) (string, string) {
	if column == "" {
		return "", ""
	}
	field := goName(column)
	return fmt.Sprintf("%s int64 `gorm:\"counter:slots=%d\"`", field, slots),
		fmt.Sprintf("entcounter.Counter(%q, entcounter.Slots(%d))", column, slots)
}

// goName is GORM's field name for a column: like_count -> LikeCount.
func goName(column string) string {
	var b strings.Builder
	up := true
	for _, r := range column {
		if r == '_' {
			up = true
			continue
		}
		if up {
			r = unicode.ToUpper(r)
			up = false
		}
		b.WriteRune(r)
	}
	return b.String()
}
