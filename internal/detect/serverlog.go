package detect

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/hotcounter/hotcounter/internal/countersql"
)

// ServerLog is a PostgreSQL server log read through SQL (pg_stat_file and
// pg_read_binary_file): it needs a superuser or pg_read_server_files.
type ServerLog struct {
	db   *sql.DB
	d    countersql.Postgres
	Path string
}

// FindServerLog finds the server log of a PostgreSQL database: path, or
// for "" and "auto" pg_current_logfile() when the logging collector runs,
// else the Debian default for the server's version. It fails when the log
// cannot be read.
func FindServerLog(ctx context.Context, db *sql.DB, path string) (ServerLog, error) {
	d, _ := countersql.For("postgres")
	pg, _ := d.OnPostgres()
	l := ServerLog{db: db, d: pg, Path: path}
	if path == "" || path == "auto" {
		var cur sql.NullString
		var major string
		query, args := build(d, false, pg.LogFile)
		if err := db.QueryRowContext(ctx, query, args...).Scan(&cur, &major); err != nil {
			return l, err
		}
		l.Path = "/var/log/postgresql/postgresql-" + major + "-main.log"
		if cur.Valid && cur.String != "" {
			l.Path = cur.String
		}
	}
	_, err := l.Size(ctx)
	return l, err
}

// Size is the log's size now.
func (l ServerLog) Size(ctx context.Context) (int64, error) {
	var size sql.NullInt64
	query, args := build(l.d.Dialect, false, func(w countersql.Writer) { l.d.LogSize(w, l.Path) })
	err := l.db.QueryRowContext(ctx, query, args...).Scan(&size)
	if err == nil && !size.Valid {
		err = fmt.Errorf("%s: no such file", l.Path)
	}
	return size.Int64, err
}

// ReadFrom returns what the log gained since offset. A log that shrank was
// rotated or truncated meanwhile: what it held is unknown, and that is an
// error, not an empty log.
func (l ServerLog) ReadFrom(ctx context.Context, offset int64) (string, error) {
	end, err := l.Size(ctx)
	if err != nil {
		return "", err
	}
	if end < offset {
		return "", fmt.Errorf("the server log %s shrank from %d to %d bytes (rotated?)", l.Path, offset, end)
	}
	if end == offset {
		return "", nil
	}
	var text []byte
	query, args := build(l.d.Dialect, false, func(w countersql.Writer) { l.d.LogRead(w, l.Path, offset, end-offset) })
	err = l.db.QueryRowContext(ctx, query, args...).Scan(&text)
	return string(text), err
}

// LoggedWaits is what a piece of server log says of lock waits
// (log_lock_waits: "still waiting for ... after" lines).
type LoggedWaits struct {
	// Waits counts the waits logged, Relations those by the relation the
	// wait's CONTEXT names (waits on a row), and LongestMs is the longest
	// wait that ended ("acquired ... after").
	Waits     int            `json:"waits"`
	Relations map[string]int `json:"relations,omitempty"`
	LongestMs float64        `json:"longest_ms"`
	// RelationIDs counts the waits for a row's tuple lock, which the log
	// names by ids: "database oid/relation oid".
	RelationIDs map[string]int `json:"relation_ids,omitempty"`
}

var (
	stillWaiting = regexp.MustCompile(`process (\d+) still waiting for .* after ([\d.]+) ms`)
	acquired     = regexp.MustCompile(`process (\d+) acquired .* after ([\d.]+) ms`)
	inRelation   = regexp.MustCompile(`in relation "([^"]+)"`)
	onTuple      = regexp.MustCompile(`on tuple \(\d+,\d+\) of relation (\d+) of database (\d+)`)
	logMessage   = regexp.MustCompile(`\b(LOG|ERROR|WARNING|FATAL|PANIC|DEBUG\d?|INFO|NOTICE):  `)
)

// ParseLockWaitLog counts the lock waits logged in text by the backends
// keep accepts (nil: every backend). A message's DETAIL, CONTEXT and
// STATEMENT lines follow it; the context names the relation of a wait on
// a row.
func ParseLockWaitLog(text string, keep func(pid int) bool) LoggedWaits {
	w := LoggedWaits{Relations: map[string]int{}, RelationIDs: map[string]int{}}
	kept := func(s string) bool {
		pid, _ := strconv.Atoi(s)
		return keep == nil || keep(pid)
	}
	current := false // inside a counted "still waiting" message
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		line := sc.Text()
		if m := stillWaiting.FindStringSubmatch(line); m != nil {
			current = kept(m[1])
			if current {
				w.Waits++
				if t := onTuple.FindStringSubmatch(line); t != nil {
					w.RelationIDs[t[2]+"/"+t[1]]++
				}
			}
			continue
		}
		if m := acquired.FindStringSubmatch(line); m != nil {
			if ms, err := strconv.ParseFloat(m[2], 64); err == nil && kept(m[1]) {
				w.LongestMs = max(w.LongestMs, ms)
			}
			current = false
			continue
		}
		if logMessage.MatchString(line) && !strings.Contains(line, "CONTEXT:") {
			current = false
			continue
		}
		if current && strings.Contains(line, "CONTEXT:") {
			if m := inRelation.FindStringSubmatch(line); m != nil {
				w.Relations[m[1]]++
			}
		}
	}
	return w
}
