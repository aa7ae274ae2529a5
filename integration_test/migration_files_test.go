package integration_test

import (
	"context"
	stdsql "database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/fstest"
	"time"

	"ariga.io/atlas-provider-gorm/gormschema"
	"ariga.io/atlas/sdk/recordriver"
	atlasmigrate "ariga.io/atlas/sql/migrate"
	"entgo.io/ent/dialect"
	entsql "entgo.io/ent/dialect/sql"
	"entgo.io/ent/dialect/sql/schema"
	"github.com/pressly/goose/v3"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/hotcounter/hotcounter"
	"github.com/hotcounter/hotcounter/entcounter"
	"github.com/hotcounter/hotcounter/gormcounter"
	"github.com/hotcounter/hotcounter/integration_test/ent"
	"github.com/hotcounter/hotcounter/integration_test/ent/file"
	"github.com/hotcounter/hotcounter/integration_test/ent/migrate"
	"github.com/hotcounter/hotcounter/integration_test/entversions/plain"
	"github.com/hotcounter/hotcounter/integration_test/entversions/remarked"
	_ "github.com/hotcounter/hotcounter/integration_test/entversions/remarked/runtime"
	"github.com/hotcounter/hotcounter/integration_test/entversions/remarks"
	"github.com/hotcounter/hotcounter/integration_test/entversions/sum16"
)

// FilePost is migrated by files: every kind of counter, a count of its
// comments and, through the join table file_post_tags, a tag's count of
// posts (whose key deletes with the post: MySQL needs a trigger on posts).
type FilePost struct {
	ID           uint
	Title        string
	Likes        int64 `gorm:"counter"`
	Views        int64 `gorm:"counter:rollup"`
	Claps        int64 `gorm:"counter:append"`
	Stock        int64 `gorm:"counter:guarded"`
	CommentCount int64 `gorm:"counter:counts=FileComments"`
	FileComments []FileComment
	FileTags     []FileTag `gorm:"many2many:file_post_tags;constraint:OnDelete:CASCADE"`
}

// FileComment is a comment of a FilePost.
type FileComment struct {
	ID         uint
	FilePostID uint
	Approved   bool
}

// FileTag counts its posts through file_post_tags.
type FileTag struct {
	ID        uint
	PostCount int64      `gorm:"counter:counts=FilePosts"`
	FilePosts []FilePost `gorm:"many2many:file_post_tags;constraint:OnDelete:CASCADE"`
}

// FilePostV2 is FilePost as a later release declares it: a new sum
// counter and a new count, added by a second file over existing rows.
type FilePostV2 struct {
	ID            uint
	Title         string
	Likes         int64         `gorm:"counter"`
	Views         int64         `gorm:"counter:rollup"`
	Claps         int64         `gorm:"counter:append"`
	CommentCount  int64         `gorm:"counter:counts=FileComments"`
	Shares        int64         `gorm:"counter"`
	ApprovedCount int64         `gorm:"counter:counts=FileComments,where=approved = true"`
	FileComments  []FileComment `gorm:"foreignKey:FilePostID"`
}

func (FilePostV2) TableName() string { return "file_posts" }

// recordingLogger keeps the statements a dry run shows.
type recordingLogger struct {
	logger.Interface
	mu    sync.Mutex
	stmts []string
}

func (l *recordingLogger) Trace(_ context.Context, _ time.Time, fc func() (string, int64), err error) {
	sql, _ := fc()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stmts = append(l.stmts, sql)
}

// dryRunFile returns what a dry run of AutoMigrate of models shows, on e's
// database as it is, as a goose file.
func dryRunFile(t *testing.T, db *gorm.DB, models ...any) string {
	t.Helper()
	rec := &recordingLogger{Interface: logger.Discard}
	must(t, db.Session(&gorm.Session{DryRun: true, Logger: rec}).AutoMigrate(models...))
	var b strings.Builder
	b.WriteString("-- +goose Up\n")
	for _, st := range rec.stmts {
		if strings.HasPrefix(st, "SELECT") { // the catalog reads GORM logs beside what it shows
			continue
		}
		b.WriteString("-- +goose StatementBegin\n" + st + ";\n-- +goose StatementEnd\n")
	}
	return b.String()
}

// gooseUp applies files, named in order, to the database of kind at dsn
// with goose.
func gooseUp(t *testing.T, e *env, files ...string) {
	t.Helper()
	fsys := fstest.MapFS{}
	for i, f := range files {
		fsys[fmt.Sprintf("%05d_step.sql", i+1)] = &fstest.MapFile{Data: []byte(f)}
	}
	dialect := map[dbKind]goose.Dialect{pg: goose.DialectPostgres, my: goose.DialectMySQL, lite: goose.DialectSQLite3}[e.kind]
	p, err := goose.NewProvider(dialect, openPool(t, e, 2), fsys)
	must(t, err)
	if _, err := p.Up(context.Background()); err != nil {
		t.Fatalf("goose up: %v\n%s", err, strings.Join(files, "\n"))
	}
}

// catalog describes what a database holds, as migrations leave it: its
// tables and their columns, its triggers and, on PostgreSQL, the storage
// options of its tables. goose's own table is left out.
func catalog(t *testing.T, e *env, db *stdsql.DB) []string {
	t.Helper()
	var queries []string
	switch e.kind {
	case pg:
		queries = []string{
			`SELECT table_name || '.' || column_name || ' ' || data_type || ' ' || is_nullable || ' ' || COALESCE(column_default, '') FROM information_schema.columns WHERE table_schema = current_schema()`,
			`SELECT 'trigger ' || event_object_table || '.' || trigger_name || ' ' || event_manipulation FROM information_schema.triggers WHERE trigger_schema = current_schema()`,
			`SELECT 'options ' || c.relname || ' ' || array_to_string(c.reloptions, ',') FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = current_schema() AND c.reloptions IS NOT NULL`,
			`SELECT 'index ' || tablename || ' ' || replace(indexdef, current_schema() || '.', '') FROM pg_indexes WHERE schemaname = current_schema()`,
		}
	case my:
		queries = []string{
			`SELECT CONCAT(TABLE_NAME, '.', COLUMN_NAME, ' ', COLUMN_TYPE, ' ', IS_NULLABLE, ' ', COALESCE(COLUMN_DEFAULT, '')) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE()`,
			`SELECT CONCAT('trigger ', EVENT_OBJECT_TABLE, '.', TRIGGER_NAME, ' ', EVENT_MANIPULATION) FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = DATABASE()`,
			`SELECT CONCAT('index ', TABLE_NAME, ' ', INDEX_NAME, ' ', COLUMN_NAME, ' ', NON_UNIQUE) FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = DATABASE()`,
		}
	default:
		queries = []string{
			`SELECT m.name || '.' || p.name || ' ' || p.type || ' ' || p."notnull" || ' ' || COALESCE(p.dflt_value, '') FROM sqlite_master m JOIN pragma_table_info(m.name) p WHERE m.type = 'table'`,
			`SELECT 'trigger ' || tbl_name || '.' || name FROM sqlite_master WHERE type = 'trigger'`,
			`SELECT 'index ' || tbl_name || ' ' || name FROM sqlite_master WHERE type = 'index'`,
		}
	}
	var out []string
	for _, q := range queries {
		rows, err := db.Query(q)
		must(t, err)
		for rows.Next() {
			var s string
			must(t, rows.Scan(&s))
			if !strings.Contains(s, "goose_db_version") && !strings.Contains(s, "sqlite_sequence") {
				out = append(out, s)
			}
		}
		must(t, rows.Err())
		rows.Close()
	}
	slices.Sort(out)
	return out
}

// filePostCounts loads a post and returns its counters, and what its
// comments, as GORM's query returns them, add up to.
func filePostCounts(t *testing.T, db *gorm.DB, id uint) (FilePost, int64) {
	t.Helper()
	var p FilePost
	must(t, db.Preload("FileComments").First(&p, id).Error)
	return p, int64(len(p.FileComments))
}

// TestADatabaseMigratedByFilesCountsExactly: a team that migrates by files
// gets the whole schema from a dry run of AutoMigrate (GORM's DDL and the
// library's, nothing sent), applies it with goose, and never calls
// AutoMigrate. Increments of every kind, counts kept by triggers (create,
// move, delete, raw SQL, a cascade through a join table) and the passes
// are then exact. A second file made the same way adds a counter and a
// count over existing rows, which count from the start. The database so
// migrated has the same tables, columns, indexes, triggers and storage as
// one AutoMigrate migrated.
func TestADatabaseMigratedByFilesCountsExactly(t *testing.T) {
	t.Run("gorm", func(t *testing.T) { eachDB(t, gormByFiles) })
	t.Run("gorm, tables from atlas-provider-gorm", func(t *testing.T) { eachDB(t, gormByAtlasFiles) })
	t.Run("ent", func(t *testing.T) { eachDB(t, entByFiles) })
	t.Run("ent, a counter added by a second file", func(t *testing.T) { eachDB(t, entAddsACounterByFiles) })
	t.Run("ent, a count added by a second file", func(t *testing.T) { eachDB(t, entAddsACountByFiles) })
}

// entAddsACounterByFiles: a plain plays column (entversions/plain) becomes
// a counter (sum16) by a second pair of files, ent's (the slot table) and
// SchemaSQL's, over a reel that exists: its plays count on, the column
// adopted.
func entAddsACounterByFiles(t *testing.T, e *env) {
	ctx := context.Background()
	drv := entDriver(t, e, 4, func(string) {})
	v1 := plain.NewClient(plain.Driver(drv))
	var ddl1 strings.Builder
	must(t, oneMigrationAtATime(func() error { return v1.Schema.WriteTo(ctx, &ddl1) }))
	first := entGooseFile(ddl1.String())
	gooseUp(t, e, first)
	reel := v1.Reel.Create().SetPlays(5).SaveX(ctx)

	v2 := sum16.NewClient(sum16.Driver(drv))
	var ddl2 strings.Builder
	must(t, oneMigrationAtATime(func() error { return v2.Schema.WriteTo(ctx, &ddl2) }))
	script, err := entcounter.SchemaSQL(ctx, v2)
	must(t, err)
	gooseUp(t, e, first, entGooseFile(ddl2.String()), script.Goose())
	const writers = 8
	var wg sync.WaitGroup
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 5 {
				if err := v2.Reel.UpdateOneID(reel.ID).AddPlays(1).Exec(ctx); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if got := v2.Reel.GetX(ctx, reel.ID).Plays; got != 5+writers*5 {
		t.Errorf("after the second files and %d increments: plays %d; want %d", writers*5, got, 5+writers*5)
	}
}

// entAddsACountByFiles: a count of a reel's remarks (entversions/remarked)
// is added by a second pair of files, ent's (the slot table) and
// SchemaSQL's (its triggers, and the first count of the remarks that
// exist), over a reel that has remarks: it counts them, then 8 writers'
// remarks, a raw insert and a delete.
func entAddsACountByFiles(t *testing.T, e *env) {
	ctx := context.Background()
	pool := openPool(t, e, 4)
	drv := entDriverSending(e.kind, pool, func(string) {})
	v1 := remarks.NewClient(remarks.Driver(drv))
	var ddl1 strings.Builder
	must(t, oneMigrationAtATime(func() error { return v1.Schema.WriteTo(ctx, &ddl1) }))
	first := entGooseFile(ddl1.String())
	gooseUp(t, e, first)
	reel := v1.Reel.Create().SaveX(ctx)
	for range 3 {
		v1.Remark.Create().SetReelID(reel.ID).ExecX(ctx)
	}

	v2 := remarked.NewClient(remarked.Driver(drv))
	var ddl2 strings.Builder
	must(t, oneMigrationAtATime(func() error { return v2.Schema.WriteTo(ctx, &ddl2) }))
	script, err := entcounter.SchemaSQL(ctx, v2)
	must(t, err)
	gooseUp(t, e, first, entGooseFile(ddl2.String()), script.Goose())
	if got := v2.Reel.GetX(ctx, reel.ID).RemarkCount; got != 3 {
		t.Errorf("after the second files the reel counts %d remarks; it has 3", got)
	}
	const writers = 8
	var wg sync.WaitGroup
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 5 {
				if err := v2.Remark.Create().SetReelID(reel.ID).Exec(ctx); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	_, err = pool.ExecContext(ctx, fmt.Sprintf("INSERT INTO remarks (reel_id, kind) VALUES (%d, false)", reel.ID))
	must(t, err)
	v2.Remark.DeleteOneID(v2.Remark.Query().FirstIDX(ctx)).ExecX(ctx)
	has := v2.Remark.Query().CountX(ctx)
	if got := v2.Reel.GetX(ctx, reel.ID).RemarkCount; got != int64(has) || has != 3+writers*5 {
		t.Errorf("the reel counts %d remarks; it has %d (want %d)", got, has, 3+writers*5)
	}
}

// gormByFiles: the GORM half of TestADatabaseMigratedByFilesCountsExactly.
func gormByFiles(t *testing.T, e *env) {
	v1 := []any{&FilePost{}, &FileComment{}, &FileTag{}}
	first := dryRunFile(t, e.db, v1...)
	has, err := e.db.Migrator().GetTables()
	must(t, err)
	if len(has) != 0 {
		t.Fatalf("a dry run of AutoMigrate created %v", has)
	}
	gooseUp(t, e, first)
	posts := gormFilesWork(t, e)

	// A second file adds a counter and a count over the rows that exist.
	second := dryRunFile(t, e.db, &FilePostV2{}, &FileComment{})
	gooseUp(t, e, first, second)
	for _, p := range posts[1:] {
		must(t, gormcounter.Increment(e.db.Model(&FilePostV2{ID: p.ID}), "Shares", 2).Error)
		var got FilePostV2
		must(t, e.db.Clauses(gormcounter.Live).First(&got, p.ID).Error)
		var approved int64
		must(t, e.db.Model(&FileComment{}).Where("file_post_id = ? AND approved = ?", p.ID, true).Count(&approved).Error)
		if got.Shares != 2 || got.ApprovedCount != approved || approved == 0 {
			t.Errorf("post %d after the second file: shares %d (want 2), approved_count %d (want %d)", p.ID, got.Shares, got.ApprovedCount, approved)
		}
	}
	sameSchemaAsAutoMigrate(t, e, v1, []any{&FilePostV2{}, &FileComment{}})
}

// gormByAtlasFiles: atlas-provider-gorm, loading the models with the
// plugin, gives the models' tables without a column for a sum counter and
// the counters' slot and delta tables; SchemaSQL's file beside it holds
// what Atlas's free edition does not keep (triggers, functions, storage,
// the counts of existing rows). Applied in that order, by goose here as
// Atlas would apply its directory, the database counts exactly and has
// AutoMigrate's schema.
func gormByAtlasFiles(t *testing.T, e *env) {
	v1 := []any{&FilePost{}, &FileComment{}, &FileTag{}}
	loaded := atlasLoad(t, e.kind, gormcounter.New(gormcounter.Config{}), v1...)
	for _, sum := range []string{"likes", "comment_count", "post_count"} {
		if strings.Contains(loaded, sum) && !strings.Contains(loaded, "_"+sum+"_slots") {
			t.Errorf("atlas-provider-gorm's schema has a column for the sum counter %s:\n%s", sum, loaded)
		}
	}
	tables := "-- +goose Up\n"
	for _, st := range strings.Split(strings.TrimSpace(loaded), ";\n") {
		tables += "-- +goose StatementBegin\n" + strings.TrimSuffix(st, ";") + ";\n-- +goose StatementEnd\n"
	}
	script, err := gormcounter.SchemaSQL(e.db, v1...)
	must(t, err)
	gooseUp(t, e, tables, script.Goose())
	gormFilesWork(t, e)
	sameSchemaAsAutoMigrate(t, e, v1)
}

// atlasLoads serializes atlas-provider-gorm's loads: its recording driver
// keeps one session, named "gorm", for the whole process.
var atlasLoads sync.Mutex

// atlasLoad returns what atlas-provider-gorm's loader (its "Go program"
// mode, as an atlas.hcl's external_schema runs it) prints for models, with
// the plugin in the gorm.Config it is given.
func atlasLoad(t *testing.T, kind dbKind, plugin *gormcounter.Plugin, models ...any) string {
	t.Helper()
	dialect := map[dbKind]string{pg: "postgres", my: "mysql", lite: "sqlite"}[kind]
	atlasLoads.Lock()
	defer atlasLoads.Unlock()
	if s, ok := recordriver.Session("gorm"); ok {
		s.Statements = nil
	}
	out, err := gormschema.New(dialect, gormschema.WithConfig(&gorm.Config{
		Plugins: map[string]gorm.Plugin{plugin.Name(): plugin},
	})).Load(models...)
	if err != nil {
		t.Fatalf("atlas-provider-gorm with the plugin: %v", err)
	}
	return out
}

// sameSchemaAsAutoMigrate fails t unless the database the files made has
// the tables, columns, indexes, triggers and storage that AutoMigrate
// makes of each release's models, in order, on a database of its own.
func sameSchemaAsAutoMigrate(t *testing.T, e *env, releases ...[]any) {
	t.Helper()
	orm := open(t, e.kind)
	for _, models := range releases {
		must(t, orm.db.AutoMigrate(models...))
	}
	byFiles, byORM := catalog(t, e, openPool(t, e, 2)), catalog(t, orm, openPool(t, orm, 2))
	if !slices.Equal(byFiles, byORM) {
		t.Errorf("the schema the files made differs from AutoMigrate's:\n%s", diffLines(byFiles, byORM))
	}
}

// gormFilesWork runs the writes and checks of a database migrated by
// files: 8 goroutines each like, view and clap three posts and add
// comments; a raw insert, a move and a delete beside them; a rollup pass,
// a recount that finds nothing to correct, and a cascade through the join
// table. It returns the posts.
func gormFilesWork(t *testing.T, e *env) []FilePost {
	t.Helper()
	// Writers: 8 goroutines each like, view and clap every post, and add
	// comments; a raw insert and a move and a delete beside them.
	posts := make([]FilePost, 3)
	must(t, e.db.Create(&posts).Error)
	tag := FileTag{}
	must(t, e.db.Create(&tag).Error)
	must(t, e.db.Model(&tag).Association("FilePosts").Append(&posts))
	const writers, each = 8, 10
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				p := posts[i%len(posts)]
				for _, f := range []string{"Likes", "Views", "Claps"} {
					if err := gormcounter.Increment(e.db.Model(&p), f, 1).Error; err != nil {
						errs <- err
						return
					}
				}
				if err := e.db.Create(&FileComment{FilePostID: p.ID, Approved: i%2 == 0}).Error; err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	must(t, e.db.Exec("INSERT INTO file_comments (file_post_id, approved) VALUES (?, ?)", posts[0].ID, true).Error)
	var moved FileComment
	must(t, e.db.Where("file_post_id = ?", posts[1].ID).First(&moved).Error)
	must(t, e.db.Model(&moved).Update("file_post_id", posts[2].ID).Error)
	var gone FileComment
	must(t, e.db.Where("file_post_id = ?", posts[2].ID).First(&gone).Error)
	must(t, e.db.Delete(&gone).Error)
	must(t, gormcounter.RollupPass(e.db, &FilePost{}))

	for i, p := range posts {
		var want int64 // writer k's write i goes to post i%3
		for w := range each {
			if w%len(posts) == i {
				want += writers
			}
		}
		got, comments := filePostCounts(t, e.db, p.ID)
		if got.Likes != want || got.Views != want || got.Claps != want {
			t.Errorf("post %d: likes %d, views %d, claps %d; want %d each", i, got.Likes, got.Views, got.Claps, want)
		}
		if got.CommentCount != comments {
			t.Errorf("post %d: comment_count %d, its comments %d", i, got.CommentCount, comments)
		}
	}
	n, err := gormcounter.Recount(e.db.Model(&FilePost{}), "CommentCount")
	must(t, err)
	if n != 0 {
		t.Errorf("Recount corrected %d posts: the triggers the file installed missed writes", n)
	}
	// 8 buyers take 1 each of a stock of 5: exactly 5 get one.
	must(t, gormcounter.Increment(e.db.Model(&posts[1]), "Stock", 5).Error)
	var sold, refused atomic.Int64
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			switch err := gormcounter.Take(e.db.Model(&FilePost{ID: posts[1].ID}), "Stock", 1).Error; {
			case err == nil:
				sold.Add(1)
			case errors.Is(err, hotcounter.ErrInsufficient):
				refused.Add(1)
			default:
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	var stocked FilePost
	must(t, e.db.First(&stocked, posts[1].ID).Error)
	if sold.Load() != 5 || refused.Load() != writers-5 || stocked.Stock != 0 {
		t.Errorf("%d buyers of a stock of 5: %d sold, %d refused, %d left", writers, sold.Load(), refused.Load(), stocked.Stock)
	}
	must(t, e.db.Select("FileComments").Delete(&posts[0]).Error)
	var tagNow FileTag
	must(t, e.db.First(&tagNow, tag.ID).Error)
	if tagNow.PostCount != 2 {
		t.Errorf("after deleting one of its 3 posts the tag counts %d; want 2", tagNow.PostCount)
	}
	return posts
}

// SavedPost has a plain nullable column, saves, that SavedPostV2 adopts
// as a rollup counter.
type SavedPost struct {
	ID    uint
	Saves *int64
}

// SavedPostV2 is SavedPost in a release that counts saves.
type SavedPostV2 struct {
	ID    uint
	Saves int64 `gorm:"counter:rollup"`
}

func (SavedPostV2) TableName() string { return "saved_posts" }

// TestADryRunZeroesARollupColumnsNullsBeforeGormMakesItNotNull: a release
// that turns a nullable column holding NULLs into a rollup counter, by a
// file from the dry run: the file sets the NULLs to 0 before GORM's DDL
// makes the column NOT NULL (AutoMigrate does the same in batches), so
// goose applies it and the counter counts on. MariaDB: GORM's own dry run
// of a column's change to NOT NULL fails on PostgreSQL ("dry run mode
// unsupported") and panics on SQLite (both read the catalog through a
// query the dry run does not run), with or without the plugin.
func TestADryRunZeroesARollupColumnsNullsBeforeGormMakesItNotNull(t *testing.T) {
	eachDB(t, func(t *testing.T, e *env) {
		must(t, e.db.AutoMigrate(&SavedPost{}))
		posts := make([]SavedPost, 3)
		must(t, e.db.Create(&posts).Error)
		gooseUp(t, e, dryRunFile(t, e.db, &SavedPostV2{}))
		for _, p := range posts {
			must(t, gormcounter.Increment(e.db.Model(&SavedPostV2{ID: p.ID}), "Saves", 2).Error)
			var got SavedPostV2
			must(t, e.db.Clauses(gormcounter.Live).First(&got, p.ID).Error)
			if got.Saves != 2 {
				t.Errorf("post %d: saves %d after +2 on a column that held NULL; want 2", p.ID, got.Saves)
			}
		}
		if n := rawInt(t, e.db, "SELECT COUNT(*) FROM saved_posts WHERE saves IS NULL"); n != 0 {
			t.Errorf("%d posts still hold NULL saves", n)
		}
	}, on(my))
}

// entGooseFile returns the statements of what ent's Schema.WriteTo
// wrote, as a goose file: one per line, without the transaction around
// them (goose runs a file in one) and comments.
func entGooseFile(written string) string {
	var b strings.Builder
	b.WriteString("-- +goose Up\n")
	for _, line := range strings.Split(written, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "--") || line == "BEGIN;" || line == "COMMIT;" {
			continue
		}
		b.WriteString("-- +goose StatementBegin\n" + line + "\n-- +goose StatementEnd\n")
	}
	return b.String()
}

// entByFiles: the ent half of TestADatabaseMigratedByFilesCountsExactly.
// ent's own dry run (Schema.WriteTo) writes the tables, including the
// slot tables, which are ent schemas; entcounter.SchemaSQL the rest.
func entByFiles(t *testing.T, e *env) {
	ctx := context.Background()
	files := withEnt(t, e, false)
	c := files.client
	var ddl strings.Builder
	must(t, oneMigrationAtATime(func() error { return c.Schema.WriteTo(ctx, &ddl) }))
	script, err := entcounter.SchemaSQL(ctx, c)
	must(t, err)
	gooseUp(t, e, entGooseFile(ddl.String()), script.Goose())

	// 8 writers add files to two folders and like two posts; then a raw
	// insert, a move and a delete.
	folders := []int{c.Folder.Create().SaveX(ctx).ID, c.Folder.Create().SaveX(ctx).ID}
	posts := []int{c.Post.Create().SaveX(ctx).ID, c.Post.Create().SaveX(ctx).ID}
	const writers, each = 8, 10
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				if err := c.File.Create().SetSize(int64(w + i)).SetFolderID(folders[i%2]).Exec(ctx); err != nil {
					errs <- err
					return
				}
				if err := c.Post.UpdateOneID(posts[i%2]).AddLikes(1).Exec(ctx); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	_, err = files.sqlDB.ExecContext(ctx, fmt.Sprintf("INSERT INTO files (size, folder_id) VALUES (1000, %d)", folders[0]))
	must(t, err)
	first := c.File.Query().Where(file.FolderID(folders[0])).FirstX(ctx)
	c.File.UpdateOneID(first.ID).SetFolderID(folders[1]).ExecX(ctx)
	second := c.File.Query().Where(file.FolderID(folders[1])).FirstX(ctx)
	c.File.DeleteOneID(second.ID).ExecX(ctx)

	for _, id := range folders {
		var sum []struct{ Sum int64 }
		c.File.Query().Where(file.FolderID(id)).Aggregate(ent.Sum(file.FieldSize)).ScanX(ctx, &sum)
		if got := c.Folder.GetX(ctx, id).Bytes; got != sum[0].Sum || got == 0 {
			t.Errorf("folder %d: bytes %d, its files' sizes add up to %d", id, got, sum[0].Sum)
		}
	}
	for _, id := range posts {
		if got := c.Post.GetX(ctx, id).Likes; got != writers*each/2 {
			t.Errorf("post %d: likes %d; want %d", id, got, writers*each/2)
		}
	}
	n, err := c.Folder.RecountBytes(ctx)
	must(t, err)
	if n != 0 {
		t.Errorf("Recount corrected %d folders: the triggers the file installed missed writes", n)
	}
	story := c.Story.Create().SaveX(ctx)
	c.Story.UpdateOneID(story.ID).AddClaps(7).ExecX(ctx)
	must(t, entcounter.RollupPass(ctx, c))
	var column int64
	must(t, files.sqlDB.QueryRowContext(ctx, fmt.Sprintf("SELECT claps FROM stories WHERE id = %d", story.ID)).Scan(&column))
	if got := c.Story.GetX(ctx, story.ID).Claps; got != 7 || column != 7 {
		t.Errorf("after a rollup pass the story's claps load %d, and its column holds %d; want 7", got, column)
	}
	product := c.Product.Create().SaveX(ctx)
	c.Product.UpdateOneID(product.ID).AddStock(5).ExecX(ctx)
	var sold, refused atomic.Int64
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			switch err := c.Product.TakeStock(ctx, product.ID, 1); {
			case err == nil:
				sold.Add(1)
			case errors.Is(err, hotcounter.ErrInsufficient):
				refused.Add(1)
			default:
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if left := c.Product.GetX(ctx, product.ID).Stock; sold.Load() != 5 || refused.Load() != writers-5 || left != 0 {
		t.Errorf("%d buyers of a stock of 5: %d sold, %d refused, %d left", writers, sold.Load(), refused.Load(), left)
	}
	label := c.Label.Create().SaveX(ctx)
	convs := []int{c.Conversation.Create().AddLabelIDs(label.ID).SaveX(ctx).ID, c.Conversation.Create().AddLabelIDs(label.ID).SaveX(ctx).ID}
	c.Conversation.DeleteOneID(convs[0]).ExecX(ctx)
	if got := c.Label.GetX(ctx, label.ID).ConversationCount; got != 1 {
		t.Errorf("after deleting one of its 2 conversations the label counts %d; want 1", got)
	}

	// The same client, migrated by Schema.Create with WithCounters on a
	// database of its own, makes the same schema.
	orm := withEnt(t, open(t, e.kind), false)
	must(t, entMigrate(ctx, orm.client, entcounter.WithCounters(orm.client)))
	byFiles, byORM := catalog(t, e, files.sqlDB), catalog(t, orm.env, orm.sqlDB)
	if !slices.Equal(byFiles, byORM) {
		t.Errorf("the schema the files made differs from Schema.Create's:\n%s", diffLines(byFiles, byORM))
	}
}

// diffLines lists the lines only one of a and b (sorted) has.
func diffLines(a, b []string) string {
	var out []string
	for _, l := range a {
		if !slices.Contains(b, l) {
			out = append(out, "files only: "+l)
		}
	}
	for _, l := range b {
		if !slices.Contains(a, l) {
			out = append(out, "ORM only:   "+l)
		}
	}
	return strings.Join(out, "\n")
}

// TestAVersionedMigrationWithCountersSaysWhatToWriteInstead: ent's
// versioned migration (NamedDiff into a directory) given WithCounters
// writes nothing and fails with ErrWritesNoFiles, which names SchemaSQL,
// rather than writing a file without the counts' triggers; the database
// it diffs against is left as it was. Without the option ent writes its
// file, slot tables included.
func TestAVersionedMigrationWithCountersSaysWhatToWriteInstead(t *testing.T) {
	eachDB(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		ee := withEnt(t, e, false)
		drv := entDriverSending(e.kind, ee.sqlDB, func(string) {})
		dir, err := atlasmigrate.NewLocalDir(t.TempDir())
		must(t, err)
		m, err := schema.NewMigrate(drv, schema.WithDir(dir), entcounter.WithCounters(ee.client))
		must(t, err)
		err = oneMigrationAtATime(func() error { return m.NamedDiff(ctx, "counters", migrate.Tables...) })
		if !errors.Is(err, entcounter.ErrWritesNoFiles) || !strings.Contains(err.Error(), "SchemaSQL") {
			t.Fatalf("NamedDiff with WithCounters: %v; want ErrWritesNoFiles naming SchemaSQL", err)
		}
		if files, err := dir.Files(); err != nil || len(files) != 0 {
			t.Fatalf("NamedDiff with WithCounters wrote %d files (%v)", len(files), err)
		}
		if tables, err := e.db.Migrator().GetTables(); err != nil || len(tables) != 0 {
			t.Fatalf("NamedDiff with WithCounters changed the database: %v (%v)", tables, err)
		}
		m, err = schema.NewMigrate(drv, schema.WithDir(dir))
		must(t, err)
		must(t, oneMigrationAtATime(func() error { return m.NamedDiff(ctx, "tables", migrate.Tables...) }))
		files, err := dir.Files()
		must(t, err)
		var names []string
		slots := false
		for _, f := range files {
			names = append(names, f.Name())
			slots = slots || strings.HasSuffix(f.Name(), ".up.sql") && strings.Contains(string(f.Bytes()), "post_likes_slots")
		}
		if !slots {
			t.Errorf("NamedDiff without WithCounters wrote %v; want an up file that creates post_likes_slots", names)
		}
	})
}

// BenchmarkSchemaSQL: the script of the integration tests' ent client (52
// tables, 40 counters) and of GORM's file models, written without a
// database connection.
func BenchmarkSchemaSQL(b *testing.B) {
	b.Run("ent", func(b *testing.B) {
		client := ent.NewClient(ent.Driver(entsql.OpenDB(dialect.Postgres, nil)))
		for b.Loop() {
			if _, err := entcounter.SchemaSQL(context.Background(), client); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("gorm", func(b *testing.B) {
		e := open(b, lite)
		models := []any{&FilePost{}, &FileComment{}, &FileTag{}}
		for b.Loop() {
			if _, err := gormcounter.SchemaSQL(e.db, models...); err != nil {
				b.Fatal(err)
			}
		}
	})
}
