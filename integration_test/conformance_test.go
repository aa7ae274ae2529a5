package integration_test

// The conformance suite: a behaviour written once against counterORM,
// which each ORM implements over the same tables, and run for both ORMs on
// every database. A divergence between gormcounter and entcounter is then
// a failing test, not a test that one of them lacks.
//
// The models, declared alike by GORM (fixtures_test.go) and ent
// (ent/schema):
//   - modelPost, posts: likes, a sum counter; views, a rollup counter of
//     64 slots;
//   - modelSkipPost, skip_posts: likes, 64 pre-created skip-locked slots;
//   - modelStory, stories: claps, an append counter (a delta row per
//     increment, folded into the column);
//   - modelReel, reels: plays, slots=auto (one slot row per reel until
//     its writers contend, at most 16);
//   - modelProduct, products: stock, a guarded counter (never below zero,
//     down only through a take).

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.opentelemetry.io/otel/metric"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/hotcounter/hotcounter"
	"github.com/hotcounter/hotcounter/entcounter"
	"github.com/hotcounter/hotcounter/gormcounter"
	"github.com/hotcounter/hotcounter/integration_test/ent"
	"github.com/hotcounter/hotcounter/integration_test/ent/post"
	"github.com/hotcounter/hotcounter/integration_test/ent/product"
	"github.com/hotcounter/hotcounter/integration_test/ent/skippost"
)

const (
	modelPost     = "posts"
	modelSkipPost = "skip_posts"
	modelStory    = "stories"
	modelReel     = "reels"
	modelProduct  = "products"
)

// errNoRow is what counterORM.increment returns for a row that does not
// exist.
var errNoRow = errors.New("no such row")

// counterORM is what a behaviour does through one ORM. model is one of
// the models above; field is a counter's column ("likes", "views").
type counterORM interface {
	// db is the database, for raw checks of the tables; kind says which.
	db() *gorm.DB
	kind() dbKind
	create(t testing.TB, model string) int64
	// createMany creates n rows at once (posts or reels).
	createMany(t testing.TB, model string, n int) []int64
	// createPosts creates posts at once (GORM's CreateInBatches, ent's
	// CreateBulk), post i with likes[i].
	createPosts(t testing.TB, likes []int64) []int64
	// createWith creates a row whose counter field starts at v.
	createWith(model string, field string, v int64) (int64, error)
	// name is how the ORM's errors name a counter: Post.Likes (GORM),
	// Post.likes (ent).
	name(model, field string) string
	// take takes n from a guarded counter (gormcounter.Take,
	// entcounter.Take); errNoRow (wrapping the ORM's NotFound) when there
	// is no such row.
	take(model string, id int64, field string, n int64) error
	// increment increments field of the row id; errNoRow when there is
	// no such row (GORM: RowsAffected 0; ent: NotFound).
	increment(model string, id int64, field string, n int64) error
	// add adds n to field the ORM's own way, as code not written for
	// counters does: GORM's UpdateColumn(field, gorm.Expr("field + ?", n)),
	// ent's AddX.
	add(model string, id int64, field string, n int64) error
	// set assigns v to field (GORM's Update, ent's SetX); setMany
	// assigns it to the rows with ids in one statement.
	set(model string, id int64, field string, v int64) error
	setMany(model string, ids []int64, field string, v int64) error
	// postCreates are every way the ORM creates a post with values,
	// likesAssigns every way it assigns a post's likes, and rewritePost
	// loads a post, calls meanwhile, and writes the loaded row back with a
	// new title: the ORM's whole-row writes (values_test.go).
	postCreates() []createPath
	likesAssigns() []assignPath
	rewritePost(t *testing.T, id int, meanwhile func())
	// migrate runs the ORM's migration of the models above again: GORM's
	// AutoMigrate, ent's migration of their tables with
	// entcounter.WithCounters (entTables names others).
	migrate() error
	// remove deletes the row; removePosts deletes the posts with ids in
	// one statement, by a condition.
	remove(model string, id int64) error
	removePosts(ids []int64) error
	// incrementMany increments the rows with ids in one statement and
	// returns how many rows it reports.
	incrementMany(model string, ids []int64, field string, n int64) (int64, error)
	// inTx runs fn in a transaction of its own, with the ORM bound to it,
	// and commits when fn returns nil.
	inTx(fn func(tx counterORM) error) error
	// cached reads a counter as a plain load does (a rollup counter: its
	// column).
	cached(t testing.TB, model string, id int64, field string) int64
	// exact reads a counter exactly (Live, WithLive).
	exact(model string, id int64, field string) (int64, error)
	// postsByViews returns the ids of the posts whose views column is over
	// min, most viewed first: the rollup column in WHERE and ORDER BY.
	postsByViews(t testing.TB, min int64) []int64
	// likesByKey loads the posts whose ids are among ids in one load by
	// key (GORM's Find(&posts, ids), ent's Where(post.IDIn(ids...)).All)
	// and returns each loaded post's likes by id.
	likesByKey(t testing.TB, ids []int64) map[int64]int64
	// rollup and rollupLoop fold the rollup and append counters of model
	// (GORM names the model; ent folds every counter of the client).
	rollup(model string) error
	rollupLoop(ctx context.Context, model string, every time.Duration) error
	// compact runs a compaction pass over model's sum counters (ent:
	// every counter of the client).
	compact(model string) (hotcounter.Compacted, error)
	// moveToSlots moves what model's sum counters hold in parent columns
	// of their own name onto slot rows (ent: every counter of the client).
	moveToSlots(model string) (hotcounter.Moved, error)
	// buffer returns a write-behind buffer of the ORM (gormcounter's or
	// entcounter's NewBuffer).
	buffer(t testing.TB, cfg hotcounter.BufferConfig) counterBuffer
	// bufferSchema returns the statements of a buffer's ledger table
	// (gormcounter's or entcounter's BufferSchemaSQL).
	bufferSchema(cfg hotcounter.BufferConfig) (hotcounter.Script, error)
	// sent returns how many statements the ORM sent while fn ran.
	sent(fn func()) int64
	// within returns the same ORM with its statements under ctx.
	within(ctx context.Context) counterORM
	// with returns the same ORM on a client of its own, over the same
	// connection pool, with the settings both ORMs take
	// (gormcounter.Config, entcounter.Config).
	with(t testing.TB, s settings) counterORM
	// staged is with, on a client whose statements pass through st
	// before they are sent (stage.pass).
	staged(t testing.TB, s settings, st *stage) counterORM
	// through is with, on a client that connects with dsn: another
	// route to the same database (a proxy), or the same with other
	// connection parameters.
	through(t testing.TB, dsn string, s settings) counterORM
	// hotKeys returns the client's k hottest rows (gormcounter.HotKeys,
	// entcounter.HotKeys).
	hotKeys(k int) ([]hotcounter.HotKey, error)
	// onEnv is the test database the ORM runs on.
	onEnv() *env
	// version opens deploy v of the versioned application (appVersion,
	// versions_test.go) as a new process; legacyRow makes its table as
	// the application had it before the counter, with one row whose
	// plain column holds value, and returns the row's id.
	version(t testing.TB, v string) appVersion
	legacyRow(t testing.TB, value int64) int64
}

// counterBuffer is a write-behind buffer of either ORM.
type counterBuffer interface {
	increment(ctx context.Context, model string, id int64, field string, n int64) error
	flush(ctx context.Context) error
	close(ctx context.Context) error
	// pending is the buffer's delta of a post's counter, not yet written
	// (Pending).
	pending(ctx context.Context, model string, id int64, field string) (int64, error)
	// live loads the posts with ids in one query with what the buffer
	// holds (GORM's buf.Live() clause, ent's buf.Live(ctx)) and returns
	// each one's likes and views, in the order of ids.
	live(ctx context.Context, ids []int64) ([][2]int64, error)
}

// settings are the run-time settings both ORMs take.
type settings struct {
	BatchSize     int // RollupBatchSize
	InFlight      int
	AutoCooldown  time.Duration
	MeterProvider metric.MeterProvider
	// DeclareModels lists the models in GORM's Config.Models, as a
	// process that serves them declares them before any statement (ent's
	// client declares every schema of its own).
	DeclareModels bool
	// HotKeysOff turns the counting of hot keys off (Config.HotKeys.Off).
	HotKeysOff bool
	// OnError hears the errors of background work (Config.OnError).
	OnError func(error)
}

func (s settings) gorm() gormcounter.Config {
	cfg := gormcounter.Config{RollupBatchSize: s.BatchSize, InFlight: s.InFlight, AutoCooldown: s.AutoCooldown, MeterProvider: s.MeterProvider,
		HotKeys: hotcounter.HotKeysConfig{Off: s.HotKeysOff}, OnError: s.OnError}
	if s.DeclareModels {
		for _, m := range []string{modelPost, modelSkipPost, modelStory, modelReel, modelProduct} {
			cfg.Models = append(cfg.Models, gormModel(m, 0))
		}
	}
	return cfg
}

func (s settings) ent() entcounter.Config {
	return entcounter.Config{RollupBatchSize: s.BatchSize, InFlight: s.InFlight, AutoCooldown: s.AutoCooldown, MeterProvider: s.MeterProvider,
		HotKeys: hotcounter.HotKeysConfig{Off: s.HotKeysOff}, OnError: s.OnError}
}

// exactly is counterORM.exact, failing t on an error.
func exactly(t testing.TB, o counterORM, model string, id int64, field string) int64 {
	t.Helper()
	v, err := o.exact(model, id, field)
	must(t, err)
	return v
}

// eachORM runs fn for GORM and for ent, each on every database (opts as
// for eachDB), on a migrated schema of its own.
func eachORM(t *testing.T, fn func(t *testing.T, o counterORM), opts ...option) {
	t.Helper()
	conformanceTest(t)
	parallel(t)
	var oo openOptions
	for _, opt := range opts {
		opt(&oo)
	}
	t.Run("gorm", func(t *testing.T) {
		eachDB(t, func(t *testing.T, e *env) {
			o := gormORM{e: e, gdb: e.db}
			if !oo.unmigrated {
				must(t, o.migrate())
			}
			fn(t, o)
		}, opts...)
	})
	t.Run("ent", func(t *testing.T) {
		eachDB(t, func(t *testing.T, e *env) {
			if e.entRoots == nil {
				e.entRoots = entCore
			}
			ee := withEnt(t, e, !oo.unmigrated)
			fn(t, entORM{e: ee, client: ee.client})
		}, opts...)
	})
}

type gormORM struct {
	e   *env
	gdb *gorm.DB
}

// gormModel returns a pointer to model's struct with id set (0: none).
func gormModel(model string, id int64) any {
	switch model {
	case modelPost:
		return &Post{ID: uint(id)}
	case modelSkipPost:
		return &SkipPost{ID: uint(id)}
	case modelStory:
		return &Story{ID: uint(id)}
	case modelReel:
		return &Reel{ID: uint(id)}
	case modelProduct:
		return &Product{ID: uint(id)}
	}
	panic("no model " + model)
}

// gormField is the Go name of a counter's column (another column's name
// as it is).
func gormField(field string) string {
	if name, ok := map[string]string{"likes": "Likes", "views": "Views", "claps": "Claps", "plays": "Plays", "stock": "Stock"}[field]; ok {
		return name
	}
	return field
}

func (o gormORM) db() *gorm.DB { return o.e.db }
func (o gormORM) onEnv() *env  { return o.e }
func (o gormORM) kind() dbKind { return o.e.kind }

func (o gormORM) create(t testing.TB, model string) int64 {
	t.Helper()
	m := gormModel(model, 0)
	switch m := m.(type) {
	case *Post:
		m.Title = "post"
	case *Reel:
		m.Title = "reel" // not ent's "premiere" or "encore", which its hook counts
	case *Product:
		m.Name = "flash sale"
	}
	must(t, o.gdb.Create(m).Error)
	return idOf(m)
}

func (o gormORM) createMany(t testing.TB, model string, n int) []int64 {
	t.Helper()
	ids := make([]int64, n)
	switch model {
	case modelPost:
		rows := make([]Post, n)
		for i := range rows {
			rows[i].Title = "post"
		}
		must(t, o.gdb.CreateInBatches(&rows, 1000).Error)
		for i, r := range rows {
			ids[i] = int64(r.ID)
		}
	case modelReel:
		rows := make([]Reel, n)
		for i := range rows {
			rows[i].Title = "reel"
		}
		must(t, o.gdb.CreateInBatches(&rows, 1000).Error)
		for i, r := range rows {
			ids[i] = int64(r.ID)
		}
	default:
		panic("createMany: no model " + model)
	}
	return ids
}

func (o gormORM) createPosts(t testing.TB, likes []int64) []int64 {
	t.Helper()
	rows := make([]Post, len(likes))
	for i := range rows {
		rows[i] = Post{Title: "post", Likes: likes[i]}
	}
	must(t, o.gdb.CreateInBatches(&rows, 1000).Error)
	return idsOf(rows, func(p Post) int { return int(p.ID) })
}

func (o gormORM) createWith(model string, field string, v int64) (int64, error) {
	m := gormModel(model, 0)
	switch m := m.(type) {
	case *Product:
		m.Name, m.Stock = "flash sale", v
	case *Post:
		m.Title = "post"
		if field == "views" {
			m.Views = v
		} else {
			m.Likes = v
		}
	default:
		panic("createWith: no model " + model)
	}
	err := o.gdb.Create(m).Error
	return idOf(m), err
}

func (o gormORM) name(model, field string) string { return modelTypes[model] + "." + gormField(field) }

func (o gormORM) take(model string, id int64, field string, n int64) error {
	err := gormcounter.Take(o.gdb.Model(gormModel(model, id)), gormField(field), n).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return fmt.Errorf("%w: %w", errNoRow, err)
	}
	return err
}

func idOf(m any) int64 {
	switch m := m.(type) {
	case *Post:
		return int64(m.ID)
	case *SkipPost:
		return int64(m.ID)
	case *Story:
		return int64(m.ID)
	case *Reel:
		return int64(m.ID)
	case *Product:
		return int64(m.ID)
	}
	panic(fmt.Sprintf("no id of %T", m))
}

func (o gormORM) increment(model string, id int64, field string, n int64) error {
	tx := gormcounter.Increment(o.gdb.Model(gormModel(model, id)), gormField(field), n)
	if tx.Error == nil && tx.RowsAffected == 0 {
		return errNoRow
	}
	return tx.Error
}

func (o gormORM) add(model string, id int64, field string, n int64) error {
	return o.gdb.Model(gormModel(model, id)).UpdateColumn(field, gorm.Expr(field+" + ?", n)).Error
}

func (o gormORM) set(model string, id int64, field string, v int64) error {
	return o.gdb.Model(gormModel(model, id)).Update(gormField(field), v).Error
}

func (o gormORM) setMany(model string, ids []int64, field string, v int64) error {
	return o.gdb.Model(gormModel(model, 0)).Where("id IN ?", ids).UpdateColumn(field, v).Error
}

// migrate migrates the conformance suite's models (and the authors and
// comments of posts), as entORM.migrate migrates their ent tables.
func (o gormORM) migrate() error {
	return o.gdb.AutoMigrate(&Author{}, &Post{}, &Comment{}, &SkipPost{}, &Story{}, &Reel{}, &Product{})
}

func (o gormORM) remove(model string, id int64) error {
	return o.gdb.Delete(gormModel(model, id)).Error
}

func (o gormORM) removePosts(ids []int64) error {
	return o.gdb.Where("id IN ?", ids).Delete(&Post{}).Error
}

func (o gormORM) incrementMany(model string, ids []int64, field string, n int64) (int64, error) {
	tx := gormcounter.Increment(o.gdb.Model(gormModel(model, 0)).Where("id IN ?", ids), gormField(field), n)
	return tx.RowsAffected, tx.Error
}

func (o gormORM) inTx(fn func(tx counterORM) error) error {
	return o.gdb.Transaction(func(tx *gorm.DB) error { return fn(gormORM{e: o.e, gdb: tx}) })
}

// read loads model's row id through db and returns field.
func (o gormORM) read(db *gorm.DB, model string, id int64, field string) (int64, error) {
	m := gormModel(model, 0)
	if err := db.First(m, id).Error; err != nil {
		return 0, err
	}
	switch m := m.(type) {
	case *Post:
		return map[string]int64{"likes": m.Likes, "views": m.Views}[field], nil
	case *SkipPost:
		return m.Likes, nil
	case *Story:
		return m.Claps, nil
	case *Reel:
		return m.Plays, nil
	case *Product:
		return m.Stock, nil
	}
	return 0, nil
}

func (o gormORM) cached(t testing.TB, model string, id int64, field string) int64 {
	t.Helper()
	v, err := o.read(o.gdb, model, id, field)
	must(t, err)
	return v
}

func (o gormORM) exact(model string, id int64, field string) (int64, error) {
	return o.read(o.gdb.Clauses(gormcounter.Live), model, id, field)
}

func (o gormORM) postsByViews(t testing.TB, min int64) []int64 {
	t.Helper()
	var ps []Post
	must(t, o.gdb.Where("views > ?", min).Order("views DESC").Find(&ps).Error)
	ids := make([]int64, len(ps))
	for i, p := range ps {
		ids[i] = int64(p.ID)
	}
	return ids
}

func (o gormORM) likesByKey(t testing.TB, ids []int64) map[int64]int64 {
	t.Helper()
	var ps []Post
	must(t, o.gdb.Find(&ps, ids).Error)
	out := make(map[int64]int64, len(ps))
	for _, p := range ps {
		out[int64(p.ID)] = p.Likes
	}
	return out
}

func (o gormORM) rollup(model string) error {
	return gormcounter.RollupPass(o.gdb, gormModel(model, 0))
}

func (o gormORM) rollupLoop(ctx context.Context, model string, every time.Duration) error {
	return gormcounter.RollupLoop(ctx, o.gdb, every, gormModel(model, 0))
}

func (o gormORM) compact(model string) (hotcounter.Compacted, error) {
	return gormcounter.CompactPass(o.gdb, gormModel(model, 0))
}

type gormBuffer struct {
	b  *gormcounter.Buffer
	db *gorm.DB
}

func (b gormBuffer) pending(ctx context.Context, model string, id int64, field string) (int64, error) {
	return b.b.Pending(ctx, gormModel(model, id), gormField(field))
}

func (b gormBuffer) live(ctx context.Context, ids []int64) ([][2]int64, error) {
	var posts []Post
	err := b.db.WithContext(ctx).Clauses(b.b.Live()).Where("id IN ?", ids).Find(&posts).Error
	byID := map[int64][2]int64{}
	for _, p := range posts {
		byID[int64(p.ID)] = [2]int64{p.Likes, p.Views}
	}
	return inOrder(ids, byID), err
}

// inOrder returns the values of ids in byID, in the order of ids.
func inOrder(ids []int64, byID map[int64][2]int64) [][2]int64 {
	out := make([][2]int64, len(ids))
	for i, id := range ids {
		out[i] = byID[id]
	}
	return out
}

func (b gormBuffer) increment(ctx context.Context, model string, id int64, field string, n int64) error {
	return b.b.Increment(ctx, gormModel(model, id), gormField(field), n)
}
func (b gormBuffer) flush(ctx context.Context) error { return b.b.Flush(ctx) }
func (b gormBuffer) close(ctx context.Context) error { return b.b.Close(ctx) }

func (o gormORM) moveToSlots(model string) (hotcounter.Moved, error) {
	return gormcounter.MoveToSlots(o.gdb, gormModel(model, 0))
}

func (o gormORM) buffer(t testing.TB, cfg hotcounter.BufferConfig) counterBuffer {
	t.Helper()
	b, err := gormcounter.NewBuffer(context.Background(), o.gdb, cfg)
	must(t, err)
	return gormBuffer{b, o.gdb}
}

func (o gormORM) bufferSchema(cfg hotcounter.BufferConfig) (hotcounter.Script, error) {
	return gormcounter.BufferSchemaSQL(o.gdb, cfg)
}

func (o gormORM) sent(fn func()) int64 {
	before := o.e.log.count()
	fn()
	return o.e.log.count() - before
}

func (o gormORM) within(ctx context.Context) counterORM {
	return gormORM{e: o.e, gdb: o.gdb.WithContext(ctx)}
}

func (o gormORM) with(t testing.TB, s settings) counterORM {
	return gormORM{e: o.e, gdb: sharedGorm(t, o.e, s.gorm())}
}

func (o gormORM) staged(t testing.TB, s settings, st *stage) counterORM {
	db := sharedGorm(t, o.e, s.gorm())
	stageGorm(t, db, st)
	return gormORM{e: o.e, gdb: db}
}

func (o gormORM) through(t testing.TB, dsn string, s settings) counterORM {
	db, err := gorm.Open(dialectorFor(o.e.kind, dsn), &gorm.Config{Logger: logger.Discard})
	must(t, err)
	must(t, db.Use(gormcounter.New(s.gorm())))
	pool, err := db.DB()
	must(t, err)
	t.Cleanup(func() { pool.Close() })
	return gormORM{e: o.e, gdb: db}
}

func (o gormORM) hotKeys(k int) ([]hotcounter.HotKey, error) { return gormcounter.HotKeys(o.gdb, k) }

type entORM struct {
	e      *entEnv
	client *ent.Client
	c      context.Context // nil: context.Background()
}

// ctx is the context of o's statements.
func (o entORM) ctx() context.Context {
	if o.c == nil {
		return context.Background()
	}
	return o.c
}

func (o entORM) within(ctx context.Context) counterORM { o.c = ctx; return o }

type entBuffer struct {
	b      *entcounter.Buffer
	client *ent.Client
}

func (b entBuffer) pending(ctx context.Context, model string, id int64, field string) (int64, error) {
	return b.b.Pending(ctx, modelTypes[model], field, int(id))
}

func (b entBuffer) live(ctx context.Context, ids []int64) ([][2]int64, error) {
	posts, err := b.client.Post.Query().Where(post.IDIn(ints(ids)...)).All(b.b.Live(ctx))
	byID := map[int64][2]int64{}
	for _, p := range posts {
		byID[int64(p.ID)] = [2]int64{p.Likes, p.Views}
	}
	return inOrder(ids, byID), err
}

func (b entBuffer) increment(ctx context.Context, model string, id int64, field string, n int64) error {
	return b.b.Increment(ctx, modelTypes[model], field, int(id), n)
}
func (b entBuffer) flush(ctx context.Context) error { return b.b.Flush(ctx) }
func (b entBuffer) close(ctx context.Context) error { return b.b.Close(ctx) }

func (o entORM) moveToSlots(string) (hotcounter.Moved, error) {
	if err := o.e.entEveryTable(o.ctx()); err != nil {
		return hotcounter.Moved{}, err
	}
	return entcounter.MoveToSlots(o.ctx(), o.client)
}

func (o entORM) buffer(t testing.TB, cfg hotcounter.BufferConfig) counterBuffer {
	t.Helper()
	b, err := entcounter.NewBuffer(o.ctx(), o.client, cfg)
	must(t, err)
	return entBuffer{b, o.client}
}

func (o entORM) sent(fn func()) int64 { return entStatements(o.e, fn) }

func (o entORM) bufferSchema(cfg hotcounter.BufferConfig) (hotcounter.Script, error) {
	return entcounter.BufferSchemaSQL(o.ctx(), o.client, cfg)
}

func (o entORM) db() *gorm.DB { return o.e.db }
func (o entORM) onEnv() *env  { return o.e.env }
func (o entORM) kind() dbKind { return o.e.kind }

func (o entORM) create(t testing.TB, model string) int64 {
	t.Helper()
	ctx := o.ctx()
	switch model {
	case modelPost:
		p, err := o.client.Post.Create().SetTitle("post").Save(ctx)
		must(t, err)
		return int64(p.ID)
	case modelSkipPost:
		p, err := o.client.SkipPost.Create().Save(ctx)
		must(t, err)
		return int64(p.ID)
	case modelStory:
		s, err := o.client.Story.Create().SetTitle("story").Save(ctx)
		must(t, err)
		return int64(s.ID)
	case modelReel:
		r, err := o.client.Reel.Create().SetTitle("reel").Save(ctx)
		must(t, err)
		return int64(r.ID)
	case modelProduct:
		p, err := o.client.Product.Create().SetName("flash sale").Save(ctx)
		must(t, err)
		return int64(p.ID)
	}
	panic("no model " + model)
}

func (o entORM) createMany(t testing.TB, model string, n int) []int64 {
	t.Helper()
	var ids []int64
	for start := 0; start < n; start += 1000 {
		size := make([]struct{}, min(1000, n-start))
		switch model {
		case modelPost:
			rows, err := o.client.Post.MapCreateBulk(size, func(c *ent.PostCreate, _ int) { c.SetTitle("post") }).Save(o.ctx())
			must(t, err)
			ids = append(ids, idsOf(rows, func(p *ent.Post) int { return p.ID })...)
		case modelReel:
			rows, err := o.client.Reel.MapCreateBulk(size, func(c *ent.ReelCreate, _ int) { c.SetTitle("reel") }).Save(o.ctx())
			must(t, err)
			ids = append(ids, idsOf(rows, func(r *ent.Reel) int { return r.ID })...)
		default:
			panic("createMany: no model " + model)
		}
	}
	return ids
}

func (o entORM) createPosts(t testing.TB, likes []int64) []int64 {
	t.Helper()
	rows, err := o.client.Post.MapCreateBulk(likes, func(c *ent.PostCreate, i int) { c.SetTitle("post").SetLikes(likes[i]) }).Save(o.ctx())
	must(t, err)
	return idsOf(rows, func(p *ent.Post) int { return p.ID })
}

// idsOf returns the ids of nodes.
func idsOf[T any](nodes []T, id func(T) int) []int64 {
	out := make([]int64, len(nodes))
	for i, n := range nodes {
		out[i] = int64(id(n))
	}
	return out
}

func (o entORM) createWith(model string, field string, v int64) (int64, error) {
	ctx := o.ctx()
	switch model {
	case modelProduct:
		p, err := o.client.Product.Create().SetName("flash sale").SetStock(v).Save(ctx)
		if err != nil {
			return 0, err
		}
		return int64(p.ID), nil
	case modelPost:
		c := o.client.Post.Create().SetTitle("post")
		if field == "views" {
			c.SetViews(v)
		} else {
			c.SetLikes(v)
		}
		p, err := c.Save(ctx)
		if err != nil {
			return 0, err
		}
		return int64(p.ID), nil
	}
	panic("createWith: no model " + model)
}

// modelTypes are the models' type names: GORM's structs and ent's schemas.
var modelTypes = map[string]string{modelPost: "Post", modelSkipPost: "SkipPost", modelStory: "Story", modelReel: "Reel", modelProduct: "Product"}

func (o entORM) name(model, field string) string { return modelTypes[model] + "." + field }

func (o entORM) take(model string, id int64, field string, n int64) error {
	err := entcounter.Take(o.ctx(), o.client, modelTypes[model], field, int(id), n)
	if ent.IsNotFound(err) {
		return fmt.Errorf("%w: %w", errNoRow, err)
	}
	return err
}

func (o entORM) increment(model string, id int64, field string, n int64) error {
	err := o.updateOne(model, id, func(m ent.Mutation) error { return m.AddField(field, n) })
	if ent.IsNotFound(err) {
		return errNoRow
	}
	return err
}

// updateOne runs an UpdateOneID of model's row id that write fills in
// through ent's generic mutation API (AddField, SetField).
func (o entORM) updateOne(model string, id int64, write func(ent.Mutation) error) error {
	var u interface {
		Exec(context.Context) error
	}
	var m ent.Mutation
	switch model {
	case modelSkipPost:
		one := o.client.SkipPost.UpdateOneID(int(id))
		u, m = one, one.Mutation()
	case modelStory:
		one := o.client.Story.UpdateOneID(int(id))
		u, m = one, one.Mutation()
	case modelReel:
		one := o.client.Reel.UpdateOneID(int(id))
		u, m = one, one.Mutation()
	case modelProduct:
		one := o.client.Product.UpdateOneID(int(id))
		u, m = one, one.Mutation()
	case modelPost:
		one := o.client.Post.UpdateOneID(int(id))
		u, m = one, one.Mutation()
	default:
		panic("no model " + model)
	}
	if err := write(m); err != nil {
		return err
	}
	return u.Exec(o.ctx())
}

func ints(ids []int64) []int {
	out := make([]int, len(ids))
	for i, id := range ids {
		out[i] = int(id)
	}
	return out
}

func (o entORM) add(model string, id int64, field string, n int64) error {
	return o.increment(model, id, field, n)
}

func (o entORM) set(model string, id int64, field string, v int64) error {
	return o.updateOne(model, id, func(m ent.Mutation) error { return m.SetField(field, v) })
}

func (o entORM) setMany(model string, ids []int64, field string, v int64) error {
	if model != modelPost || field != "likes" {
		panic("setMany: only posts' likes")
	}
	return o.client.Post.Update().Where(post.IDIn(ints(ids)...)).SetLikes(v).Exec(o.ctx())
}

func (o entORM) remove(model string, id int64) error {
	ctx := o.ctx()
	switch model {
	case modelSkipPost:
		return o.client.SkipPost.DeleteOneID(int(id)).Exec(ctx)
	case modelStory:
		return o.client.Story.DeleteOneID(int(id)).Exec(ctx)
	case modelReel:
		return o.client.Reel.DeleteOneID(int(id)).Exec(ctx)
	case modelProduct:
		return o.client.Product.DeleteOneID(int(id)).Exec(ctx)
	}
	return o.client.Post.DeleteOneID(int(id)).Exec(ctx)
}

func (o entORM) removePosts(ids []int64) error {
	_, err := o.client.Post.Delete().Where(post.IDIn(ints(ids)...)).Exec(o.ctx())
	return err
}

func (o entORM) incrementMany(model string, ids []int64, field string, n int64) (int64, error) {
	ctx := o.ctx()
	var rows int
	var err error
	switch {
	case model == modelSkipPost:
		rows, err = o.client.SkipPost.Update().Where(skippost.IDIn(ints(ids)...)).AddLikes(n).Save(ctx)
	case model == modelProduct:
		rows, err = o.client.Product.Update().Where(product.IDIn(ints(ids)...)).AddStock(n).Save(ctx)
	case model != modelPost:
		panic("incrementMany: no model " + model)
	case field == "views":
		rows, err = o.client.Post.Update().Where(post.IDIn(ints(ids)...)).AddViews(n).Save(ctx)
	default:
		rows, err = o.client.Post.Update().Where(post.IDIn(ints(ids)...)).AddLikes(n).Save(ctx)
	}
	return int64(rows), err
}

func (o entORM) inTx(fn func(tx counterORM) error) error {
	return inTx(o.ctx(), o.client, func(tx *ent.Tx) error { return fn(entORM{e: o.e, client: tx.Client(), c: o.c}) })
}

func (o entORM) read(ctx context.Context, model string, id int64, field string) (int64, error) {
	switch model {
	case modelSkipPost:
		return value(o.client.SkipPost.Get(ctx, int(id)))(func(p *ent.SkipPost) int64 { return p.Likes })
	case modelStory:
		return value(o.client.Story.Get(ctx, int(id)))(func(s *ent.Story) int64 { return s.Claps })
	case modelReel:
		return value(o.client.Reel.Get(ctx, int(id)))(func(r *ent.Reel) int64 { return r.Plays })
	case modelProduct:
		return value(o.client.Product.Get(ctx, int(id)))(func(p *ent.Product) int64 { return p.Stock })
	case modelPost:
		return value(o.client.Post.Get(ctx, int(id)))(func(p *ent.Post) int64 {
			return map[string]int64{"likes": p.Likes, "views": p.Views}[field]
		})
	}
	panic("no model " + model)
}

// value hands a loaded node (or its error) to pick, which returns the
// counter of the node a test reads.
func value[T any](node T, err error) func(pick func(T) int64) (int64, error) {
	return func(pick func(T) int64) (int64, error) {
		if err != nil {
			return 0, err
		}
		return pick(node), nil
	}
}

func (o entORM) cached(t testing.TB, model string, id int64, field string) int64 {
	t.Helper()
	v, err := o.read(o.ctx(), model, id, field)
	must(t, err)
	return v
}

func (o entORM) exact(model string, id int64, field string) (int64, error) {
	return o.read(entcounter.WithLive(o.ctx()), model, id, field)
}

func (o entORM) postsByViews(t testing.TB, min int64) []int64 {
	t.Helper()
	ps, err := o.client.Post.Query().Where(post.ViewsGT(min)).Order(ent.Desc(post.FieldViews)).All(o.ctx())
	must(t, err)
	ids := make([]int64, len(ps))
	for i, p := range ps {
		ids[i] = int64(p.ID)
	}
	return ids
}

func (o entORM) likesByKey(t testing.TB, ids []int64) map[int64]int64 {
	t.Helper()
	keys := make([]int, len(ids))
	for i, id := range ids {
		keys[i] = int(id)
	}
	ps, err := o.client.Post.Query().Where(post.IDIn(keys...)).All(o.ctx())
	must(t, err)
	out := make(map[int64]int64, len(ps))
	for _, p := range ps {
		out[int64(p.ID)] = p.Likes
	}
	return out
}

// rollup, rollupLoop, compact and moveToSlots run ent's passes, which go
// over every counter of the client: the tables eachORM left out are
// migrated first.
func (o entORM) rollup(string) error {
	if err := o.e.entEveryTable(o.ctx()); err != nil {
		return err
	}
	return entcounter.RollupPass(o.ctx(), o.client)
}

func (o entORM) rollupLoop(ctx context.Context, _ string, every time.Duration) error {
	if err := o.e.entEveryTable(o.ctx()); err != nil {
		return err
	}
	return entcounter.RollupLoop(ctx, o.client, every)
}

func (o entORM) compact(string) (hotcounter.Compacted, error) {
	if err := o.e.entEveryTable(o.ctx()); err != nil {
		return hotcounter.Compacted{}, err
	}
	return entcounter.CompactPass(o.ctx(), o.client)
}

func (o entORM) with(t testing.TB, s settings) counterORM {
	return o.configured(t, s, sharedEnt(o.e))
}

func (o entORM) staged(t testing.TB, s settings, st *stage) counterORM {
	return o.configured(t, s, ent.NewClient(ent.Driver(entDriverSending(o.e.kind, o.e.sqlDB, st.pass))))
}

func (o entORM) migrate() error {
	o.e.withCounters = true
	return entMigrateOnly(o.ctx(), o.client, o.e.entRoots, entcounter.WithCounters(o.client))
}

func (o entORM) through(t testing.TB, dsn string, s settings) counterORM {
	pool := openPoolAt(t, o.e.kind, dsn, o.e.pool)
	return o.configured(t, s, ent.NewClient(ent.Driver(entDriverSending(o.e.kind, pool, func(string) {}))))
}

// configured returns the ORM on client c, configured with s.
func (o entORM) configured(t testing.TB, s settings, c *ent.Client) counterORM {
	hook, err := entcounter.Configure(c, s.ent())
	if err != nil {
		t.Fatal(err)
	}
	c.Use(hook)
	return entORM{e: o.e, client: c}
}

func (o entORM) hotKeys(k int) ([]hotcounter.HotKey, error) { return entcounter.HotKeys(o.client, k) }

// eachORMInTurn runs fn for each ORM in turn on a database of kind, GORM
// first, never both at once: for a test that reads figures of the whole
// server (it holds it, exclusive), where the other ORM's writes would
// count in them. The subtests run inside their parent's turn (serial):
// marked parallel, they would wait for a turn that the tests waiting for
// the server the parent holds all have.
func eachORMInTurn(t *testing.T, kind dbKind, fn func(t *testing.T, o counterORM), opts ...option) {
	t.Helper()
	conformanceTest(t)
	t.Run("gorm", func(t *testing.T) {
		serial(t)
		e := open(t, kind, opts...)
		o := gormORM{e: e, gdb: e.db}
		must(t, o.migrate())
		fn(t, o)
	})
	t.Run("ent", func(t *testing.T) {
		serial(t)
		e := openEnt(t, kind, true, opts...)
		fn(t, entORM{e: e, client: e.client})
	})
}
