package integration_test

// The conformance suite: a behaviour written once against postsORM, which
// each ORM implements over the same posts table (likes, a sum counter;
// views, a rollup counter of 64 slots, declared alike by GORM's Post and
// ent's Post), and run for both ORMs on every database. A divergence
// between gormcounter and entcounter is then a failing test, not a test
// that one of them lacks.

import (
	"context"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/hotcounter/hotcounter/entcounter"
	"github.com/hotcounter/hotcounter/gormcounter"
	"github.com/hotcounter/hotcounter/integration_test/ent"
	"github.com/hotcounter/hotcounter/integration_test/ent/post"
)

// postsORM is what a behaviour does to posts through one ORM. field is
// "likes" or "views".
type postsORM interface {
	// db is the database, for raw checks of the tables; kind says which.
	db() *gorm.DB
	kind() dbKind
	create(t testing.TB, title string) int64
	increment(id int64, field string, n int64) error
	// cached reads a post as a plain load does (views: its column).
	cached(t testing.TB, id int64) (likes, views int64)
	// exact reads a post with every counter exact (Live, WithLive).
	exact(t testing.TB, id int64) (likes, views int64)
	// exactViews is exact's views, its error returned: for readers on
	// goroutines of their own.
	exactViews(id int64) (int64, error)
	// byViews returns the ids of the posts whose views column is over
	// min, most viewed first: the rollup column in WHERE and ORDER BY.
	byViews(t testing.TB, min int64) []int64
	rollup() error
	rollupLoop(ctx context.Context, every time.Duration, onError func(error)) error
	// inFlight returns the same ORM on a client of its own whose
	// increments combine at most n statements in flight (negative: none).
	inFlight(t testing.TB, n int) postsORM
}

// eachORM runs fn for GORM and for ent, each on every database (opts as
// for eachDB), on a migrated schema of its own.
func eachORM(t *testing.T, fn func(t *testing.T, o postsORM), opts ...option) {
	t.Helper()
	parallel(t)
	t.Run("gorm", func(t *testing.T) {
		eachDB(t, func(t *testing.T, e *env) {
			must(t, migrateAll(e.db))
			fn(t, gormPosts{e: e, gdb: e.db})
		}, opts...)
	})
	t.Run("ent", func(t *testing.T) {
		eachEnt(t, func(t *testing.T, e *entEnv) { fn(t, entPosts{e: e, client: e.client}) }, opts...)
	})
}

type gormPosts struct {
	e   *env
	gdb *gorm.DB
}

func (o gormPosts) db() *gorm.DB { return o.e.db }
func (o gormPosts) kind() dbKind { return o.e.kind }

func (o gormPosts) create(t testing.TB, title string) int64 {
	return int64(newPost(t, o.gdb, title).ID)
}

func (o gormPosts) increment(id int64, field string, n int64) error {
	return gormcounter.Increment(o.gdb.Model(&Post{ID: uint(id)}), map[string]string{"likes": "Likes", "views": "Views"}[field], n).Error
}

func (o gormPosts) cached(t testing.TB, id int64) (int64, int64) {
	t.Helper()
	var p Post
	must(t, o.gdb.First(&p, id).Error)
	return p.Likes, p.Views
}

func (o gormPosts) exact(t testing.TB, id int64) (int64, int64) {
	t.Helper()
	p := exact(t, o.gdb, uint(id))
	return p.Likes, p.Views
}

func (o gormPosts) exactViews(id int64) (int64, error) {
	var p Post
	err := o.gdb.Clauses(gormcounter.Live).First(&p, id).Error
	return p.Views, err
}

func (o gormPosts) byViews(t testing.TB, min int64) []int64 {
	t.Helper()
	var ps []Post
	must(t, o.gdb.Where("views > ?", min).Order("views DESC").Find(&ps).Error)
	ids := make([]int64, len(ps))
	for i, p := range ps {
		ids[i] = int64(p.ID)
	}
	return ids
}

func (o gormPosts) rollup() error { return gormcounter.RollupPass(o.gdb, &Post{}) }

func (o gormPosts) rollupLoop(ctx context.Context, every time.Duration, onError func(error)) error {
	return gormcounter.RollupLoop(ctx, o.gdb, every, onError, &Post{})
}

func (o gormPosts) inFlight(t testing.TB, n int) postsORM {
	return gormPosts{e: o.e, gdb: withPlugin(t, o.e, gormcounter.Config{InFlight: n})}
}

type entPosts struct {
	e      *entEnv
	client *ent.Client
}

func (o entPosts) db() *gorm.DB { return o.e.db }
func (o entPosts) kind() dbKind { return o.e.kind }

func (o entPosts) create(t testing.TB, title string) int64 {
	t.Helper()
	p, err := o.client.Post.Create().SetTitle(title).Save(context.Background())
	must(t, err)
	return int64(p.ID)
}

func (o entPosts) increment(id int64, field string, n int64) error {
	u := o.client.Post.UpdateOneID(int(id))
	if field == "views" {
		return u.AddViews(n).Exec(context.Background())
	}
	return u.AddLikes(n).Exec(context.Background())
}

func (o entPosts) cached(t testing.TB, id int64) (int64, int64) {
	t.Helper()
	p, err := o.client.Post.Get(context.Background(), int(id))
	must(t, err)
	return p.Likes, p.Views
}

func (o entPosts) exact(t testing.TB, id int64) (int64, int64) {
	t.Helper()
	p, err := o.client.Post.Get(entcounter.WithLive(context.Background()), int(id))
	must(t, err)
	return p.Likes, p.Views
}

func (o entPosts) exactViews(id int64) (int64, error) {
	p, err := o.client.Post.Get(entcounter.WithLive(context.Background()), int(id))
	if err != nil {
		return 0, err
	}
	return p.Views, nil
}

func (o entPosts) byViews(t testing.TB, min int64) []int64 {
	t.Helper()
	ps, err := o.client.Post.Query().Where(post.ViewsGT(min)).Order(ent.Desc(post.FieldViews)).All(context.Background())
	must(t, err)
	ids := make([]int64, len(ps))
	for i, p := range ps {
		ids[i] = int64(p.ID)
	}
	return ids
}

func (o entPosts) rollup() error { return entcounter.RollupPass(context.Background(), o.client) }

func (o entPosts) rollupLoop(ctx context.Context, every time.Duration, onError func(error)) error {
	return entcounter.RollupLoop(ctx, o.client, every, onError)
}

func (o entPosts) inFlight(t testing.TB, n int) postsORM {
	c := reopenEnt(t, o.e)
	if _, err := entcounter.Configure(c, entcounter.Config{InFlight: n}); err != nil {
		t.Fatal(err)
	}
	return entPosts{e: o.e, client: c}
}
