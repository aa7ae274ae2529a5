package integration_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/hotcounter/hotcounter/entcounter"
	"github.com/hotcounter/hotcounter/gormcounter"
	"github.com/hotcounter/hotcounter/integration_test/ent"
	"github.com/hotcounter/hotcounter/integration_test/ent/post"
	"github.com/hotcounter/hotcounter/integration_test/ent/tag"
)

// An UpdateOne with predicates writes the counter only if the row matches
// them, as ent writes other fields; else NotFound.
func TestEntUpdateOneHonoursPredicates(t *testing.T) {
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

// Concurrent assignments of the total end at the value assigned, never at
// a sum of them.
func TestEntConcurrentSetsDoNotAddUp(t *testing.T) {
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
func TestEntUpserts(t *testing.T) {
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
	})
}

// The entity Save returns shows the counter as a load would.
func TestEntSaveReturnsCounters(t *testing.T) {
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

// Paths that select without ent's query spec (Select().Scan) leave sum
// counters out; transactions are recognised behind client.Debug().
func TestEntSelectScanAndDebug(t *testing.T) {
	eachEnt(t, func(t *testing.T, e *entEnv) {
		ctx := context.Background()
		c := e.client
		c.Post.Create().SetTitle("scan").SetLikes(2).ExecX(ctx)
		var rows []struct {
			ID       int    `json:"id"`
			Title    string `json:"title"`
			Views    int64  `json:"views"`
			AuthorID *int   `json:"author_id"`
		}
		c.Post.Query().Select().ScanX(ctx, &rows)
		if len(rows) != 1 || rows[0].Title != "scan" {
			t.Fatalf("Select().Scan = %+v", rows)
		}
		tx, err := c.Tx(ctx)
		must(t, err)
		defer tx.Rollback()
		if err := entcounter.RollupPass(ctx, tx.Client().Debug()); err == nil {
			t.Fatal("RollupPass accepted a transaction's client behind Debug()")
		}
	})
}

// Skip-locked slots (64, pre-created) lose nothing, in autocommit and in
// transactions, and spread over the slots.
func TestEntSkipLockedLosesNothing(t *testing.T) {
	eachEnt(t, func(t *testing.T, e *entEnv) {
		ctx := context.Background()
		c := e.client
		p := c.SkipPost.Create().SaveX(ctx)
		if n := rawInt(t, e.db, "SELECT COUNT(*) FROM skip_post_likes_slots WHERE skip_post_id = ?", p.ID); n != 64 {
			t.Fatalf("%d pre-created slot rows, want 64", n)
		}
		writers, each := writersFor(e.kind)
		if e.kind == my {
			each = 100 // four round trips an increment on MariaDB
		}
		done := hammer(t, writers, each, func() error { return c.SkipPost.UpdateOneID(p.ID).AddLikes(1).Exec(ctx) })
		done += hammer(t, 4, 10, func() error {
			tx, err := c.Tx(ctx)
			if err != nil {
				return err
			}
			if err := tx.SkipPost.UpdateOneID(p.ID).AddLikes(1).Exec(ctx); err != nil {
				return errors.Join(err, tx.Rollback())
			}
			return tx.Commit()
		})
		if got := c.SkipPost.GetX(ctx, p.ID); got.Likes != done || done != int64(writers*each+40) {
			t.Fatalf("likes=%d after %d acknowledged increments of %d", got.Likes, done, writers*each+40)
		}
		if used := rawInt(t, e.db, "SELECT COUNT(*) FROM skip_post_likes_slots WHERE skip_post_id = ? AND n > 0", p.ID); e.kind != lite && used < 2 {
			t.Fatalf("increments used %d slot rows, want them spread", used)
		}
	})
}

// InnoDB's trap through ent: 64 goroutines increment a parent created an
// instant before. likes has pre-created slots (MariaDB's default): exact,
// and the server counts no deadlock. views (rollup) has its slot rows
// inserted by the first increments: exact; deadlocks and waits are logged.
func TestEntFirstIncrementsOfAFreshParentDoNotDeadlock(t *testing.T) {
	e := openEnt(t, my, true)
	ctx := context.Background()
	c := e.client
	const writers, each = 64, 20
	for _, field := range []string{"likes", "views"} {
		t.Run(field, func(t *testing.T) {
			for round := range 5 {
				p := c.Post.Create().SetTitle("fresh").SaveX(ctx)
				deadlocks, waits := innodbStatus(t, e.db, "Innodb_deadlocks"), innodbStatus(t, e.db, "Innodb_row_lock_waits")
				done := hammer(t, writers, each, func() error {
					u := c.Post.UpdateOneID(p.ID)
					if field == "likes" {
						return u.AddLikes(1).Exec(ctx)
					}
					return u.AddViews(1).Exec(ctx)
				})
				deadlocks = innodbStatus(t, e.db, "Innodb_deadlocks") - deadlocks
				waits = innodbStatus(t, e.db, "Innodb_row_lock_waits") - waits
				got := c.Post.GetX(entcounter.WithLive(ctx), p.ID)
				value := got.Likes
				if field == "views" {
					value = got.Views
				}
				t.Logf("round %d: %d writers x %d: %s %d, deadlocks %d, row lock waits %d", round, writers, each, field, value, deadlocks, waits)
				if done != writers*each || value != done {
					t.Fatalf("%s %d after %d of %d increments", field, value, done, writers*each)
				}
				if field == "likes" && deadlocks != 0 {
					t.Fatalf("%d deadlocks with pre-created slots", deadlocks)
				}
			}
		})
	}
}

// Parents that existed before a pre-creating counter get their slot rows
// from PrecreateExisting; rows already there are kept.
func TestEntPrecreateExisting(t *testing.T) {
	eachEnt(t, func(t *testing.T, e *entEnv) {
		ctx := context.Background()
		c := e.client
		// Rows written past ent's hooks, as an import would.
		must(t, e.db.Exec("INSERT INTO skip_posts (id) VALUES (1001), (1002)").Error)
		kept := c.SkipPost.Create().SaveX(ctx)
		c.SkipPost.UpdateOneID(kept.ID).AddLikes(5).ExecX(ctx)
		must(t, entcounter.PrecreateExisting(ctx, c))
		must(t, entcounter.PrecreateExisting(ctx, c)) // idempotent
		for _, id := range []int{1001, 1002, kept.ID} {
			if n := rawInt(t, e.db, "SELECT COUNT(*) FROM skip_post_likes_slots WHERE skip_post_id = ?", id); n != 64 {
				t.Fatalf("post %d has %d slot rows, want 64", id, n)
			}
		}
		if got := c.SkipPost.GetX(ctx, kept.ID); got.Likes != 5 {
			t.Fatalf("likes=%d after PrecreateExisting, want 5", got.Likes)
		}
		if e.kind == my { // Post.likes pre-creates by default on MariaDB
			must(t, e.db.Exec("INSERT INTO posts (title, views) VALUES ('imported', 0)").Error)
			must(t, entcounter.PrecreateExisting(ctx, c))
			if n := rawInt(t, e.db, "SELECT COUNT(*) FROM post_likes_slots WHERE post_id = (SELECT MAX(id) FROM posts)"); n != 16 {
				t.Fatalf("the imported post has %d likes slot rows, want 16", n)
			}
		}
	})
}

// ent's write-behind buffer: exact totals, readable by GORM too; Pending
// shows what is not yet written; MariaDB is refused.
func TestEntBuffer(t *testing.T) {
	eachEnt(t, func(t *testing.T, e *entEnv) {
		ctx := context.Background()
		c := e.client
		buf, err := entcounter.NewBuffer(ctx, c, entcounter.BufferConfig{Interval: 20 * time.Millisecond})
		must(t, err)
		p := c.Post.Create().SetTitle("buffered").SaveX(ctx)
		writers, each := writersFor(e.kind)
		done := hammer(t, writers, each, func() error {
			return errors.Join(buf.Add(ctx, "Post", post.FieldLikes, p.ID, 1), buf.Add(ctx, "post", post.FieldViews, p.ID, 1))
		})
		if err := buf.Add(ctx, "Post", "title", p.ID, 1); err == nil {
			t.Fatal("Add of a field that is not a counter succeeded")
		}
		must(t, buf.Close(ctx))
		got := c.Post.GetX(entcounter.WithLive(ctx), p.ID)
		if got.Likes != done || got.Views != done {
			t.Fatalf("likes=%d views=%d after %d buffered increments of each", got.Likes, got.Views, done)
		}
		if g := exact(t, e.db, uint(p.ID)); g.Likes != done {
			t.Fatalf("GORM reads likes=%d, want %d", g.Likes, done)
		}
	})
}

// Append counters through ent: every increment a delta row, exact live
// reads, rollup folds them all, SetX sets the total; GORM reads the same.
func TestEntAppend(t *testing.T) {
	eachEnt(t, func(t *testing.T, e *entEnv) {
		ctx := context.Background()
		c := e.client
		s := c.Story.Create().SetTitle("s").SaveX(ctx)
		writers, each := writersFor(e.kind)
		done := hammer(t, writers, each, func() error { return c.Story.UpdateOneID(s.ID).AddClaps(1).Exec(ctx) })
		if n := rawInt(t, e.db, "SELECT COUNT(*) FROM story_claps_deltas"); n != done {
			t.Fatalf("%d delta rows after %d increments", n, done)
		}
		if got := c.Story.GetX(entcounter.WithLive(ctx), s.ID); got.Claps != done {
			t.Fatalf("live claps=%d, want %d", got.Claps, done)
		}
		must(t, gormcounter.Increment(e.db.Model(&Story{ID: uint(s.ID)}), "Claps", 3).Error)
		must(t, entcounter.RollupPass(ctx, c))
		if got := c.Story.GetX(ctx, s.ID); got.Claps != done+3 {
			t.Fatalf("after rollup claps=%d, want %d", got.Claps, done+3)
		}
		if n := rawInt(t, e.db, "SELECT COUNT(*) FROM story_claps_deltas"); n != 0 {
			t.Fatalf("rollup left %d delta rows", n)
		}
		c.Story.UpdateOneID(s.ID).AddClaps(2).ExecX(ctx)
		c.Story.UpdateOneID(s.ID).SetClaps(7).ExecX(ctx)
		var gs Story
		must(t, e.db.Clauses(gormcounter.Live).First(&gs, s.ID).Error)
		if gs.Claps != 7 {
			t.Fatalf("after SetClaps(7) GORM reads %d", gs.Claps)
		}
	})
}
