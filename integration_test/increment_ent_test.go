package integration_test

import (
	"context"
	"regexp"
	"sync"
	"sync/atomic"
	"testing"

	"entgo.io/ent/dialect/sql"

	"github.com/hotcounter/hotcounter/entcounter"
	"github.com/hotcounter/hotcounter/integration_test/ent"
	"github.com/hotcounter/hotcounter/integration_test/ent/post"
	_ "github.com/hotcounter/hotcounter/integration_test/ent/runtime"
	"github.com/hotcounter/hotcounter/integration_test/ent/schema"
	"github.com/hotcounter/hotcounter/integration_test/ent/tag"
	_ "github.com/jackc/pgx/v5/stdlib"
)

// An UpdateOne with predicates writes the counter only if the row matches
// them, as ent writes other fields; else NotFound.
func TestEntUpdateOneHonoursPredicates(t *testing.T) {
	parallel(t)
	eachEnt(t, func(t *testing.T, e *entEnv) {
		ctx := context.Background()
		c := e.client
		p := c.Post.Create().SetTitle("draft").SaveX(ctx)
		err := c.Post.UpdateOneID(p.ID).Where(post.TitleEQ("published")).AddLikes(1).AddViews(1).Exec(ctx)
		if !ent.IsNotFound(err) {
			t.Fatalf("increment of a row that does not match: %v, want NotFound", err)
		}
		c.Post.UpdateOneID(p.ID).Where(post.TitleEQ("draft")).AddLikes(2).AddViews(3).ExecX(ctx)
		if got := c.Post.GetX(entcounter.WithLive(ctx), p.ID); got.Likes != 2 || got.Views != 3 {
			t.Fatalf("likes=%d views=%d, want 2 and 3 (only the matching update)", got.Likes, got.Views)
		}
	})
}

// An update by a condition of two counters reads the keys of the rows it
// writes once, not once per counter (each counter's hook ran its own
// SELECT of the same ids), and writes both to exactly those rows; in a
// transaction too. A hook between the counters' hooks that narrows the
// update makes the inner counter read them again. Every database.
func TestEntUpdateOfTwoCountersReadsItsRowsOnce(t *testing.T) {
	parallel(t)
	keyReads := regexp.MustCompile("query=SELECT [`\"]posts[`\"]\\.[`\"]id[`\"] FROM")
	eachEnt(t, func(t *testing.T, e *entEnv) {
		ctx := context.Background()
		var reads atomic.Int64
		c := ent.NewClient(ent.Driver(entDriver(t, e.env, 4, func(statement string) {
			if keyReads.MatchString(statement) {
				reads.Add(1)
			}
		})))
		hot := c.Post.Create().SetTitle("hot").SaveX(ctx)
		also := c.Post.Create().SetTitle("hot").SaveX(ctx)
		cold := c.Post.Create().SetTitle("cold").SaveX(ctx)
		reads.Store(0)
		if n := c.Post.Update().Where(post.TitleEQ("hot")).AddLikes(1).AddViews(2).SaveX(ctx); n != 2 {
			t.Fatalf("the update reports %d rows, want 2", n)
		}
		if n := reads.Swap(0); n != 1 {
			t.Errorf("an update of two counters by a condition read the posts' keys %d times, want once", n)
		}
		must(t, inTx(ctx, c, func(tx *ent.Tx) error {
			_, err := tx.Post.Update().Where(post.TitleEQ("hot")).AddLikes(1).AddViews(2).Save(ctx)
			return err
		}))
		if n := reads.Load(); n != 1 {
			t.Errorf("in a transaction, the update read the posts' keys %d times, want once", n)
		}
		// A hook between the two counters' hooks (the schema's narrowing
		// mixin) adds a predicate: the views counter's hook reads the keys
		// again, and writes only the rows that still match.
		reads.Store(0)
		narrowed := schema.Narrowed(ctx, sql.FieldNEQ(post.FieldID, also.ID))
		c.Post.Update().Where(post.TitleEQ("hot")).AddLikes(1).AddViews(2).ExecX(narrowed)
		if n := reads.Load(); n != 2 {
			t.Errorf("an update narrowed between its counters' hooks read the keys %d times, want twice", n)
		}
		for _, p := range []struct {
			id           int
			likes, views int64
		}{{hot.ID, 3, 6}, {also.ID, 3, 4}, {cold.ID, 0, 0}} {
			if got := c.Post.GetX(entcounter.WithLive(ctx), p.id); got.Likes != p.likes || got.Views != p.views {
				t.Errorf("post %d: likes=%d views=%d, want %d and %d", p.id, got.Likes, got.Views, p.likes, p.views)
			}
		}
	})
}

// Concurrent assignments of the total end at the value assigned, never at
// a sum of them.
func TestEntConcurrentSetsDoNotAddUp(t *testing.T) {
	parallel(t)
	eachEnt(t, func(t *testing.T, e *entEnv) {
		ctx := context.Background()
		c := e.client
		for round := 0; round < 10; round++ {
			p := c.Post.Create().SetTitle("set").SaveX(ctx)
			var wg sync.WaitGroup
			for w := 0; w < 4; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if err := c.Post.UpdateOneID(p.ID).SetLikes(10).SetViews(20).Exec(ctx); err != nil {
						t.Errorf("set: %v", err)
					}
				}()
			}
			wg.Wait()
			if got := c.Post.GetX(entcounter.WithLive(ctx), p.ID); got.Likes != 10 || got.Views != 20 {
				t.Fatalf("round %d: likes=%d views=%d after four SetLikes(10).SetViews(20), want 10 and 20", round, got.Likes, got.Views)
			}
		}
	})
}

// Upserts: a create-time counter value sets the total (it does not add on
// every conflict), and the default 0 never resets a rollup column.
func TestAnUpsertSetsTheCounterTotalAndItsDefaultNeverResetsARollup(t *testing.T) {
	parallel(t)
	eachEnt(t, func(t *testing.T, e *entEnv) {
		ctx := context.Background()
		c := e.client
		upsert := func(name string, uses int64) {
			t.Helper()
			c.Tag.Create().SetName(name).SetUses(uses).OnConflictColumns(tag.FieldName).UpdateNewValues().ExecX(ctx)
		}
		for i := 0; i < 3; i++ {
			upsert("go", 5)
		}
		g := c.Tag.Query().Where(tag.NameEQ("go")).OnlyX(ctx)
		if g.Uses != 5 {
			t.Fatalf("three upserts with SetUses(5): uses=%d, want 5", g.Uses)
		}
		c.Tag.UpdateOneID(g.ID).AddUses(1).AddHits(7).ExecX(ctx)
		must(t, entcounter.RollupPass(ctx, c))
		// An upsert that names no counter leaves both alone.
		c.Tag.Create().SetName("go").OnConflictColumns(tag.FieldName).UpdateNewValues().ExecX(ctx)
		c.Tag.CreateBulk(c.Tag.Create().SetName("go"), c.Tag.Create().SetName("rust")).
			OnConflictColumns(tag.FieldName).UpdateNewValues().ExecX(ctx)
		g = c.Tag.Query().Where(tag.NameEQ("go")).OnlyX(entcounter.WithLive(ctx))
		if g.Uses != 6 || g.Hits != 7 {
			t.Fatalf("after upserts without counters: uses=%d hits=%d, want 6 and 7", g.Uses, g.Hits)
		}
		// A rollup counter's value in an upsert sets its total too, pending
		// slot rows included.
		c.Tag.UpdateOneID(g.ID).AddHits(3).ExecX(ctx)
		c.Tag.Create().SetName("go").SetHits(5).OnConflictColumns(tag.FieldName).UpdateNewValues().ExecX(ctx)
		if g = c.Tag.Query().Where(tag.NameEQ("go")).OnlyX(entcounter.WithLive(ctx)); g.Hits != 5 {
			t.Fatalf("upsert with SetHits(5) over 7 folded and 3 pending: hits=%d, want 5", g.Hits)
		}
		// On MySQL ent cannot tell the ids of a bulk upsert's rows: a counter
		// value there is refused instead of written to the wrong row.
		err := c.Tag.CreateBulk(c.Tag.Create().SetName("go").SetUses(10), c.Tag.Create().SetName("zig").SetUses(20)).
			OnConflictColumns(tag.FieldName).UpdateNewValues().Exec(ctx)
		if e.kind == my {
			if err == nil {
				t.Fatal("a bulk upsert with counter values on MariaDB succeeded")
			}
			return
		}
		must(t, err)
		for name, want := range map[string]int64{"go": 10, "zig": 20} {
			if got := c.Tag.Query().Where(tag.NameEQ(name)).OnlyX(ctx); got.Uses != want {
				t.Fatalf("bulk upsert: %s uses=%d, want %d", name, got.Uses, want)
			}
		}
	}, everyEntTable())
}

// The entity Save returns shows the counter as a load would.
func TestEntSaveReturnsCounters(t *testing.T) {
	parallel(t)
	eachEnt(t, func(t *testing.T, e *entEnv) {
		ctx := context.Background()
		c := e.client
		p := c.Post.Create().SetTitle("s").SetLikes(5).SetViews(7).SaveX(ctx)
		if p.Likes != 5 || p.Views != 7 {
			t.Fatalf("Create.Save returned likes=%d views=%d, want 5 and 7", p.Likes, p.Views)
		}
		bulk := c.Post.CreateBulk(c.Post.Create().SetTitle("b").SetLikes(3)).SaveX(ctx)
		if bulk[0].Likes != 3 {
			t.Fatalf("CreateBulk.Save returned likes=%d, want 3", bulk[0].Likes)
		}
		if p = c.Post.UpdateOneID(p.ID).AddLikes(1).SaveX(ctx); p.Likes != 6 {
			t.Fatalf("AddLikes(1).Save returned likes=%d, want 6", p.Likes)
		}
		if p = c.Post.UpdateOneID(p.ID).SetViews(50).SaveX(ctx); p.Views != 50 {
			t.Fatalf("SetViews(50).Save returned views=%d, want 50", p.Views)
		}
		if p = c.Post.UpdateOneID(p.ID).AddViews(1).SaveX(ctx); p.Views != 50 {
			t.Fatalf("AddViews(1).Save returned views=%d, want the cached 50 (as a plain load shows)", p.Views)
		}
	})
}

func TestEntIncrementLoadRollup(t *testing.T) {
	parallel(t)
	eachEnt(t, func(t *testing.T, e *entEnv) {
		ctx := context.Background()
		c := e.client
		p := c.Post.Create().SetTitle("hello").SetLikes(5).SaveX(ctx)
		for i := 0; i < 40; i++ {
			c.Post.UpdateOneID(p.ID).AddLikes(1).AddViews(2).ExecX(ctx)
		}
		c.Post.UpdateOneID(p.ID).AddLikes(-3).ExecX(ctx)
		// ent runs each update in a transaction: on MariaDB it writes its
		// session's own slot row, beside the 16 pre-created ones.
		lo, hi := int64(2), int64(16)
		if e.kind == my {
			lo, hi = 17, 16+defaultPool
		}
		if n := rawInt(t, e.db, "SELECT COUNT(*) FROM post_likes_slots WHERE post_id = ?", p.ID); n > hi || n < lo {
			t.Fatalf("%d likes slot rows, want %d..%d", n, lo, hi)
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
			must(t, errOf(entcounter.CompactPass(ctx, c)))
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
	}, everyEntTable())
}

func TestEntBulkUpdatesAddAndSetReportRowsAndRefuseMissingOnes(t *testing.T) {
	parallel(t)
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

// A transaction's client carries the transaction's driver: a rollup pass,
// which needs transactions of its own, refuses it; the title written
// beside an increment in a rolled-back transaction is discarded with it
// (TestIncrementIsInTheCallersTransaction has the counters, for both ORMs).
func TestEntTransactionsClientsAreNotForPasses(t *testing.T) {
	parallel(t)
	eachEnt(t, func(t *testing.T, e *entEnv) {
		ctx := context.Background()
		c := e.client
		p := c.Post.Create().SetTitle("tx").SaveX(ctx)
		tx, err := c.Tx(ctx)
		must(t, err)
		tx.Post.UpdateOneID(p.ID).AddLikes(5).SetTitle("inside").ExecX(ctx)
		if err := entcounter.RollupPass(ctx, tx.Client()); err == nil {
			t.Fatal("RollupPass accepted a transaction's client")
		}
		must(t, tx.Rollback())
		if got := c.Post.GetX(ctx, p.ID); got.Likes != 0 || got.Title != "tx" {
			t.Fatalf("after rollback likes=%d title=%q, want 0 and tx", got.Likes, got.Title)
		}
	})
}
