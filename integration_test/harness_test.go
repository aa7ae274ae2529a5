// Package integration_test runs hotcounter against real databases:
// PostgreSQL (a fresh schema per test) and SQLite (a fresh file per test).
//
// PostgreSQL is found through HOTCOUNTER_POSTGRES_DSN (default
// "host=127.0.0.1 port=5432 user=postgres dbname=test sslmode=disable").
// Without a reachable server the PostgreSQL cases skip, except under CI=true,
// where they fail.
package integration_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/glebarez/sqlite"
	"gorm.io/driver/mysql"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/hotcounter/hotcounter/gormcounter"
	"github.com/hotcounter/hotcounter/internal/testdb"
)

// dbKind names a database the suites run on.
type dbKind string

const (
	pg   dbKind = "postgres"
	lite dbKind = "sqlite"
	my   dbKind = "mariadb"
)

var allKinds = []dbKind{pg, lite, my}

// counting is a GORM logger that counts the statements GORM sends, so tests
// can assert how many queries a load costs. It logs nothing.
type counting struct {
	n   atomic.Int64
	sql atomic.Value // last statements, for failure messages
}

func (c *counting) LogMode(logger.LogLevel) logger.Interface { return c }
func (c *counting) Info(context.Context, string, ...any)     {}
func (c *counting) Warn(context.Context, string, ...any)     {}
func (c *counting) Error(context.Context, string, ...any)    {}
func (c *counting) reset()                                   { c.n.Store(0); c.sql.Store([]string(nil)) }
func (c *counting) count() int64                             { return c.n.Load() }
func (c *counting) statements() []string                     { s, _ := c.sql.Load().([]string); return s }
func (c *counting) Trace(_ context.Context, _ time.Time, fc func() (string, int64), _ error) {
	c.n.Add(1)
	s, _ := fc()
	old, _ := c.sql.Load().([]string)
	c.sql.Store(append(append([]string(nil), old...), s))
}

// env is one test's database.
type env struct {
	kind dbKind
	dsn  string
	db   *gorm.DB // with gormcounter registered
	log  *counting
}

func dialectorFor(kind dbKind, dsn string) gorm.Dialector {
	switch kind {
	case pg:
		return postgres.Open(dsn)
	case my:
		return mysql.Open(dsn)
	}
	return sqlite.Open(dsn)
}

// dialectName is GORM's name for the dialect of a database kind.
func dialectName(k dbKind) string {
	if k == my {
		return "mysql"
	}
	return string(k)
}

// open returns a fresh database of the given kind with gormcounter registered.
func open(t testing.TB, kind dbKind, cfgs ...*gorm.Config) *env {
	t.Helper()
	e := &env{kind: kind, log: &counting{}}
	switch kind {
	case pg:
		e.dsn = testdb.Postgres(t)
	case my:
		e.dsn = testdb.MySQL(t)
	default:
		e.dsn = testdb.SQLite(t)
	}
	cfg := &gorm.Config{Logger: e.log}
	if len(cfgs) > 0 {
		cfg = cfgs[0]
		cfg.Logger = e.log
	}
	db, err := gorm.Open(dialectorFor(kind, e.dsn), cfg)
	if err != nil {
		t.Fatalf("open %s: %v", kind, err)
	}
	sqlDB, err := db.DB()
	if err != nil {
		t.Fatal(err)
	}
	sqlDB.SetMaxOpenConns(64)
	sqlDB.SetMaxIdleConns(64)
	t.Cleanup(func() { sqlDB.Close() })
	if err := db.Use(gormcounter.New(gormcounter.Config{})); err != nil {
		t.Fatalf("use: %v", err)
	}
	e.db = db
	return e
}

// withPlugin opens e's database once more, with gormcounter registered
// with cfg.
func withPlugin(t testing.TB, e *env, cfg gormcounter.Config) *gorm.DB {
	t.Helper()
	db, err := gorm.Open(dialectorFor(e.kind, e.dsn), &gorm.Config{Logger: e.log})
	if err != nil {
		t.Fatal(err)
	}
	sqlDB, err := db.DB()
	if err != nil {
		t.Fatal(err)
	}
	sqlDB.SetMaxOpenConns(64)
	t.Cleanup(func() { sqlDB.Close() })
	must(t, db.Use(gormcounter.New(cfg)))
	return db
}

// eachDB runs fn as a subtest on every database kind.
func eachDB(t *testing.T, fn func(t *testing.T, e *env)) {
	t.Helper()
	for _, k := range allKinds {
		t.Run(string(k), func(t *testing.T) {
			fn(t, open(t, k))
		})
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// rawInt runs a scalar SQL query outside the plugin's reach.
func rawInt(t testing.TB, db *gorm.DB, q string, args ...any) int64 {
	t.Helper()
	var n *int64
	must(t, db.Raw(q, args...).Row().Scan(&n))
	if n == nil {
		return 0
	}
	return *n
}

func joined(ss []string) string { return strings.Join(ss, "\n") }
