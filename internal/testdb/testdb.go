// Package testdb hands tests an isolated database on a real server: a fresh
// PostgreSQL schema or MySQL/MariaDB database per test (dropped afterwards),
// or a fresh SQLite file.
//
// Where the servers are found:
//
//	HOTCOUNTER_POSTGRES_DSN  default "host=127.0.0.1 port=5432 user=postgres dbname=test sslmode=disable"
//	HOTCOUNTER_MYSQL_DSN     default "root@tcp(127.0.0.1:3306)/test"
//	HOTCOUNTER_REDIS_ADDR    default "127.0.0.1:6379" (a key prefix per test)
//	HOTCOUNTER_CITUS_DSN     no default: a Citus coordinator, for the tests of Citus
//
// When the server cannot be reached the test is skipped, except under CI=true,
// where it fails: CI must never pass by testing nothing.
//
// MySQL needs the "mysql" database/sql driver registered by the caller
// (gorm.io/driver/mysql and github.com/go-sql-driver/mysql register it), so
// that the library module does not depend on a MySQL driver.
package testdb

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" database/sql driver
	"github.com/redis/go-redis/v9"
)

// DefaultPostgresDSN is used when HOTCOUNTER_POSTGRES_DSN is unset.
const DefaultPostgresDSN = "host=127.0.0.1 port=5432 user=postgres dbname=test sslmode=disable"

// PostgresBaseDSN returns the server DSN from the environment or the default.
func PostgresBaseDSN() string {
	if dsn := os.Getenv("HOTCOUNTER_POSTGRES_DSN"); dsn != "" {
		return dsn
	}
	return DefaultPostgresDSN
}

// connect opens and pings an administrative connection to a server, or
// skips the test (fails it under CI) and returns nil when it is unreachable.
func connect(tb testing.TB, driverName, dsn, what string) *sql.DB {
	tb.Helper()
	admin, err := sql.Open(driverName, dsn)
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err = admin.PingContext(ctx)
		cancel()
	}
	if err != nil {
		if admin != nil {
			admin.Close()
		}
		unavailable(tb, what, err, knownLogTail(what, driverName))
		return nil
	}
	return admin
}

// unavailable skips the test, or fails it under CI, where it adds why
// (the tail of the server's log, if known).
func unavailable(tb testing.TB, what string, err error, why string) {
	tb.Helper()
	if os.Getenv("CI") == "true" {
		tb.Fatalf("%s is required under CI=true but unreachable: %v%s", what, err, why)
	}
	tb.Skipf("%s unreachable, skipping (set CI=true to make this a failure): %v", what, err)
}

// Postgres returns a DSN whose search_path is a new, empty schema that is
// dropped when the test ends. Every connection opened with it sees only that
// schema's tables, so tests can run in parallel.
func Postgres(tb testing.TB) string {
	tb.Helper()
	before(tb, "postgres")
	return schemaOn(tb, PostgresBaseDSN(), "PostgreSQL")
}

// Citus returns a DSN like Postgres's on the Citus coordinator that
// HOTCOUNTER_CITUS_DSN names (its schema is created on every node when a
// table in it is distributed), or skips the test when none is named: Citus
// is not on the CI machine, and its tests run by hand (docs/scaling.md).
func Citus(tb testing.TB) string {
	tb.Helper()
	base := os.Getenv("HOTCOUNTER_CITUS_DSN")
	if base == "" {
		tb.Skip("HOTCOUNTER_CITUS_DSN names no Citus coordinator")
	}
	return schemaOn(tb, base, "Citus")
}

// schemaOn creates a schema on the PostgreSQL server at base (named what in
// errors), dropped when the test ends, and returns base with it as the
// search_path.
func schemaOn(tb testing.TB, base, what string) string {
	tb.Helper()
	admin := connect(tb, "pgx", base, what+" ("+base+")")
	if admin == nil {
		return ""
	}
	schema := "hc_" + strings.ToLower(randomHex(6))
	if _, err := admin.Exec("CREATE SCHEMA " + schema); err != nil {
		admin.Close()
		tb.Fatalf("create schema: %v", err)
	}
	gone, err := watchSQL(admin, "pgx", what+" ("+base+")")
	if err != nil {
		admin.Close()
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		defer admin.Close()
		if why := gone(); why != "" {
			tb.Error(why)
			return
		}
		// Terminate stragglers (a test that failed mid-transaction) so DROP cannot hang.
		_, _ = admin.Exec(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity
			WHERE pid <> pg_backend_pid() AND query NOT ILIKE '%pg_stat_activity%'
			AND backend_type = 'client backend' AND application_name = $1`, schema)
		if _, err := admin.Exec("DROP SCHEMA " + schema + " CASCADE"); err != nil {
			tb.Errorf("drop schema %s: %v", schema, err)
		}
	})
	// Commits need not reach the disk: no test checks durability, and a
	// flush per commit would set the pace of the whole suite.
	return WithParams(base, map[string]string{"search_path": schema, "application_name": schema, "synchronous_commit": "off"})
}

// Durable returns a PostgreSQL DSN from Postgres with every commit flushed
// to disk, as production runs: for tests that measure lock waits, whose
// length the flush sets.
func Durable(dsn string) string {
	return WithParams(dsn, map[string]string{"synchronous_commit": "on"})
}

// WithParams adds connection parameters to a PostgreSQL DSN in either the
// URL or the keyword=value form.
func WithParams(dsn string, params map[string]string) string {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return dsn
		}
		q := u.Query()
		for k, v := range params {
			q.Set(k, v)
		}
		u.RawQuery = q.Encode()
		return u.String()
	}
	for k, v := range params {
		dsn += fmt.Sprintf(" %s=%s", k, v)
	}
	return dsn
}

// DefaultMySQLDSN is used when HOTCOUNTER_MYSQL_DSN is unset.
const DefaultMySQLDSN = "root@tcp(127.0.0.1:3306)/test"

// MySQL returns a DSN (go-sql-driver form) for a new, empty database on the
// MySQL or MariaDB server, dropped when the test ends.
func MySQL(tb testing.TB) string {
	tb.Helper()
	before(tb, "mysql")
	base := os.Getenv("HOTCOUNTER_MYSQL_DSN")
	if base == "" {
		base = DefaultMySQLDSN
	}
	if _, _, _, err := splitMySQLDSN(base); err != nil {
		tb.Fatalf("HOTCOUNTER_MYSQL_DSN: %v", err)
	}
	admin := connect(tb, "mysql", base, "MySQL/MariaDB ("+base+")")
	if admin == nil {
		return ""
	}
	name := "hc_" + strings.ToLower(randomHex(6))
	if _, err := admin.Exec("CREATE DATABASE " + name); err != nil {
		admin.Close()
		tb.Fatalf("create database: %v", err)
	}
	gone, err := watchSQL(admin, "mysql", "MySQL/MariaDB ("+base+")")
	if err != nil {
		admin.Close()
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		defer admin.Close()
		if why := gone(); why != "" {
			tb.Error(why)
			return
		}
		if tb.Failed() {
			if p, ok := lastLog.Load("MySQL/MariaDB (" + base + ")"); ok {
				if about := logLinesAbout(p.(string), name); about != "" {
					tb.Log(about)
				}
			}
		}
		if err := dropMySQL(admin, name); err != nil {
			tb.Errorf("drop database %s: %v", name, err)
		}
	})
	return withMySQLDatabase(base, name)
}

// dropMySQL drops database name. It first kills the sessions still in it
// (a test that failed mid-transaction) so that DROP cannot wait on them,
// and waits until they have ended: KILL only flags a session, which ends
// its statement at its next check. A DROP that finds a file it does not
// know in the database's directory fails ("can't rmdir", errno 39; seen
// once, after a trigger storm on MariaDB 10.11, with the cause not
// found): it is tried again, as a file that a statement still ending had
// made would be gone by then (the tables the first try dropped stay
// dropped). The error of the last try names what the server still lists
// in the database.
func dropMySQL(admin *sql.DB, name string) error {
	sessions := func() []int64 {
		rows, err := admin.Query("SELECT id FROM information_schema.processlist WHERE db = ? AND id <> CONNECTION_ID()", name)
		if err != nil {
			return nil
		}
		defer rows.Close()
		var ids []int64
		for rows.Next() {
			var id int64
			if rows.Scan(&id) == nil {
				ids = append(ids, id)
			}
		}
		return ids
	}
	for _, id := range sessions() {
		_, _ = admin.Exec(fmt.Sprintf("KILL %d", id))
	}
	for wait := time.Now().Add(10 * time.Second); len(sessions()) > 0 && time.Now().Before(wait); {
		time.Sleep(20 * time.Millisecond)
	}
	var err error
	for try := 0; try < 5; try++ {
		if _, err = admin.Exec("DROP DATABASE " + name); err == nil || !strings.Contains(err.Error(), "Error 1010") {
			return err
		}
		time.Sleep(time.Duration(try+1) * 200 * time.Millisecond)
	}
	var left []string
	if rows, qerr := admin.Query("SELECT table_name FROM information_schema.tables WHERE table_schema = ?", name); qerr == nil {
		for rows.Next() {
			var t string
			if rows.Scan(&t) == nil {
				left = append(left, t)
			}
		}
		rows.Close()
	}
	return fmt.Errorf("%w (after 5 tries; tables the server still lists there: %q; sessions in it: %v)", err, left, sessions())
}

// splitMySQLDSN splits a go-sql-driver DSN,
// [user[:password]@][net[(addr)]]/dbname[?params], into the part before the
// database name, the name and the parameters.
func splitMySQLDSN(dsn string) (head, db, params string, err error) {
	i := strings.LastIndexByte(dsn, '/')
	if i < 0 {
		return "", "", "", fmt.Errorf("%q has no /dbname", dsn)
	}
	head, rest := dsn[:i], dsn[i+1:]
	db, params, _ = strings.Cut(rest, "?")
	return head, db, params, nil
}

// withMySQLDatabase returns dsn naming database db instead, with
// parseTime=true.
func withMySQLDatabase(dsn, db string) string {
	head, _, params, _ := splitMySQLDSN(dsn)
	q, _ := url.ParseQuery(params)
	q.Set("parseTime", "true")
	return head + "/" + db + "?" + q.Encode()
}

// SQLite returns a DSN for a new database file in the test's temporary
// directory, with foreign keys on (cascades need them), WAL without a flush
// per commit, a busy timeout and immediate transactions (SQLite has one writer; taking the write lock at
// BEGIN avoids the read-then-write upgrade that fails without waiting).
func SQLite(tb testing.TB) string {
	tb.Helper()
	before(tb, "sqlite")
	return SQLiteFile(filepath.Join(tb.TempDir(), "test.db"))
}

// SQLiteFile returns the DSN that SQLite uses for the database file at path.
func SQLiteFile(path string) string {
	return "file:" + path + "?_pragma=foreign_keys(1)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_pragma=busy_timeout(60000)&_txlock=immediate"
}

// Before, when set, is called by Postgres, MySQL and SQLite before they
// make a database, with the server's kind ("postgres", "mysql",
// "sqlite"): a harness skips there the tests its run leaves out (set it
// in TestMain, before the tests run).
var Before func(tb testing.TB, kind string)

func before(tb testing.TB, kind string) {
	tb.Helper()
	if Before != nil {
		Before(tb, kind)
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}

// Redis returns a client of the Redis server (HOTCOUNTER_REDIS_ADDR,
// default 127.0.0.1:6379) and a key prefix of the test's own, whose keys
// are deleted when the test ends. Without a server the test is skipped,
// or fails under CI=true.
func Redis(tb testing.TB) (*redis.Client, string) {
	tb.Helper()
	addr := os.Getenv("HOTCOUNTER_REDIS_ADDR")
	if addr == "" {
		addr = "127.0.0.1:6379"
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := rdb.Ping(ctx).Err(); err != nil {
		rdb.Close()
		unavailable(tb, "Redis ("+addr+")", err, "")
		return nil, ""
	}
	prefix := "hctest" + strings.ToLower(randomHex(8))
	gone, err := watchRedis(rdb, "Redis ("+addr+")")
	if err != nil {
		rdb.Close()
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if why := gone(); why != "" {
			tb.Error(why)
		}
		ctx := context.Background()
		iter := rdb.Scan(ctx, 0, prefix+":*", 1000).Iterator()
		for iter.Next(ctx) {
			rdb.Del(ctx, iter.Val())
		}
		rdb.Close()
	})
	return rdb, prefix
}
