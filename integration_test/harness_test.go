package integration_test

import (
	"context"
	stdsql "database/sql"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"entgo.io/ent/dialect"
	entsql "entgo.io/ent/dialect/sql"
	"entgo.io/ent/dialect/sql/schema"
	"github.com/glebarez/sqlite"
	"github.com/hotcounter/hotcounter/entcounter"
	"github.com/hotcounter/hotcounter/gormcounter"
	"github.com/hotcounter/hotcounter/integration_test/ent"
	"github.com/hotcounter/hotcounter/integration_test/ent/migrate"
	_ "github.com/hotcounter/hotcounter/integration_test/ent/runtime"
	"github.com/hotcounter/hotcounter/internal/testdb"
	_ "github.com/jackc/pgx/v5/stdlib"
	"gorm.io/driver/mysql"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

// hammer runs writers goroutines that each call inc n times, and returns the
// number of calls that succeeded. Every failure fails the test.
// errStop, returned by a hammer's increment, ends that writer without an
// error (and without counting).
var errStop = errors.New("stop")

func hammer(t *testing.T, writers, n int, inc func() error) int64 {
	t.Helper()
	var ok atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < n; i++ {
				if err := inc(); err != nil {
					if errors.Is(err, errStop) {
						return
					}
					errs <- err
					return
				}
				ok.Add(1)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("increment failed: %v", err)
	}
	return ok.Load()
}

// watchNeverBackwards starts one reader per post that reads value(id) over
// and over. The returned stop ends them, waits for them, and returns the
// first read error, or a report of a value that went backwards (named what).
func watchNeverBackwards[K comparable](ids []K, what string, value func(id K) (int64, error)) (stop func() error) {
	var readerErr atomic.Value
	ctx, cancel := context.WithCancel(context.Background())
	var readers sync.WaitGroup
	for _, id := range ids {
		readers.Add(1)
		go func(id K) {
			defer readers.Done()
			var last int64
			for ctx.Err() == nil {
				v, err := value(id)
				if err != nil {
					readerErr.Store(err)
					return
				}
				if v < last {
					readerErr.Store(fmt.Errorf("post %v: %s went from %d to %d", id, what, last, v))
					return
				}
				last = v
				// A read a millisecond: hundreds a second interleave with the
				// writes, without spinning a core under -race.
				time.Sleep(time.Millisecond)
			}
		}(id)
	}
	return func() error {
		cancel()
		readers.Wait()
		err, _ := readerErr.Load().(error)
		return err
	}
}

// writersFor is the load of the concurrency tests: 32 writers, 25
// increments each, on the servers (enough to meet on every slot row, and
// to run in seconds under -race on two busy cores); 8 on SQLite, which has
// one writer at a time anyway. Their tests open pools of writersPool connections.
const writersPool = 40

func writersFor(k dbKind) (writers, each int) {
	if k == lite {
		return 8, 25
	}
	return 32, 25
}

// slotRowsAll returns (rows, sum of n) over the whole post_views_slots table.
func slotRowsAll(t testing.TB, db *gorm.DB) (int64, int64) {
	t.Helper()
	var rows, sum int64
	must(t, db.Raw("SELECT COUNT(*), COALESCE(SUM(n), 0) FROM post_views_slots").Row().Scan(&rows, &sum))
	return rows, sum
}

// isDeadlock reports a deadlock as PostgreSQL (40P01) and InnoDB (1213) report it.
func isDeadlock(err error) bool {
	s := err.Error()
	return strings.Contains(s, "40P01") || strings.Contains(s, "1213") || strings.Contains(strings.ToLower(s), "deadlock")
}

// inTx runs fn in a transaction of client, committing if it returns nil.
func inTx(ctx context.Context, c *ent.Client, fn func(tx *ent.Tx) error) error {
	tx, err := c.Tx(ctx)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		return errors.Join(err, tx.Rollback())
	}
	return tx.Commit()
}

// entEnv is one test's database seen through ent (and through GORM, for
// cross-ORM checks and raw SQL).
type entEnv struct {
	*env
	client *ent.Client
	// sqlDB is client's connection pool, which a second client with other
	// settings shares (sharedEnt), so that a test holds no more
	// connections than it reserved.
	sqlDB *stdsql.DB
	stmts atomic.Int64 // statements ent sent
	// selects counts the statements ent sent that are plain reads (SELECT
	// ...), as ent's driver logs them.
	selects atomic.Int64
	// withCounters: the test's ent migration ran with
	// entcounter.WithCounters; whole migrates the rest (entEveryTable).
	withCounters bool
	whole        sync.Once
	wholeErr     error
}

// openEnt returns ent and GORM clients on one fresh database. ent owns the
// schema unless migrate is false.
func openEnt(t testing.TB, kind dbKind, migrate bool, opts ...option) *entEnv {
	t.Helper()
	return withEnt(t, open(t, kind, opts...), migrate)
}

// withEnt adds an ent client to e's database, migrated by ent if migrate:
// the tables e.entRoots names and those they need, posts' (entPosts)
// unless the test asked for others (entTables) or for every table
// (everyEntTable).
func withEnt(t testing.TB, e *env, migrate bool) *entEnv {
	t.Helper()
	if e.entRoots == nil {
		e.entRoots = entPosts
	}
	ee := &entEnv{env: e}
	db := openPool(t, e, e.pool)
	ee.sqlDB = db
	ee.client = ent.NewClient(ent.Driver(entDriverOn(ee, db)))
	if migrate {
		must(t, entMigrateOnly(context.Background(), ee.client, e.entRoots))
	}
	return ee
}

// entEveryTable migrates the tables of e's schema that its migration
// left out (entMigrateOnly), once, as its first migration did (with
// entcounter.WithCounters or without): for passes, which go over every
// counter of the client.
func (e *entEnv) entEveryTable(ctx context.Context) error {
	e.whole.Do(func() {
		if len(e.entRoots) == 0 {
			return // every table already
		}
		var opts []schema.MigrateOption
		if e.withCounters {
			opts = append(opts, entcounter.WithCounters(e.client))
		}
		e.wholeErr = entMigrate(ctx, e.client, opts...)
	})
	return e.wholeErr
}

// reopenEnt returns a new ent client on e's database, as another process
// would open it: its own pool, nothing learned of the database yet.
func reopenEnt(t testing.TB, e *entEnv) *ent.Client { return reopenEntPool(t, e, e.pool) }

// reopenEntPool is reopenEnt with a pool of at most conns connections.
func reopenEntPool(t testing.TB, e *entEnv, conns int) *ent.Client {
	t.Helper()
	return ent.NewClient(ent.Driver(entDriverOn(e, openPool(t, e.env, conns))))
}

// entDriver opens an ent driver of at most conns connections on e's
// database, closed when t ends, that calls sent with every statement as
// ent's debug driver logs it (driver.Query: query=... args=...).
func entDriver(t testing.TB, e *env, conns int, sent func(statement string)) dialect.Driver {
	t.Helper()
	return entDriverSending(e.kind, openPool(t, e, conns), sent)
}

// openPool opens a database/sql pool of at most conns connections on e's
// database, closed when t ends.
func openPool(t testing.TB, e *env, conns int) *stdsql.DB {
	t.Helper()
	return openPoolAt(t, e.kind, e.dsn, conns)
}

// openPoolAt opens a database/sql pool of at most conns connections on the
// database of kind at dsn, closed when t ends.
func openPoolAt(t testing.TB, kind dbKind, dsn string, conns int) *stdsql.DB {
	t.Helper()
	db, err := stdsql.Open(sqlDriverName(kind), dsn)
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(conns)
	db.SetMaxIdleConns(conns)
	t.Cleanup(func() { db.Close() })
	return db
}

// sqlDriverName is the database/sql driver of a database kind.
func sqlDriverName(kind dbKind) string {
	switch kind {
	case pg:
		return "pgx"
	case my:
		return "mysql"
	}
	return "sqlite"
}

// entDriverSending is an ent driver over db that calls sent with every
// statement as ent's debug driver logs it.
func entDriverSending(kind dbKind, db *stdsql.DB, sent func(statement string)) dialect.Driver {
	dial := dialect.SQLite
	switch kind {
	case pg:
		dial = dialect.Postgres
	case my:
		dial = dialect.MySQL
	}
	return dialect.DebugWithContext(entsql.OpenDB(dial, db), func(_ context.Context, a ...any) { sent(fmt.Sprint(a...)) })
}

// entDriverOn is an ent driver over db that counts e's statements.
func entDriverOn(e *entEnv, db *stdsql.DB) dialect.Driver {
	return entDriverSending(e.kind, db, func(statement string) {
		e.stmts.Add(1)
		if strings.Contains(statement, "query=SELECT ") {
			e.selects.Add(1)
		}
	})
}

// sharedEnt returns a new ent client on e's connection pool: its own
// settings and learned state, no connections of its own.
func sharedEnt(e *entEnv) *ent.Client { return ent.NewClient(ent.Driver(entDriverOn(e, e.sqlDB))) }

// sharedGorm returns a new *gorm.DB with gormcounter registered with cfg,
// on e.db's connection pool: its own plugin, no connections of its own.
func sharedGorm(t testing.TB, e *env, cfg gormcounter.Config) *gorm.DB {
	t.Helper()
	pool, err := e.db.DB()
	must(t, err)
	var d gorm.Dialector = &sqlite.Dialector{Conn: pool}
	switch e.kind {
	case pg:
		d = postgres.New(postgres.Config{Conn: pool})
	case my:
		d = mysql.New(mysql.Config{Conn: pool})
	}
	db, err := gorm.Open(d, &gorm.Config{Logger: e.log})
	must(t, err)
	must(t, db.Use(gormcounter.New(cfg)))
	return db
}

// entSchemaMu serializes ent's migrations of the generated, package-level
// migrate.Tables: ent sets them up in place as it migrates, so two at once
// race.
var entSchemaMu sync.Mutex

// entMigrate runs client.Schema.Create on a copy of migrate.Tables, its
// own, so that the many tests that start by migrating do not queue for one
// another: one at a time, 523 migrations held the lock for 366 s of a
// 452 s run of the integration tests.
func entMigrate(ctx context.Context, client *ent.Client, opts ...schema.MigrateOption) error {
	var tables []*schema.Table
	_ = oneMigrationAtATime(func() error { tables = copyTables(migrate.Tables); return nil })
	return migrate.Create(ctx, client.Schema, tables, opts...)
}

// entMigrateOnly is entMigrate of the tables roots names (every table
// when it is empty) and of the tables those need: the tables they
// reference, and every table all of whose references are among them
// (their slot and delta tables, their children, a join table between two
// of them). Of the 71 tables of the test schema a test uses a few, and
// creating, inspecting and dropping tables was two thirds of what
// PostgreSQL was seen doing during the suite.
func entMigrateOnly(ctx context.Context, client *ent.Client, roots []string, opts ...schema.MigrateOption) error {
	if len(roots) == 0 {
		return entMigrate(ctx, client, opts...)
	}
	var tables []*schema.Table
	_ = oneMigrationAtATime(func() error { tables = copyTables(tablesNeeded(migrate.Tables, roots)); return nil })
	return migrate.Create(ctx, client.Schema, tables, opts...)
}

// entCore names the tables of the conformance suite's ent models: what
// eachORM's ent migration creates unless the test names others.
var entCore = []string{modelPost, modelSkipPost, modelStory, modelReel, modelProduct}

// entPosts names posts, whose migration creates posts, authors, comments
// and their slot tables: what withEnt's migration creates unless the test
// names others.
var entPosts = []string{modelPost}

// tablesNeeded returns the tables of all that roots names, those they
// reference, and those all of whose references are among them, in the
// order of all.
func tablesNeeded(all []*schema.Table, roots []string) []*schema.Table {
	in := map[string]bool{}
	for _, r := range roots {
		in[r] = true
	}
	for grew := true; grew; {
		grew = false
		for _, t := range all {
			refs, inside := 0, 0
			for _, fk := range t.ForeignKeys {
				if refs++; in[fk.RefTable.Name] {
					inside++
				}
			}
			switch {
			case in[t.Name]:
				for _, fk := range t.ForeignKeys {
					if !in[fk.RefTable.Name] {
						in[fk.RefTable.Name], grew = true, true
					}
				}
			case refs > 0 && inside == refs:
				in[t.Name], grew = true, true
			}
		}
	}
	var out []*schema.Table
	for _, t := range all {
		if in[t.Name] {
			out = append(out, t)
		}
	}
	return out
}

// copyTables copies ent's description of tables, their columns, indexes
// and foreign keys, linked among themselves as the originals are (what
// ent's migration fills in as it goes is left for it to fill in again).
func copyTables(src []*schema.Table) []*schema.Table {
	tables := make(map[*schema.Table]*schema.Table, len(src))
	columns := make(map[*schema.Column]*schema.Column)
	for _, t := range src {
		c := schema.NewTable(t.Name)
		c.Schema, c.Annotation, c.Comment, c.View, c.Pos = t.Schema, t.Annotation, t.Comment, t.View, t.Pos
		for _, col := range t.Columns {
			cc := &schema.Column{Name: col.Name, Type: col.Type, SchemaType: col.SchemaType, Attr: col.Attr,
				Size: col.Size, Key: col.Key, Unique: col.Unique, Increment: col.Increment, Nullable: col.Nullable,
				Default: col.Default, Enums: col.Enums, Collation: col.Collation, Comment: col.Comment}
			columns[col] = cc
			c.Columns = append(c.Columns, cc)
		}
		tables[t] = c
	}
	each := func(cols []*schema.Column) []*schema.Column {
		out := make([]*schema.Column, len(cols))
		for i, col := range cols {
			out[i] = columns[col]
		}
		return out
	}
	out := make([]*schema.Table, len(src))
	for i, t := range src {
		c := tables[t]
		c.PrimaryKey = each(t.PrimaryKey)
		for _, idx := range t.Indexes {
			c.Indexes = append(c.Indexes, &schema.Index{Name: idx.Name, Unique: idx.Unique, Columns: each(idx.Columns), Annotation: idx.Annotation})
		}
		for _, fk := range t.ForeignKeys {
			c.ForeignKeys = append(c.ForeignKeys, &schema.ForeignKey{Symbol: fk.Symbol, Columns: each(fk.Columns),
				RefTable: tables[fk.RefTable], RefColumns: each(fk.RefColumns), OnUpdate: fk.OnUpdate, OnDelete: fk.OnDelete})
		}
		out[i] = c
	}
	return out
}

// oneMigrationAtATime runs migrate, an ent client's Schema.Create of a
// generated package's own migrate.Tables (or entMigrate's copy of them),
// while no other runs.
func oneMigrationAtATime(migrate func() error) error {
	entSchemaMu.Lock()
	defer entSchemaMu.Unlock()
	return migrate()
}

func eachEnt(t *testing.T, fn func(t *testing.T, e *entEnv), opts ...option) {
	t.Helper()
	eachDB(t, func(t *testing.T, e *env) { fn(t, withEnt(t, e, true)) }, opts...)
}

func entStatements(e *entEnv, fn func()) int64 {
	before := e.stmts.Load()
	fn()
	return e.stmts.Load() - before
}

// dbKind names a database the suites run on.
type dbKind string

const (
	pg   dbKind = "postgres"
	lite dbKind = "sqlite"
	my   dbKind = "mariadb"
)

var allKinds = selectedKinds(os.Getenv("HOTCOUNTER_DATABASES"))

// selectedKinds returns the databases a run covers: all three, or those
// names (comma-separated: postgres, sqlite, mariadb) lists, as .ci/run's
// runs of the conformance suite on other PostgreSQL majors ask for
// (HOTCOUNTER_DATABASES=postgres). A test of a database left out is
// skipped, saying so.
func selectedKinds(names string) []dbKind {
	if names == "" {
		return []dbKind{pg, lite, my}
	}
	var kinds []dbKind
	for _, k := range []dbKind{pg, lite, my} {
		if slices.Contains(strings.Split(names, ","), string(k)) {
			kinds = append(kinds, k)
		}
	}
	return kinds
}

// conformanceOnly is set by HOTCOUNTER_SUITE=conformance: a run of the
// conformance suite alone (the tests that run through eachORM,
// eachORMInTurn or a count scene's loop); any other test that opens a
// database is skipped.
var conformanceOnly = os.Getenv("HOTCOUNTER_SUITE") == "conformance"

// conformance holds the names of the tests of the conformance suite that
// have started (conformanceTest: eachORM, eachORMInTurn and the count
// scenes' loops).
var conformance sync.Map // test name -> struct{}

// conformanceTest marks t as a test of the conformance suite.
func conformanceTest(t *testing.T) { conformance.Store(t.Name(), struct{}{}) }

// inConformance reports whether name is a conformance test or one of its
// subtests.
func inConformance(name string) bool {
	for {
		if _, ok := conformance.Load(name); ok {
			return true
		}
		i := strings.LastIndexByte(name, '/')
		if i < 0 {
			return false
		}
		name = name[:i]
	}
}

// skipUnselected skips t, which opens a database of kind, when the run
// leaves that database out (HOTCOUNTER_DATABASES) or covers the
// conformance suite alone (HOTCOUNTER_SUITE) and t is not part of it.
func skipUnselected(t testing.TB, kind dbKind) {
	t.Helper()
	if !slices.Contains(allKinds, kind) {
		t.Skipf("HOTCOUNTER_DATABASES=%s leaves out %s", os.Getenv("HOTCOUNTER_DATABASES"), kind)
	}
	if conformanceOnly && !inConformance(t.Name()) {
		t.Skip("HOTCOUNTER_SUITE=conformance: not a conformance test")
	}
}

// counting is a GORM logger that counts the statements GORM sends, so tests
// can assert how many queries a load costs, and keeps the warnings. It logs
// nothing.
type counting struct {
	n atomic.Int64

	mu       sync.Mutex
	recent   []string // the last keptStatements statements, for failure messages
	warnings []string
}

// keptStatements is how many of the last statements a counting logger
// keeps: the few a failure message shows (every one kept, each copied at
// every statement, cost a test of thousands of writes quadratic time).
const keptStatements = 64

func (c *counting) LogMode(logger.LogLevel) logger.Interface { return c }

func (c *counting) Info(context.Context, string, ...any) {}

func (c *counting) Warn(_ context.Context, format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.warnings = append(c.warnings, fmt.Sprintf(format, args...))
}

// warned returns the warnings logged so far.
func (c *counting) warned() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.warnings)
}

func (c *counting) Error(context.Context, string, ...any) {}

func (c *counting) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n.Store(0)
	c.recent = nil
}

func (c *counting) count() int64 { return c.n.Load() }

// statements returns the last statements sent since the last reset (at
// most keptStatements).
func (c *counting) statements() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.recent)
}

func (c *counting) Trace(_ context.Context, _ time.Time, fc func() (string, int64), _ error) {
	c.n.Add(1)
	s, _ := fc()
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.recent) == keptStatements {
		c.recent = append(c.recent[:0], c.recent[1:]...)
	}
	c.recent = append(c.recent, s)
}

// env is one test's database.
type env struct {
	kind dbKind
	dsn  string
	db   *gorm.DB // with gormcounter registered
	log  *counting
	pool int // connections each pool of the test may open
	// entRoots: the tables ent migrations create (entMigrateOnly).
	entRoots []string
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

// option changes how open opens a database.
type option func(*openOptions)

type openOptions struct {
	cfg   *gorm.Config
	pool  int
	kinds []dbKind // eachDB's databases
	// unmigrated leaves eachORM's database empty: the test migrates.
	unmigrated bool
	// entRoots names the tables the test's ent migration creates, with
	// what they need (entMigrateOnly); nil: posts' (entPosts), or in
	// eachORM the conformance models' (entCore); empty: every table.
	entRoots []string
}

// entTables has the test's ent migration (withEnt, eachORM) create the
// tables roots names and those they need (entMigrateOnly).
func entTables(roots ...string) option { return func(o *openOptions) { o.entRoots = roots } }

// everyEntTable has the test's ent migration (withEnt, eachORM) create
// every table: for a test that runs what goes over every counter of the
// client (an ent pass, PrecreateExisting, InstallTriggers). In eachORM,
// whose adapter migrates the rest at the first pass (entEveryTable), for
// a test whose rollup loop runs beside its writers from their start, or
// that changes tables under a pass.
func everyEntTable() option { return func(o *openOptions) { o.entRoots = []string{} } }

// unmigrated has eachORM hand fn an empty database, which fn migrates
// (counterORM.migrate) after making what it needs there.
func unmigrated() option { return func(o *openOptions) { o.unmigrated = true } }

// on limits eachDB to the given databases.
func on(kinds ...dbKind) option { return func(o *openOptions) { o.kinds = kinds } }

// config opens the database with cfg (its Logger is replaced).
func config(cfg *gorm.Config) option { return func(o *openOptions) { o.cfg = cfg } }

// pool lets each of the test's pools open n connections (default
// defaultPool): for tests that run more writers at once.
func pool(n int) option { return func(o *openOptions) { o.pool = n } }

// defaultPool is the size of a test's connection pools unless it asks for
// more: enough for 16 writers and the checks beside them.
const defaultPool = 24

// open returns a fresh database of the given kind with gormcounter
// registered. The test runs in parallel with other tests from here on
// (see parallel), within the server's connection budget.
func open(t testing.TB, kind dbKind, opts ...option) *env {
	t.Helper()
	skipUnselected(t, kind)
	o := openOptions{pool: defaultPool}
	for _, opt := range opts {
		opt(&o)
	}
	if !underReservation(t.Name()) {
		// A test inside one that holds a reservation runs in its parent's
		// turn: run in parallel, it would wait for a turn while its parent,
		// waiting for it, holds connections that the tests holding the
		// turns wait for.
		parallel(t)
	}
	reserve(t, kind, o.pool)
	track(t)
	e := &env{kind: kind, log: &counting{}, pool: o.pool, entRoots: o.entRoots}
	switch kind {
	case pg:
		e.dsn = testdb.Postgres(t)
	case my:
		e.dsn = testdb.MySQL(t)
	default:
		e.dsn = testdb.SQLite(t)
	}
	cfg := &gorm.Config{}
	if o.cfg != nil {
		cfg = o.cfg
	}
	cfg.Logger = e.log
	db, err := gorm.Open(dialectorFor(kind, e.dsn), cfg)
	if err != nil {
		t.Fatalf("open %s: %v", kind, err)
	}
	e.limit(t, db)
	if err := db.Use(gormcounter.New(gormcounter.Config{})); err != nil {
		t.Fatalf("use: %v", err)
	}
	e.db = db
	return e
}

// limit caps db's pool at the test's size and closes it when the test ends.
func (e *env) limit(t testing.TB, db *gorm.DB) {
	t.Helper()
	sqlDB, err := db.DB()
	if err != nil {
		t.Fatal(err)
	}
	sqlDB.SetMaxOpenConns(e.pool)
	sqlDB.SetMaxIdleConns(e.pool)
	t.Cleanup(func() { sqlDB.Close() })
}

// withPlugin opens e's database once more, with gormcounter registered
// with cfg.
func withPlugin(t testing.TB, e *env, cfg gormcounter.Config) *gorm.DB {
	t.Helper()
	db, err := gorm.Open(dialectorFor(e.kind, e.dsn), &gorm.Config{Logger: e.log})
	if err != nil {
		t.Fatal(err)
	}
	e.limit(t, db)
	must(t, db.Use(gormcounter.New(cfg)))
	return db
}

// eachDB runs fn as a parallel subtest on every database kind, and the
// test itself in parallel with other tests.
//
// This is the loop over the databases: tests that run on some of them say
// which with on(kinds...).
func eachDB(t *testing.T, fn func(t *testing.T, e *env), opts ...option) {
	t.Helper()
	parallel(t)
	o := openOptions{kinds: allKinds}
	for _, opt := range opts {
		opt(&o)
	}
	for _, k := range o.kinds {
		if !slices.Contains(allKinds, k) {
			continue
		}
		t.Run(string(k), func(t *testing.T) {
			fn(t, open(t, k, opts...))
		})
	}
}

// Running tests in parallel. Each test has its own schema or database, so
// tests can run side by side; three limits keep them honest:
//   - a server takes so many connections (PostgreSQL 100 here): a test
//     reserves what its pools may open (reserve) and waits until the
//     server has that many to spare;
//   - a test that reads a server-wide figure (deadlocks, row lock waits,
//     the goroutines of the process) runs alone on that server (exclusive);
//   - -test.parallel (TestMain sets 8 unless given) bounds how many run.

var (
	parallelOnce sync.Map // testing.TB -> struct{}: t.Parallel called
	reserved     sync.Map // reservation -> struct{}: what a test holds
	reserving    sync.Map // test name -> struct{}: it holds a reservation

	// budgets are the connections tests may hold at once per server: its
	// max_connections less what administration and stragglers use.
	budgets = map[dbKind]*budget{pg: newBudget(84), my: newBudget(130)}

	// servers are held shared by every test that uses a database kind, and
	// exclusively by a test that reads figures of the whole server.
	servers = map[dbKind]*server{pg: {}, my: {}, lite: {}}
)

// reservation is a test's hold on a server: its name and the server.
type reservation struct {
	test string
	kind dbKind
}

// server is the sharing of one database server among tests.
type server struct {
	mu   sync.RWMutex
	rmu  sync.Mutex
	root string // the exclusive test's name, whose subtests share its hold
}

func (s *server) heldBy(name string) bool {
	s.rmu.Lock()
	defer s.rmu.Unlock()
	return s.root != "" && (name == s.root || strings.HasPrefix(name, s.root+"/"))
}

// parallel marks t (a *testing.T) parallel once.
func parallel(t testing.TB) {
	tt, ok := t.(*testing.T)
	if !ok {
		return
	}
	if _, done := parallelOnce.LoadOrStore(tt, struct{}{}); done {
		return
	}
	tt.Parallel()
}

// underReservation reports whether a test above the named one holds a
// reservation.
func underReservation(name string) bool {
	for i := strings.LastIndexByte(name, '/'); i >= 0; i = strings.LastIndexByte(name, '/') {
		name = name[:i]
		if _, held := reserving.Load(name); held {
			return true
		}
	}
	return false
}

// serial keeps t from running in parallel with its sibling subtests (for
// one that sets what another reads, such as a table name). Call it before
// open.
func serial(t *testing.T) { parallelOnce.Store(t, struct{}{}) }

// reserve takes n connections of kind's server budget for t (once per
// test and server), and a shared hold on the server, until t ends. A
// subtest shares what a test above it holds: it could not take more while
// its parent holds on, waiting for it.
func reserve(t testing.TB, kind dbKind, n int) {
	t.Helper()
	name := t.Name()
	for up := name; ; {
		if _, held := reserved.Load(reservation{up, kind}); held {
			return
		}
		i := strings.LastIndexByte(up, '/')
		if i < 0 {
			break
		}
		up = up[:i]
	}
	reserved.Store(reservation{name, kind}, struct{}{})
	reserving.Store(name, struct{}{})
	t.Cleanup(func() { reserving.Delete(name) })
	t.Cleanup(func() { reserved.Delete(reservation{name, kind}) })
	if s := servers[kind]; !s.heldBy(name) {
		s.mu.RLock()
		t.Cleanup(s.mu.RUnlock)
	}
	if b := budgets[kind]; b != nil {
		n += 2 // the schema's administrative connection, and a straggler
		b.acquire(n)
		t.Cleanup(func() { b.release(n) })
	}
}

// exclusive makes t run alone among the tests that use the given servers:
// for a test that reads figures of a whole server (deadlocks, row lock
// waits), which other tests would change. It runs in parallel with tests
// on other servers. Without kinds, t runs before all parallel tests, alone
// in the process (for a test that counts the process's goroutines). Call
// it first in the test.
func exclusive(t *testing.T, kinds ...dbKind) {
	t.Helper()
	if len(kinds) == 0 {
		parallelOnce.Store(t, struct{}{}) // never parallel
		return
	}
	parallel(t)
	for _, k := range kinds {
		s := servers[k]
		s.mu.Lock()
		s.rmu.Lock()
		s.root = t.Name()
		s.rmu.Unlock()
		t.Cleanup(func() {
			s.rmu.Lock()
			s.root = ""
			s.rmu.Unlock()
			s.mu.Unlock()
		})
	}
}

// budget is a counting semaphore of connections.
type budget struct {
	mu   sync.Mutex
	cond *sync.Cond
	free int
	size int
}

func newBudget(n int) *budget {
	b := &budget{free: n, size: n}
	b.cond = sync.NewCond(&b.mu)
	return b
}

func (b *budget) acquire(n int) {
	n = min(n, b.size)
	b.mu.Lock()
	defer b.mu.Unlock()
	for b.free < n {
		b.cond.Wait()
	}
	b.free -= n
}

func (b *budget) release(n int) {
	n = min(n, b.size)
	b.mu.Lock()
	b.free += n
	b.mu.Unlock()
	b.cond.Broadcast()
}

// waitLimit bounds a test that checks that something does not wait for a
// lock another transaction holds until the test ends: generous, since
// tests share two cores, and only ever reached when it does wait.
const waitLimit = 30 * time.Second

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

// TestMain runs the tests 8 at a time unless -test.parallel says
// otherwise, and names the tests that run long while they run. Both cores
// are busy throughout at 8: at 16 the integration tests took 416 s to 464 s
// against 440 s to 539 s at 8, within the machine's noise, and a test that
// depends on the whole server's sessions (a compaction pass that must not
// grow its table while others hold old snapshots) failed once at 16.
func TestMain(m *testing.M) {
	if job := os.Getenv(childEnv); job != "" {
		os.Exit(runChild(job))
	}
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		_ = flag.Set("test.parallel", "8")
	}
	testdb.Before = func(tb testing.TB, kind string) {
		skipUnselected(tb, map[string]dbKind{"postgres": pg, "mysql": my, "sqlite": lite}[kind])
	}
	stop := watchSlowTests(progressOut(), 30*time.Second)
	code := m.Run()
	stop()
	runAtExit()
	os.Exit(code)
}

// running holds the start of every test that opened a database.
var running sync.Map // name -> time.Time

func track(t testing.TB) {
	if _, loaded := running.LoadOrStore(t.Name(), time.Now()); !loaded {
		t.Cleanup(func() { running.Delete(t.Name()) })
	}
}

// watchSlowTests writes, every interval, the tests that have run longer
// than it, until stop is called.
func watchSlowTests(w io.Writer, interval time.Duration) (stop func()) {
	if w == nil {
		return func() {}
	}
	done := make(chan struct{})
	start := time.Now()
	go func() {
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			var slow []string
			running.Range(func(k, v any) bool {
				if d := time.Since(v.(time.Time)); d >= interval {
					slow = append(slow, fmt.Sprintf("%s (%s)", k, d.Round(time.Second)))
				}
				return true
			})
			sort.Strings(slow)
			if len(slow) > 0 {
				fmt.Fprintf(w, "integration_test %s: running %s\n", time.Since(start).Round(time.Second), strings.Join(slow, ", "))
			}
		}
	}()
	return func() { close(done) }
}

// progressOut is where progress goes: the terminal or pipe that the go
// command writes to, which sees it at once (go test holds back the
// output of a passing package until it ends, -v or not), or nil when the
// go command writes to a file, where a line from here could land over its
// own output.
func progressOut() io.Writer {
	f, err := os.OpenFile(fmt.Sprintf("/proc/%d/fd/1", os.Getppid()), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return nil
	}
	st, err := f.Stat()
	if err != nil || st.Mode()&(os.ModeNamedPipe|os.ModeCharDevice) == 0 {
		f.Close()
		return nil
	}
	return f
}

// innodbStatus reads a global status counter of the MariaDB server.
func innodbStatus(t *testing.T, db *gorm.DB, name string) int64 {
	t.Helper()
	var value int64
	must(t, db.Raw("SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = ?", name).Row().Scan(&value))
	return value
}

// hammerCount runs fn from writers goroutines each times, counting failures
// into failed instead of failing the test, and returns the successes.
func hammerCount(writers, each int, fn func() error, failed *int) int {
	type r struct{ ok, bad int }
	ch := make(chan r, writers)
	for w := 0; w < writers; w++ {
		go func() {
			var x r
			for i := 0; i < each; i++ {
				if err := fn(); err != nil {
					x.bad++
				} else {
					x.ok++
				}
			}
			ch <- x
		}()
	}
	ok := 0
	for w := 0; w < writers; w++ {
		x := <-ch
		ok += x.ok
		*failed += x.bad
	}
	return ok
}

// statements runs fn and returns how many statements GORM sent.
func statements(e *env, fn func()) int64 {
	e.log.reset()
	fn()
	return e.log.count()
}

// slotRows returns (rows, sum of n) of a slot table for one parent, read with
// plain SQL.
func slotRows(t testing.TB, db *gorm.DB, table, owner string, id any) (int64, int64) {
	t.Helper()
	var rows, sum int64
	must(t, db.Raw("SELECT COUNT(*), COALESCE(SUM(n), 0) FROM "+table+" WHERE "+owner+" = ?", id).Row().Scan(&rows, &sum))
	return rows, sum
}

// nonZeroSlots counts slot rows holding a value (pre-created rows hold 0).
func nonZeroSlots(t testing.TB, db *gorm.DB, table, owner string, id any) int64 {
	t.Helper()
	return rawInt(t, db, "SELECT COUNT(*) FROM "+table+" WHERE "+owner+" = ? AND n <> 0", id)
}

func must2(n int64, _ error) int64 { return n }

// errOf returns the error of a call that also returns a value the caller
// does not look at, such as what CompactPass did.
func errOf[T any](_ T, err error) error { return err }
