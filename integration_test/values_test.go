package integration_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/hotcounter/hotcounter"
	"github.com/hotcounter/hotcounter/gormcounter"
	"github.com/hotcounter/hotcounter/integration_test/ent"
	"github.com/hotcounter/hotcounter/integration_test/ent/hook"
	"github.com/hotcounter/hotcounter/integration_test/ent/post"
	"github.com/hotcounter/hotcounter/integration_test/ent/postlikesslot"
	"github.com/hotcounter/hotcounter/integration_test/ent/reel"
)

// What a write of a counter's value means, the same in GORM and ent: a new
// row's value is its starting total (a guarded counter's stock spread over
// its slots), an explicit assignment sets the total beside concurrent
// increments, a write of an existing row that names no counter leaves it
// alone, and Take is the only way down for stock. Each behaviour is written
// once, against counterORM (conformance_test.go), and runs for both ORMs on
// every database.

// The ways to create a post with values and to assign its likes, which
// counterORM lists for these tests (postCreates, likesAssigns).
type createPath struct {
	name   string
	create func(t *testing.T, likes, views int64) int
}

type assignPath struct {
	name string
	set  func(id int, v int64) error
}

func TestNewRowsStartAtTheirCounterValues(t *testing.T) {
	eachORM(t, func(t *testing.T, f counterORM) {
		for _, c := range f.postCreates() {
			id := c.create(t, 7, 5)
			if likes, views := loaded(t, f, id); likes != 7 || views != 5 {
				t.Errorf("%s with likes 7 and views 5: loaded %d and %d", c.name, likes, views)
			}
			if views := rawInt(t, f.db(), "SELECT views FROM posts WHERE id = ?", id); views != 5 {
				t.Errorf("%s with views 5: the rollup column holds %d", c.name, views)
			}
			must(t, addLikes(f, id, 1))
			if likes, _ := loaded(t, f, id); likes != 8 {
				t.Errorf("%s with likes 7, then an increment: loaded %d", c.name, likes)
			}
		}
	})
}

// TestABatchOfNewRowsStartsInStatementsOfTheBatch creates posts at once,
// each with a starting value: each loads its value, and the batch costs
// statements by batch, not by row (ent's CreateBulk wrote each row's start
// and pre-created slot rows in a transaction of its own).
func TestABatchOfNewRowsStartsInStatementsOfTheBatch(t *testing.T) {
	eachORM(t, func(t *testing.T, f counterORM) {
		batch := func(n int) (ids []int64, likes []int64, sent int64) {
			likes = make([]int64, n)
			for i := range likes {
				likes[i] = int64(i%3 + 1)
			}
			sent = f.sent(func() { ids = f.createPosts(t, likes) })
			return ids, likes, sent
		}
		_, _, few := batch(10)
		ids, likes, many := batch(60)
		if many > 2*few {
			t.Errorf("a batch of 60 new posts sent %d statements, a batch of 10 %d: the statements grow with the rows", many, few)
		}
		for i, id := range ids {
			if got := exactly(t, f, modelPost, id, "likes"); got != likes[i] {
				t.Errorf("post %d of the batch started with %d likes: loaded %d", i, likes[i], got)
			}
		}
	})
}

func TestGuardedStockStartsSpreadOverItsSlots(t *testing.T) {
	eachORM(t, func(t *testing.T, f counterORM) {
		id, err := newProduct(f, 3000)
		must(t, err)
		if total, lowest := stockRows(t, f.db(), int64(id)); total != 3000 || lowest < 187 {
			t.Fatalf("created with 3,000: %d in the slot rows, the lowest holding %d; want 3,000 spread over the 16 rows", total, lowest)
		}
		must(t, take(f, id, 2999))
		must(t, take(f, id, 1))
		if err := take(f, id, 1); !errors.Is(err, hotcounter.ErrInsufficient) {
			t.Errorf("a take after 3,000 were sold: %v; want ErrInsufficient", err)
		}
		if _, err := newProduct(f, -1); !errors.Is(err, hotcounter.ErrNegativeGuarded) {
			t.Errorf("a product created with -1 in stock: %v; want ErrNegativeGuarded", err)
		}
	})
}

func TestAssignmentSetsTheTotal(t *testing.T) {
	eachORM(t, func(t *testing.T, f counterORM) {
		paths := f.postCreates()
		a, b, c := paths[0].create(t, 0, 0), paths[0].create(t, 9, 9), paths[0].create(t, 4, 0)
		must(t, addLikes(f, a, 5))
		must(t, setLikes(f, a, 3))
		expectLoaded(t, f, a, "an assignment of 3 after 5 likes", 3, 0)
		must(t, addLikes(f, a, 2))
		expectLoaded(t, f, a, "2 likes after the assignment", 5, 0)
		must(t, setLikes(f, a, 0))
		expectLoaded(t, f, a, "an assignment of 0", 0, 0)
		must(t, setViews(f, b, 20))
		expectLoaded(t, f, b, "an assignment of 20 views", 9, 20)
		must(t, setLikesOf(f, []int{b, c}, 4))
		expectLoaded(t, f, b, "an assignment of two rows", 4, 20)
		expectLoaded(t, f, c, "an assignment of two rows", 4, 0)
		for i, a := range f.likesAssigns() {
			v := int64(100 + i)
			must(t, addLikes(f, c, 1))
			must(t, a.set(c, v))
			expectLoaded(t, f, c, "an assignment by "+a.name, v, 0)
		}
		missing := c + 1000
		must(t, f.likesAssigns()[0].set(missing, 6))
		if n := rawInt(t, f.db(), "SELECT COUNT(*) FROM post_likes_slots WHERE post_id = ?", missing); n != 0 {
			t.Errorf("an assignment of a row that does not exist left %d slot rows", n)
		}
	})
}

// An assignment while increments run: increments that ended before it
// began are replaced, increments that began after it ended all count, and
// those that overlapped it count or not, each whole.
func TestAssignmentSetsTheTotalBesideConcurrentIncrements(t *testing.T) {
	eachORM(t, func(t *testing.T, f counterORM) {
		id := f.postCreates()[0].create(t, 0, 0)
		writers, each := writersFor(f.kind())
		var done, before, after atomic.Int64 // increments done; ended before the set began; began after it ended
		var setting, set atomic.Bool
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for done.Load() < int64(writers*each/3) {
				runtime.Gosched()
			}
			setting.Store(true)
			if err := setLikes(f, id, 1000); err != nil {
				t.Errorf("set: %v", err)
			}
			set.Store(true)
		}()
		n := hammer(t, writers, each, func() error {
			began := set.Load()
			err := addLikes(f, id, 1)
			switch {
			case err == nil && began:
				after.Add(1)
			case err == nil && !setting.Load():
				before.Add(1)
			}
			done.Add(1)
			return err
		})
		wg.Wait()
		likes, _ := loaded(t, f, id)
		lo, hi := 1000+after.Load(), 1000+n-before.Load()
		if likes < lo || likes > hi {
			t.Fatalf("likes %d after a set to 1000 among %d increments (%d ended before it, %d began after it): want %d to %d",
				likes, n, before.Load(), after.Load(), lo, hi)
		}
	}, pool(writersPool))
}

func TestWholeRowWritesKeepCounters(t *testing.T) {
	eachORM(t, func(t *testing.T, f counterORM) {
		id := f.postCreates()[0].create(t, 5, 2)
		f.rewritePost(t, id, func() {
			must(t, addLikes(f, id, 3))
		})
		expectLoaded(t, f, id, "a whole-row write of a row loaded before 3 likes", 8, 2)
	})
}

func TestGuardedStockGoesDownOnlyThroughTake(t *testing.T) {
	eachORM(t, func(t *testing.T, f counterORM) {
		id, err := newProduct(f, 10)
		must(t, err)
		for _, v := range []int64{3, 20} {
			if err := setStock(f, id, v); !errors.Is(err, hotcounter.ErrNegativeGuarded) {
				t.Errorf("an assignment of %d to stock: %v; want ErrNegativeGuarded", v, err)
			}
		}
		if total, _ := stockRows(t, f.db(), int64(id)); total != 10 {
			t.Errorf("stock %d after refused assignments; want 10", total)
		}
	})
}

func expectLoaded(t *testing.T, f counterORM, id int, step string, likes, views int64) {
	t.Helper()
	if l, v := loaded(t, f, id); l != likes || v != views {
		t.Errorf("after %s: likes %d, views %d; want %d and %d", step, l, v, likes, views)
	}
}

// The values tests' writes, through counterORM.
func loaded(t *testing.T, f counterORM, id int) (likes, views int64) {
	t.Helper()
	return exactly(t, f, modelPost, int64(id), "likes"), exactly(t, f, modelPost, int64(id), "views")
}

func addLikes(f counterORM, id int, d int64) error {
	return f.increment(modelPost, int64(id), "likes", d)
}

func setLikes(f counterORM, id int, v int64) error { return f.likesAssigns()[0].set(id, v) }

func setLikesOf(f counterORM, ids []int, v int64) error {
	id64 := make([]int64, len(ids))
	for i, id := range ids {
		id64[i] = int64(id)
	}
	return f.setMany(modelPost, id64, "likes", v)
}

func setViews(f counterORM, id int, v int64) error { return f.set(modelPost, int64(id), "views", v) }

func newProduct(f counterORM, stock int64) (int, error) {
	id, err := f.createWith(modelProduct, "stock", stock)
	return int(id), err
}

func take(f counterORM, id int, n int64) error { return f.take(modelProduct, int64(id), "stock", n) }

func setStock(f counterORM, id int, v int64) error { return f.set(modelProduct, int64(id), "stock", v) }

var postTitles atomic.Int64

func nextTitle() string { return fmt.Sprint("post ", postTitles.Add(1)) }

func (o gormORM) postCreates() []createPath {
	g := o.gdb
	return []createPath{
		{"Create", func(t *testing.T, likes, views int64) int {
			p := Post{Title: nextTitle(), Likes: likes, Views: views}
			must(t, g.Create(&p).Error)
			return int(p.ID)
		}},
		{"CreateInBatches", func(t *testing.T, likes, views int64) int {
			ps := []Post{{Title: nextTitle(), Likes: likes, Views: views}, {Title: nextTitle(), Likes: likes, Views: views}}
			must(t, g.CreateInBatches(&ps, 10).Error)
			return int(ps[1].ID)
		}},
		{"Save of a new row", func(t *testing.T, likes, views int64) int {
			p := Post{Title: nextTitle(), Likes: likes, Views: views}
			must(t, g.Save(&p).Error)
			return int(p.ID)
		}},
		{"FirstOrCreate with Attrs", func(t *testing.T, likes, views int64) int {
			var p Post
			must(t, g.Where(Post{Title: nextTitle()}).Attrs(Post{Likes: likes, Views: views}).FirstOrCreate(&p).Error)
			return int(p.ID)
		}},
		{"FirstOrCreate with Assign", func(t *testing.T, likes, views int64) int {
			var p Post
			must(t, g.Where(Post{Title: nextTitle()}).Assign(Post{Likes: likes, Views: views}).FirstOrCreate(&p).Error)
			return int(p.ID)
		}},
		{"gorm.G Create", func(t *testing.T, likes, views int64) int {
			p := Post{Title: nextTitle(), Likes: likes, Views: views}
			must(t, gorm.G[Post](g).Create(context.Background(), &p))
			return int(p.ID)
		}},
	}
}

func (o gormORM) likesAssigns() []assignPath {
	g := o.gdb
	return []assignPath{
		{"Update", func(id int, v int64) error { return g.Model(&Post{ID: uint(id)}).Update("likes", v).Error }},
		{"UpdateColumn", func(id int, v int64) error { return g.Model(&Post{ID: uint(id)}).UpdateColumn("Likes", v).Error }},
		{"Updates of a map", func(id int, v int64) error {
			return g.Model(&Post{ID: uint(id)}).Updates(map[string]any{"likes": v, "title": nextTitle()}).Error
		}},
		{"Updates of a struct that selects the counter", func(id int, v int64) error {
			return g.Model(&Post{ID: uint(id)}).Select("Likes", "Title").Updates(Post{Title: nextTitle(), Likes: v}).Error
		}},
		{"a SET clause", func(id int, v int64) error {
			return g.Model(&Post{ID: uint(id)}).Clauses(clause.Set{{Column: clause.Column{Name: "likes"}, Value: v}}).Updates(map[string]any{}).Error
		}},
	}
}

func (o gormORM) rewritePost(t *testing.T, id int, meanwhile func()) {
	g := o.gdb
	var p Post
	must(t, g.First(&p, id).Error)
	meanwhile()
	p.Title = nextTitle()
	must(t, g.Save(&p).Error)
	p.Title = nextTitle()
	must(t, g.Model(&p).Updates(p).Error)
	p.Title = nextTitle()
	must(t, g.Model(&p).Select("*").Updates(p).Error)
	// Unchanged: on MySQL and MariaDB the UPDATE affects no row, and GORM's
	// Save goes on to an upsert of the row.
	must(t, g.Save(&p).Error)
}

func (o entORM) postCreates() []createPath {
	w := o
	ctx := o.ctx()
	return []createPath{
		{"Create", func(t *testing.T, likes, views int64) int {
			p, err := w.client.Post.Create().SetTitle(nextTitle()).SetLikes(likes).SetViews(views).Save(ctx)
			must(t, err)
			return p.ID
		}},
		{"CreateBulk", func(t *testing.T, likes, views int64) int {
			ps, err := w.client.Post.CreateBulk(
				w.client.Post.Create().SetTitle(nextTitle()).SetLikes(likes).SetViews(views),
				w.client.Post.Create().SetTitle(nextTitle()).SetLikes(likes).SetViews(views)).Save(ctx)
			must(t, err)
			return ps[1].ID
		}},
	}
}

func (o entORM) likesAssigns() []assignPath {
	w := o
	ctx := o.ctx()
	return []assignPath{
		{"UpdateOneID", func(id int, v int64) error {
			err := w.client.Post.UpdateOneID(id).SetLikes(v).Exec(ctx)
			if ent.IsNotFound(err) {
				return nil // as GORM's update of no row
			}
			return err
		}},
		{"UpdateOneID with another field", func(id int, v int64) error {
			return w.client.Post.UpdateOneID(id).SetLikes(v).SetTitle(nextTitle()).Exec(ctx)
		}},
		{"Update with a predicate", func(id int, v int64) error {
			return w.client.Post.Update().Where(post.ID(id)).SetLikes(v).Exec(ctx)
		}},
		{"the entity's Update", func(id int, v int64) error {
			p, err := w.client.Post.Get(ctx, id)
			if err != nil {
				return err
			}
			return p.Update().SetLikes(v).Exec(ctx)
		}},
	}
}

func (o entORM) rewritePost(t *testing.T, id int, meanwhile func()) {
	w := o
	ctx := o.ctx()
	p, err := w.client.Post.Get(ctx, id)
	must(t, err)
	meanwhile()
	must(t, p.Update().SetTitle(nextTitle()).Exec(ctx))
}

// ent returns the entity an UpdateOne wrote: its counters read as a load
// reads them, whether the update wrote them or not. (GORM's updates return
// no row.)
func TestEntUpdateReturnsCountersAsALoadShowsThem(t *testing.T) {
	eachEnt(t, func(t *testing.T, e *entEnv) {
		ctx, c := context.Background(), e.client
		p := c.Post.Create().SetTitle(nextTitle()).SetLikes(7).SetViews(3).SaveX(ctx)
		got := c.Post.UpdateOneID(p.ID).SetTitle(nextTitle()).SaveX(ctx)
		if got.Likes != 7 || got.Views != 3 {
			t.Errorf("an update of the title returned likes %d, views %d; want 7 and 3", got.Likes, got.Views)
		}
		got = c.Post.UpdateOneID(p.ID).AddViews(2).SetTitle(nextTitle()).SaveX(ctx)
		if got.Likes != 7 {
			t.Errorf("an update of views and the title returned likes %d; want 7", got.Likes)
		}
		got = c.Post.UpdateOneID(p.ID).AddLikes(1).SaveX(ctx)
		if got.Likes != 8 {
			t.Errorf("AddLikes(1) returned likes %d; want 8", got.Likes)
		}
	})
}

// A GORM upsert: rows it inserts start at their values; rows that existed
// keep their counters (as Save keeps them), unless DoUpdates assigns the
// counter from the row. A value in a row the upsert cannot tell new or
// existing (no key) is refused before anything is written.
func TestGormUpsertsStartNewRowsAndKeepExistingCounters(t *testing.T) {
	eachDB(t, func(t *testing.T, e *env) {
		db := e.db
		must(t, db.AutoMigrate(&Author{}, &Post{}, &Comment{}))
		old := Post{Title: nextTitle(), Likes: 3, Views: 3}
		must(t, db.Create(&old).Error)
		g := gormORM{e: e, gdb: db}
		for _, c := range []struct {
			name string
			oc   clause.OnConflict
			want int64 // the existing row's likes after it
		}{
			{"DoNothing", clause.OnConflict{DoNothing: true}, 3},
			{"UpdateAll", clause.OnConflict{UpdateAll: true}, 3},
			{"DoUpdates of the title", clause.OnConflict{Columns: []clause.Column{{Name: "id"}}, DoUpdates: clause.AssignmentColumns([]string{"title"})}, 3},
			{"DoUpdates of likes", clause.OnConflict{Columns: []clause.Column{{Name: "id"}}, DoUpdates: clause.AssignmentColumns([]string{"title", "likes"})}, 9},
		} {
			fresh := Post{ID: old.ID + 1000 + uint(len(c.name)), Title: nextTitle(), Likes: 9, Views: 9}
			rows := []Post{{ID: old.ID, Title: nextTitle(), Likes: 9, Views: 9}, fresh}
			if err := db.Clauses(c.oc).Create(&rows).Error; err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			if likes, views := loaded(t, g, int(old.ID)); likes != c.want || views != 3 {
				t.Errorf("%s: the existing row has likes %d, views %d; want %d and 3", c.name, likes, views, c.want)
			}
			if likes, views := loaded(t, g, int(fresh.ID)); likes != 9 || views != 9 {
				t.Errorf("%s: the new row has likes %d, views %d; want 9 and 9", c.name, likes, views)
			}
			must(t, setLikes(g, int(old.ID), 3))
		}
		err := db.Clauses(clause.OnConflict{UpdateAll: true}).Create(&Post{Title: nextTitle(), Likes: 4}).Error
		if err == nil || !strings.Contains(err.Error(), "Post") {
			t.Errorf("an upsert of a row without a key, with likes 4: %v; want an error naming Post", err)
		}
	})
}

// ent runs a mixin's hooks before the schema's own, so entcounter's hooks
// see nothing of what the schema's hook (Reel's Encore) writes: the
// generated code hands it back to them when the write is sent. It counts as
// if the mutation had carried it, in every kind of write: a starting total
// on Create and CreateBulk, an add on UpdateOne (with and without the
// entity) and on Update.
func TestEntSchemaHooksWriteCounters(t *testing.T) {
	eachEnt(t, func(t *testing.T, e *entEnv) {
		ctx, c := context.Background(), e.client
		plays := func(id int) int64 { return c.Reel.GetX(ctx, id).Plays }
		r := c.Reel.Create().SetTitle("premiere").SaveX(ctx)
		if r.Plays != 10 || plays(r.ID) != 10 {
			t.Fatalf("a reel the schema hook starts at 10: created with %d, loaded with %d", r.Plays, plays(r.ID))
		}
		bulk := c.Reel.CreateBulk(c.Reel.Create().SetTitle("premiere"), c.Reel.Create().SetTitle("short")).SaveX(ctx)
		if got := []int64{plays(bulk[0].ID), plays(bulk[1].ID)}; got[0] != 10 || got[1] != 0 {
			t.Fatalf("a bulk create of a premiere and a short: plays %v; want [10 0]", got)
		}
		got := c.Reel.UpdateOneID(r.ID).SetTitle("encore").SaveX(ctx)
		if got.Plays != 11 || plays(r.ID) != 11 {
			t.Fatalf("an encore: the update returned %d plays, a load shows %d; want 11", got.Plays, plays(r.ID))
		}
		must(t, c.Reel.UpdateOneID(r.ID).SetTitle("encore").Exec(ctx))
		n := c.Reel.Update().Where(reel.IDIn(bulk[0].ID, bulk[1].ID)).SetTitle("encore").SaveX(ctx)
		if n != 2 {
			t.Errorf("the bulk encore updated %d reels; want 2", n)
		}
		if got := []int64{plays(r.ID), plays(bulk[0].ID), plays(bulk[1].ID)}; got[0] != 12 || got[1] != 11 || got[2] != 1 {
			t.Fatalf("after two encores of the first and one bulk encore: plays %v; want [12 11 1]", got)
		}
		if title := c.Reel.GetX(ctx, bulk[1].ID).Title; title != "encore" {
			t.Errorf("the bulk encore left the title %q", title)
		}
	}, entTables(modelReel))
}

// TestEntCreateBulkStartsEveryRowWhenAHookDropsOneRowsValue: a CreateBulk
// writes its rows' starting values once its last row is done; a row whose
// value a hook that runs first (client.Post.Use) took out starts at 0, and
// the others at their values, whichever row that is.
func TestEntCreateBulkStartsEveryRowWhenAHookDropsOneRowsValue(t *testing.T) {
	eachEnt(t, func(t *testing.T, e *entEnv) {
		ctx, c := context.Background(), sharedEnt(e)
		c.Post.Use(func(next ent.Mutator) ent.Mutator {
			return hook.PostFunc(func(ctx context.Context, m *ent.PostMutation) (ent.Value, error) {
				if title, _ := m.Title(); title == "no likes" {
					m.ResetLikes()
				}
				return next.Mutate(ctx, m)
			})
		})
		for _, titles := range [][]string{{"no likes", "a", "b"}, {"a", "no likes", "b"}, {"a", "b", "no likes"}} {
			var creates []*ent.PostCreate
			want := make([]int64, len(titles))
			for i, title := range titles {
				creates = append(creates, c.Post.Create().SetTitle(title).SetLikes(int64(i+3)))
				if title != "no likes" {
					want[i] = int64(i + 3)
				}
			}
			rows := c.Post.CreateBulk(creates...).SaveX(ctx)
			for i, p := range rows {
				if got := exactly(t, entORM{e: e, client: c}, modelPost, int64(p.ID), "likes"); got != want[i] {
					t.Errorf("a CreateBulk of %q: %q starts at %d likes, want %d", titles, titles[i], got, want[i])
				}
			}
		}
	})
}

// A row that the user's query interceptor hides cannot be found by an
// update of one row: UpdateOneID of it is ent's NotFound and writes
// nothing, neither the counter's slot nor its other fields, on every
// database, with or without other fields in the update. A bulk update adds
// to the counters of the rows the interceptor shows. Rows it shows update
// as without it.
func TestEntUpdatesOfRowsHiddenByInterceptorsWriteNoCounter(t *testing.T) {
	eachEnt(t, func(t *testing.T, e *entEnv) {
		ctx, c := context.Background(), e.client
		hidden := c.Post.Create().SetTitle("hidden " + nextTitle()).SetLikes(5).SaveX(ctx)
		shown := c.Post.Create().SetTitle(nextTitle()).SetLikes(5).SaveX(ctx)
		c.Post.Intercept(ent.InterceptFunc(func(next ent.Querier) ent.Querier {
			return ent.QuerierFunc(func(ctx context.Context, q ent.Query) (ent.Value, error) {
				if pq, ok := q.(*ent.PostQuery); ok {
					pq.Where(post.Not(post.TitleHasPrefix("hidden ")))
				}
				return next.Query(ctx, q)
			})
		}))
		for name, write := range map[string]func() error{
			"AddLikes":          func() error { return c.Post.UpdateOneID(hidden.ID).AddLikes(1).Exec(ctx) },
			"AddLikes, Save":    func() error { _, err := c.Post.UpdateOneID(hidden.ID).AddLikes(1).Save(ctx); return err },
			"SetLikes":          func() error { return c.Post.UpdateOneID(hidden.ID).SetLikes(9).Exec(ctx) },
			"SetTitle+AddLikes": func() error { return c.Post.UpdateOneID(hidden.ID).SetTitle("moved").AddLikes(1).Exec(ctx) },
		} {
			if err := write(); !ent.IsNotFound(err) {
				t.Errorf("%s of a hidden post: %v; want NotFound", name, err)
			}
		}
		must(t, c.Post.UpdateOneID(shown.ID).AddLikes(1).Exec(ctx))
		must(t, c.Post.Update().Where(post.IDIn(hidden.ID, shown.ID)).AddLikes(10).Exec(ctx))
		var likes []int64
		must(t, c.PostLikesSlot.Query().Where(postlikesslot.PostIDEQ(hidden.ID)).Aggregate(ent.Sum(postlikesslot.FieldN)).Scan(ctx, &likes))
		if len(likes) != 1 || likes[0] != 5 {
			t.Errorf("the hidden post's slots sum to %v after the writes; want 5, untouched", likes)
		}
		e2 := reopenEnt(t, e) // a client without the interceptor
		h := e2.Post.GetX(ctx, hidden.ID)
		if h.Likes != 5 || strings.HasPrefix(h.Title, "moved") {
			t.Errorf("the hidden post after the writes: likes %d, title %q; want 5 and its own title", h.Likes, h.Title)
		}
		if s := e2.Post.GetX(ctx, shown.ID); s.Likes != 16 {
			t.Errorf("the shown post has likes %d; want 5+1+10", s.Likes)
		}
	})
}

// Gig is a GORM model whose own hooks write its counter: a gig created
// with the title "premiere" starts at 10 plays, and an update that titles
// it "encore" adds a play (Reel's Encore hook, in GORM's hooks).
type Gig struct {
	ID    uint
	Title string
	Plays int64 `gorm:"counter:slots=4"`
}

func (s *Gig) BeforeCreate(*gorm.DB) error {
	if s.Title == "premiere" {
		s.Plays = 10
	}
	return nil
}

func (s *Gig) BeforeUpdate(tx *gorm.DB) error {
	if tx.Statement.Changed("Title") {
		if v, ok := tx.Statement.Dest.(map[string]any)["title"]; ok && v == "encore" {
			tx.Statement.SetColumn("plays", gorm.Expr("plays + ?", 1))
		}
	}
	return nil
}

// GORM runs a model's hooks before the plugin reads the write: what they
// write to a counter counts, a starting total on Create and an increment on
// an update, as ent's schema hooks do (TestEntSchemaHooksWriteCounters).
func TestGormModelHooksWriteCounters(t *testing.T) {
	eachDB(t, func(t *testing.T, e *env) {
		db := e.db
		must(t, db.AutoMigrate(&Gig{}))
		plays := func(id uint) int64 {
			var s Gig
			must(t, db.Clauses(gormcounter.Live).First(&s, id).Error)
			return s.Plays
		}
		s := Gig{Title: "premiere"}
		must(t, db.Create(&s).Error)
		if plays(s.ID) != 10 {
			t.Fatalf("a gig the hook starts at 10: loaded with %d", plays(s.ID))
		}
		must(t, db.Model(&s).Update("title", "encore").Error)
		must(t, db.Model(&Gig{ID: s.ID}).Updates(map[string]any{"title": "encore"}).Error) // Changed compares with the model: a fresh one
		if plays(s.ID) != 12 {
			t.Fatalf("after two encores: plays %d; want 12", plays(s.ID))
		}
	})
}
