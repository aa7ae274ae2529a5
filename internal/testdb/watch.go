package testdb

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// A test whose server crashed or restarted must say so: a statement that
// crashes the server is the worst thing the library can send, and the
// error the test sees ("invalid connection", "unexpected EOF") does not
// name it. Every test that takes a database from this package notes when
// its server started; when the test ends it asks again, and fails if the
// server is gone or started anew, with the tail of the server's log.

// A server's identity: its start, as the server states it (a restart
// changes it), and the file it logs to ("" if unknown).
type serverState struct {
	started string
	at      int64 // MySQL/MariaDB: started, in Unix seconds
	log     string
}

// same reports whether two states are of one run of the server. MariaDB
// states its start as an uptime in whole seconds, so the start worked out
// from it moves by a second between two reads.
func (s serverState) same(o serverState) bool {
	if s.at != 0 || o.at != 0 {
		return s.at-o.at <= 2 && o.at-s.at <= 2
	}
	return s.started == o.started
}

// lastLog remembers each server's log file by what, so that a test that
// finds the server already down can still show why.
var lastLog sync.Map // what -> path

// watchSQL records the state of the server behind admin and returns the
// check to run when the test ends: "" if the server is the one it was, or
// what happened to it, with its log's tail.
func watchSQL(admin *sql.DB, driverName, what string) (func() string, error) {
	before, err := sqlState(admin, driverName)
	if err != nil {
		return nil, fmt.Errorf("reading when %s started: %w", what, err)
	}
	if before.log != "" {
		lastLog.Store(what, before.log)
	}
	return func() string {
		after, err := sqlState(admin, driverName)
		switch {
		case err != nil:
			return fmt.Sprintf("%s stopped answering during this test (%v): did a statement crash it?%s", what, err, logTail(before.log))
		case !after.same(before):
			return fmt.Sprintf("%s restarted during this test (it started at %s, now at %s): did a statement crash it?%s",
				what, before.started, after.started, logTail(before.log))
		}
		return ""
	}, nil
}

// sqlState reads a PostgreSQL or MySQL/MariaDB server's start and log file.
func sqlState(db *sql.DB, driverName string) (serverState, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var s serverState
	if driverName == "mysql" {
		var logErr, dataDir string
		err := db.QueryRowContext(ctx, `SELECT CAST(UNIX_TIMESTAMP() - VARIABLE_VALUE AS SIGNED), @@log_error, @@datadir
			FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'UPTIME'`).Scan(&s.at, &logErr, &dataDir)
		if err != nil {
			return s, err
		}
		s.started = time.Unix(s.at, 0).UTC().Format(time.RFC3339)
		if logErr != "" && !filepath.IsAbs(logErr) {
			logErr = filepath.Join(dataDir, logErr)
		}
		s.log = logErr
		return s, nil
	}
	var current sql.NullString
	var dataDir, cluster string
	err := db.QueryRowContext(ctx, `SELECT pg_postmaster_start_time()::text, pg_current_logfile(),
		current_setting('data_directory'), current_setting('cluster_name')`).Scan(&s.started, &current, &dataDir, &cluster)
	if err != nil {
		return s, err
	}
	switch {
	case current.Valid:
		s.log = current.String
		if !filepath.IsAbs(s.log) {
			s.log = filepath.Join(dataDir, s.log)
		}
	case cluster != "":
		// Debian's pg_ctlcluster sends a cluster's stderr (cluster_name
		// "15/main") to /var/log/postgresql/postgresql-15-main.log.
		s.log = "/var/log/postgresql/postgresql-" + strings.ReplaceAll(cluster, "/", "-") + ".log"
	}
	return s, nil
}

// watchRedis is watchSQL for a Redis server, whose run_id changes with
// every start.
func watchRedis(rdb *redis.Client, what string) (func() string, error) {
	state := func() (string, string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		info, err := rdb.Info(ctx, "server").Result()
		if err != nil {
			return "", "", err
		}
		var id string
		for _, line := range strings.Split(info, "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "run_id:"); ok {
				id = v
			}
		}
		logFile := ""
		if kv, err := rdb.ConfigGet(ctx, "logfile").Result(); err == nil {
			logFile = kv["logfile"]
		}
		return id, logFile, nil
	}
	before, logFile, err := state()
	if err != nil {
		return nil, fmt.Errorf("reading the run_id of %s: %w", what, err)
	}
	return func() string {
		after, _, err := state()
		switch {
		case err != nil:
			return fmt.Sprintf("%s stopped answering during this test (%v)%s", what, err, logTail(logFile))
		case after != before:
			return fmt.Sprintf("%s restarted during this test (run_id %s, now %s)%s", what, before, after, logTail(logFile))
		}
		return ""
	}, nil
}

// logTail returns the last lines of the log at path, as a message's end:
// 80, where MariaDB's report of a crash starts (mariadbd got signal 11).
func logTail(path string) string {
	if path == "" {
		return " (its log file is unknown)"
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf(" (its log %s: %v)", path, err)
	}
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	lines = lines[max(0, len(lines)-80):]
	return fmt.Sprintf("\nthe last %d lines of %s:\n%s", len(lines), path, bytes.Join(lines, []byte("\n")))
}

// logLinesAbout returns the lines of the log at path that name word (a
// test's database), as a message's end, or "" if there are none. MariaDB
// logs why it dropped a connection ("Aborted connection 42 to db: 'hc_…'
// … (Got an error reading communication packets)"), which the client sees
// only as "invalid connection".
func logLinesAbout(path, word string) string {
	if path == "" {
		return ""
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf(" (its log %s: %v)", path, err)
	}
	var found [][]byte
	for _, line := range bytes.Split(b, []byte("\n")) {
		if bytes.Contains(line, []byte(word)) {
			found = append(found, line)
		}
	}
	if len(found) == 0 {
		return ""
	}
	found = found[max(0, len(found)-40):]
	return fmt.Sprintf("\nwhat %s says of %s:\n%s", path, word, bytes.Join(found, []byte("\n")))
}

// knownLogTail is logTail of the log a server named what was last seen
// writing, or of the log Debian's packages give it, for a server that is
// down already.
func knownLogTail(what, driverName string) string {
	if p, ok := lastLog.Load(what); ok {
		return logTail(p.(string))
	}
	pattern := "/var/log/mysql/error.log"
	if driverName != "mysql" {
		pattern = "/var/log/postgresql/postgresql-*.log"
	}
	if logs, _ := filepath.Glob(pattern); len(logs) == 1 {
		return logTail(logs[0])
	}
	return ""
}
