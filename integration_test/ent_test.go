package integration_test

import (
	"context"
	stdsql "database/sql"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"entgo.io/ent/dialect"
	entsql "entgo.io/ent/dialect/sql"
	"entgo.io/ent/dialect/sql/schema"
	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver for ent

	"github.com/hotcounter/hotcounter/entcounter"
	"github.com/hotcounter/hotcounter/gormcounter"
	"github.com/hotcounter/hotcounter/integration_test/ent"
	"github.com/hotcounter/hotcounter/integration_test/ent/migrate"
	"github.com/hotcounter/hotcounter/integration_test/ent/post"
	_ "github.com/hotcounter/hotcounter/integration_test/ent/runtime" // registers the counter hooks
)

// entKinds are the databases entcounter supports.
var entKinds = []dbKind{pg, lite, my}

// entEnv is one test's database seen through ent (and through GORM, for
// cross-ORM checks and raw SQL).
type entEnv struct {
	*env
	client *ent.Client
	stmts  atomic.Int64 // statements ent sent
}

// openEnt returns ent and GORM clients on one fresh database. ent owns the
// schema unless migrate is false.
func openEnt(t testing.TB, kind dbKind, migrate bool) *entEnv {
	t.Helper()
	e := &entEnv{env: open(t, kind)}
	e.client = reopenEnt(t, e)
	if migrate {
		must(t, e.client.Schema.Create(context.Background()))
	}
	return e
}

// reopenEnt returns a new ent client on e's database, as another process
// would open it: its own pool, nothing learned of the database yet.
func reopenEnt(t testing.TB, e *entEnv) *ent.Client { return reopenEntPool(t, e, 64) }

// reopenEntPool is reopenEnt with a pool of at most conns connections.
func reopenEntPool(t testing.TB, e *entEnv, conns int) *ent.Client {
	t.Helper()
	name, dial := "sqlite", dialect.SQLite
	switch e.kind {
	case pg:
		name, dial = "pgx", dialect.Postgres
	case my:
		name, dial = "mysql", dialect.MySQL
	}
	db, err := stdsql.Open(name, e.dsn)
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(conns)
	db.SetMaxIdleConns(conns)
	t.Cleanup(func() { db.Close() })
	drv := dialect.DebugWithContext(entsql.OpenDB(dial, db), func(context.Context, ...any) { e.stmts.Add(1) })
	return ent.NewClient(ent.Driver(drv))
}

func eachEnt(t *testing.T, fn func(t *testing.T, e *entEnv)) {
	t.Helper()
	for _, k := range entKinds {
		t.Run(string(k), func(t *testing.T) { fn(t, openEnt(t, k, true)) })
	}
}

func entStatements(e *entEnv, fn func()) int64 {
	before := e.stmts.Load()
	fn()
	return e.stmts.Load() - before
}

// The slot tables are ordinary ent tables: the generated migrate.Tables,
// which Schema.Create, migrate.NamedDiff and Atlas's ent:// all start from,
// hold them with their unique index and cascading foreign key.
func TestEntSlotTablesInMigrateTables(t *testing.T) {
	var found bool
	for _, tbl := range migrate.Tables {
		if tbl.Name != "post_likes_slots" {
			continue
		}
		found = true
		var unique, cascade bool
		for _, idx := range tbl.Indexes {
			if idx.Unique && len(idx.Columns) == 2 && idx.Columns[0].Name == "post_id" && idx.Columns[1].Name == "slot" {
				unique = true
			}
		}
		for _, fk := range tbl.ForeignKeys {
			if fk.RefTable != nil && fk.RefTable.Name == "posts" && fk.OnDelete == schema.Cascade {
				cascade = true
			}
		}
		if !unique || !cascade {
			t.Fatalf("post_likes_slots: unique (post_id, slot) %v, ON DELETE CASCADE to posts %v", unique, cascade)
		}
	}
	if !found {
		t.Fatal("migrate.Tables has no post_likes_slots")
	}
	for _, tbl := range migrate.Tables {
		if tbl.Name == "posts" {
			for _, c := range tbl.Columns {
				if c.Name == "likes" {
					t.Fatal("migrate.Tables gives posts a likes column (a sum counter has none)")
				}
			}
		}
	}
}

func TestEntMigrationCreatesSlotTables(t *testing.T) {
	eachEnt(t, func(t *testing.T, e *entEnv) {
		ctx := context.Background()
		mig := e.db.Migrator()
		for _, table := range []string{"post_likes_slots", "post_views_slots", "author_followers_slots", "comment_upvote_slots"} {
			if !mig.HasTable(table) {
				t.Fatalf("Schema.Create made no %s", table)
			}
		}
		if mig.HasColumn("posts", "likes") {
			t.Fatal("a sum counter got a column on posts")
		}
		if !mig.HasColumn("posts", "views") {
			t.Fatal("a rollup counter has no column on posts")
		}
		// Cascade: deleting a post removes its slot rows.
		p := e.client.Post.Create().SetTitle("doomed").SaveX(ctx)
		e.client.Post.UpdateOneID(p.ID).AddLikes(3).AddViews(2).ExecX(ctx)
		// One slot row after one increment; all 16 where sum counters
		// pre-create their slot rows by default (MariaDB).
		want := int64(1)
		if e.kind == my {
			want = 16
		}
		if n := rawInt(t, e.db, "SELECT COUNT(*) FROM post_likes_slots WHERE post_id = ?", p.ID); n != want {
			t.Fatalf("%d slot rows after one increment, want %d", n, want)
		}
		e.client.Post.DeleteOneID(p.ID).ExecX(ctx)
		if n := rawInt(t, e.db, "SELECT COUNT(*) FROM post_likes_slots") + rawInt(t, e.db, "SELECT COUNT(*) FROM post_views_slots"); n != 0 {
			t.Fatalf("%d slot rows outlived their post", n)
		}
	})
}

func TestEntIncrementLoadRollup(t *testing.T) {
	eachEnt(t, func(t *testing.T, e *entEnv) {
		ctx := context.Background()
		c := e.client
		p := c.Post.Create().SetTitle("hello").SetLikes(5).SaveX(ctx)
		for i := 0; i < 40; i++ {
			c.Post.UpdateOneID(p.ID).AddLikes(1).AddViews(2).ExecX(ctx)
		}
		c.Post.UpdateOneID(p.ID).AddLikes(-3).ExecX(ctx)
		if n := rawInt(t, e.db, "SELECT COUNT(*) FROM post_likes_slots WHERE post_id = ?", p.ID); n > 16 || n < 2 {
			t.Fatalf("%d likes slot rows, want 2..16 (random slots)", n)
		}
		got := c.Post.GetX(ctx, p.ID)
		if got.Likes != 42 || got.Views != 0 || got.Title != "hello" {
			t.Fatalf("got likes=%d views=%d title=%q, want 42, 0 (not rolled up yet), hello", got.Likes, got.Views, got.Title)
		}
		if live := c.Post.GetX(entcounter.WithLive(ctx), p.ID); live.Views != 80 || live.Likes != 42 {
			t.Fatalf("live: likes=%d views=%d, want 42 and 80", live.Likes, live.Views)
		}
		must(t, entcounter.RollupPass(ctx, c))
		if got := c.Post.GetX(ctx, p.ID); got.Views != 80 || got.Likes != 42 {
			t.Fatalf("after rollup views=%d likes=%d, want 80 and 42", got.Views, got.Likes)
		}
		// CompactPass gathers the sum counter's slot rows: one holds its total
		// (TestCompactRefusesMySQL covers MariaDB).
		if e.kind != my {
			must(t, entcounter.CompactPass(ctx, c))
			if got := c.Post.GetX(ctx, p.ID); got.Likes != 42 {
				t.Fatalf("after CompactPass likes=%d, want 42", got.Likes)
			}
			if n := rawInt(t, e.db, "SELECT COUNT(*) FROM post_likes_slots WHERE post_id = ? AND n <> 0", p.ID); n != 1 {
				t.Fatalf("%d likes slot rows hold a value after CompactPass, want 1", n)
			}
		}
		// MySQL folds empty the slot rows (n = 0) and keep them.
		if n := rawInt(t, e.db, "SELECT COUNT(*) FROM post_views_slots WHERE n <> 0"); n != 0 {
			t.Fatalf("rollup left %d slot rows pending", n)
		}
		// The cached column is usable in predicates and orders.
		if n := c.Post.Query().Where(post.ViewsGTE(80)).CountX(ctx); n != 1 {
			t.Fatalf("views >= 80 matched %d posts, want 1", n)
		}
		// Select of a subset: counters not selected are not filled.
		var titles []*ent.Post
		titles = c.Post.Query().Select(post.FieldTitle).AllX(ctx)
		if len(titles) != 1 || titles[0].Likes != 0 || titles[0].Title != "hello" {
			t.Fatalf("Select(title) = %+v", titles)
		}
		if only := c.Post.Query().Select(post.FieldLikes).OnlyX(ctx); only.Likes != 42 {
			t.Fatalf("Select(likes) filled %d, want 42", only.Likes)
		}
	})
}

func TestEntSetAndBulkUpdate(t *testing.T) {
	eachEnt(t, func(t *testing.T, e *entEnv) {
		ctx := context.Background()
		c := e.client
		posts := c.Post.CreateBulk(
			c.Post.Create().SetTitle("a").SetLikes(1),
			c.Post.Create().SetTitle("b").SetLikes(2),
			c.Post.Create().SetTitle("c"),
		).SaveX(ctx)
		ids := []int{posts[0].ID, posts[1].ID}
		// A counter-only bulk update reports the posts it wrote.
		n := c.Post.Update().Where(post.IDIn(ids...)).AddLikes(10).AddViews(1).SaveX(ctx)
		if n != 2 {
			t.Fatalf("bulk AddLikes affected %d, want 2", n)
		}
		// With another field too, the title and the counter both change.
		n = c.Post.Update().Where(post.TitleEQ("c")).SetTitle("c2").AddLikes(7).SaveX(ctx)
		if n != 1 {
			t.Fatalf("bulk title+likes affected %d, want 1", n)
		}
		// Set replaces the total exactly, in both modes.
		c.Post.UpdateOneID(posts[1].ID).SetLikes(100).SetViews(50).ExecX(ctx)
		want := map[int][2]int64{posts[0].ID: {11, 1}, posts[1].ID: {100, 50}, posts[2].ID: {7, 0}}
		for _, p := range c.Post.Query().AllX(entcounter.WithLive(ctx)) {
			if w := want[p.ID]; p.Likes != w[0] || p.Views != w[1] {
				t.Errorf("post %s: likes=%d views=%d, want %v", p.Title, p.Likes, p.Views, w)
			}
		}
		if n := rawInt(t, e.db, "SELECT COUNT(*) FROM post_views_slots WHERE post_id = ?", posts[1].ID); n != 0 {
			t.Fatalf("SetViews left %d pending slot rows", n)
		}
		// A missing post is NotFound, and writes no slot row.
		before := rawInt(t, e.db, "SELECT COUNT(*) FROM post_likes_slots")
		if err := c.Post.UpdateOneID(1 << 30).AddLikes(1).Exec(ctx); !ent.IsNotFound(err) {
			t.Fatalf("increment of a missing post: %v, want NotFound", err)
		}
		if after := rawInt(t, e.db, "SELECT COUNT(*) FROM post_likes_slots"); after != before {
			t.Fatal("an increment of a missing post wrote a slot row")
		}
	})
}

func TestEntTransactions(t *testing.T) {
	eachEnt(t, func(t *testing.T, e *entEnv) {
		ctx := context.Background()
		c := e.client
		p := c.Post.Create().SetTitle("tx").SaveX(ctx)
		tx, err := c.Tx(ctx)
		must(t, err)
		tx.Post.UpdateOneID(p.ID).AddLikes(5).SetTitle("inside").ExecX(ctx)
		if got := tx.Post.GetX(ctx, p.ID); got.Likes != 5 {
			t.Fatalf("inside the transaction likes=%d, want 5", got.Likes)
		}
		must(t, tx.Rollback())
		if got := c.Post.GetX(ctx, p.ID); got.Likes != 0 || got.Title != "tx" {
			t.Fatalf("after rollback likes=%d title=%q, want 0 and tx", got.Likes, got.Title)
		}
		tx, err = c.Tx(ctx)
		must(t, err)
		tx.Post.UpdateOneID(p.ID).AddLikes(2).ExecX(ctx)
		tx.Post.UpdateOneID(p.ID).SetLikes(9).ExecX(ctx)
		must(t, tx.Commit())
		if got := c.Post.GetX(ctx, p.ID); got.Likes != 9 {
			t.Fatalf("after commit likes=%d, want 9", got.Likes)
		}
		// A transaction's client carries the transaction's driver: a rollup
		// pass needs transactions of its own.
		if err := entcounter.RollupPass(ctx, tx.Client()); err == nil {
			t.Fatal("RollupPass accepted a transaction's client")
		}
	})
}

func TestEntLoadsAreNotNPlusOne(t *testing.T) {
	eachEnt(t, func(t *testing.T, e *entEnv) {
		ctx := context.Background()
		c := e.client
		a := c.Author.Create().SetName("ann").SaveX(ctx)
		c.Author.UpdateOneID(a.ID).AddFollowers(4).ExecX(ctx)
		for i := 0; i < 100; i++ {
			p := c.Post.Create().SetTitle(fmt.Sprint(i)).SetAuthorID(a.ID).SaveX(ctx)
			c.Post.UpdateOneID(p.ID).AddLikes(int64(i)).ExecX(ctx)
			cm := c.Comment.Create().SetPostID(p.ID).SetBody("x").SaveX(ctx)
			c.Comment.UpdateOneID(cm.ID).AddUpvote(int64(i % 3)).ExecX(ctx)
		}
		var posts []*ent.Post
		n := entStatements(e, func() { posts = c.Post.Query().WithAuthor().WithComments().Order(post.ByID()).AllX(ctx) })
		// posts, their likes; authors, followers; comments, upvotes.
		if n != 6 {
			t.Fatalf("loading 100 posts with author and comments sent %d statements, want 6", n)
		}
		for i, p := range posts {
			if p.Likes != int64(i) || p.Edges.Author.Followers != 4 || p.Edges.Comments[0].Upvote != int64(i%3) {
				t.Fatalf("post %d: likes=%d followers=%d upvote=%d", i, p.Likes, p.Edges.Author.Followers, p.Edges.Comments[0].Upvote)
			}
		}
		// Traversals fill too.
		if got := c.Author.QueryPosts(a).Where(post.TitleEQ("7")).OnlyX(ctx); got.Likes != 7 {
			t.Fatalf("traversal: likes=%d, want 7", got.Likes)
		}
	})
}

func TestEntConcurrentIncrementsLoseNothing(t *testing.T) {
	eachEnt(t, func(t *testing.T, e *entEnv) {
		ctx := context.Background()
		c := e.client
		p := c.Post.Create().SetTitle("viral").SaveX(ctx)
		writers, each := writersFor(e.kind)
		var wg sync.WaitGroup
		var failed atomic.Int64
		for w := 0; w < writers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < each; i++ {
					if err := c.Post.UpdateOneID(p.ID).AddLikes(1).AddViews(1).Exec(ctx); err != nil {
						failed.Add(1)
						t.Errorf("increment: %v", err)
						return
					}
				}
			}()
		}
		wg.Wait()
		want := int64(writers * each)
		got := c.Post.GetX(entcounter.WithLive(ctx), p.ID)
		if failed.Load() != 0 || got.Likes != want || got.Views != want {
			t.Fatalf("likes=%d views=%d, want %d each (%d failed)", got.Likes, got.Views, want, failed.Load())
		}
	})
}

func TestEntRollupUnderWriters(t *testing.T) {
	eachEnt(t, func(t *testing.T, e *entEnv) {
		ctx := context.Background()
		c := e.client
		p := c.Post.Create().SetTitle("busy").SaveX(ctx)
		loopCtx, stop := context.WithCancel(ctx)
		loopDone := make(chan error, 1)
		var loopErrs atomic.Int64
		go func() {
			loopDone <- entcounter.RollupLoop(loopCtx, c, 5*time.Millisecond, func(err error) {
				loopErrs.Add(1)
				t.Logf("rollup pass: %v", err)
			})
		}()
		const writers, each = 8, 100
		var wg sync.WaitGroup
		readerDone := make(chan struct{})
		go func() { // exact reads never go backwards
			defer close(readerDone)
			var last int64
			for loopCtx.Err() == nil {
				got, err := c.Post.Get(entcounter.WithLive(ctx), p.ID)
				if err != nil {
					t.Errorf("live read: %v", err)
					return
				}
				if got.Views < last {
					t.Errorf("live views went back from %d to %d", last, got.Views)
					return
				}
				last = got.Views
			}
		}()
		for w := 0; w < writers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < each; i++ {
					if err := c.Post.UpdateOneID(p.ID).AddViews(1).Exec(ctx); err != nil {
						t.Errorf("increment: %v", err)
						return
					}
				}
			}()
		}
		wg.Wait()
		stop()
		must(t, <-loopDone)
		<-readerDone
		if n := loopErrs.Load(); n != 0 {
			t.Fatalf("%d rollup passes failed under the writers", n)
		}
		must(t, entcounter.RollupPass(ctx, c))
		if got := c.Post.GetX(ctx, p.ID); got.Views != writers*each {
			t.Fatalf("views=%d after the final pass, want %d", got.Views, writers*each)
		}
	})
}

func TestEntIncrementDoesNotWaitForParentLock(t *testing.T) {
	e := openEnt(t, pg, true)
	ctx := context.Background()
	c := e.client
	p := c.Post.Create().SetTitle("held").SaveX(ctx)
	// With the slot rows in place (an increment of a fresh slot inserts, and
	// the foreign key check waits for FOR UPDATE; FOR NO KEY UPDATE, which
	// any UPDATE of the post takes, it does not).
	must(t, e.db.Exec("INSERT INTO post_likes_slots (post_id, slot, n) SELECT ?, g, 0 FROM generate_series(0, 15) g ON CONFLICT DO NOTHING", p.ID).Error)
	for _, mode := range []string{"UPDATE", "NO KEY UPDATE"} {
		release := locked(t, e.db, &Post{}, uint(p.ID), mode)
		deadline, cancel := context.WithTimeout(ctx, 10*time.Second)
		for i := 0; i < 20; i++ {
			// An increment that queued on the lock would hang past the
			// deadline (the holder lets go only afterwards) and fail.
			if err := c.Post.UpdateOneID(p.ID).AddLikes(1).Exec(deadline); err != nil {
				t.Fatalf("increment with the post held FOR %s: %v", mode, err)
			}
		}
		cancel()
		release()
	}
	if got := c.Post.GetX(ctx, p.ID); got.Likes != 40 {
		t.Fatalf("likes=%d, want 40", got.Likes)
	}
}

// TestCrossORM: one database, both ORMs, the same slot tables and rollup
// column: what one writes the other reads exactly.
func TestCrossORM(t *testing.T) {
	for _, k := range entKinds {
		for _, owner := range []string{"ent", "gorm"} {
			t.Run(string(k)+"/"+owner+" migrates", func(t *testing.T) {
				e := openEnt(t, k, owner == "ent")
				ctx := context.Background()
				if owner == "gorm" {
					must(t, migrateAll(e.db))
				}
				gp := Post{Title: "from gorm"}
				must(t, e.db.Create(&gp).Error)
				ep := e.client.Post.Create().SetTitle("from ent").SaveX(ctx)

				for i := 0; i < 10; i++ {
					must(t, gormcounter.Increment(e.db.Model(&Post{ID: gp.ID}), "Likes", 1).Error)
					must(t, gormcounter.Increment(e.db.Model(&Post{ID: uint(ep.ID)}), "Views", 2).Error)
					e.client.Post.UpdateOneID(int(gp.ID)).AddViews(3).ExecX(ctx)
					e.client.Post.UpdateOneID(ep.ID).AddLikes(4).ExecX(ctx)
				}
				check := func(stage string) {
					t.Helper()
					byEnt := map[int]*ent.Post{}
					for _, p := range e.client.Post.Query().AllX(entcounter.WithLive(ctx)) {
						byEnt[p.ID] = p
					}
					var byGorm []Post
					must(t, e.db.Clauses(gormcounter.Live).Order("id").Find(&byGorm).Error)
					want := map[int][2]int64{int(gp.ID): {10, 30}, ep.ID: {40, 20}}
					for _, g := range byGorm {
						w, en := want[int(g.ID)], byEnt[int(g.ID)]
						if g.Likes != w[0] || g.Views != w[1] || en.Likes != w[0] || en.Views != w[1] {
							t.Fatalf("%s: post %d: gorm reads %d/%d, ent reads %d/%d, want %v", stage, g.ID, g.Likes, g.Views, en.Likes, en.Views, w)
						}
					}
				}
				check("pending")
				must(t, gormcounter.Rollup(e.db, &Post{}))
				check("after GORM's rollup")
				e.client.Post.UpdateOneID(ep.ID).AddViews(5).ExecX(ctx)
				must(t, entcounter.RollupPass(ctx, e.client))
				if got := e.client.Post.GetX(ctx, ep.ID); got.Views != 25 {
					t.Fatalf("after ent's rollup views=%d, want 25", got.Views)
				}
			})
		}
	}
}
