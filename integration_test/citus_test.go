package integration_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"

	"github.com/hotcounter/hotcounter"
	"github.com/hotcounter/hotcounter/entcounter"
	"github.com/hotcounter/hotcounter/gormcounter"
	"github.com/hotcounter/hotcounter/internal/testdb"
)

// The tests of this file run on a Citus coordinator that
// HOTCOUNTER_CITUS_DSN names, and are skipped without one (Citus is not on
// the CI machine: docs/scaling.md says how they were run).

// CitusPost is a parent Citus distributes by its key.
type CitusPost struct {
	ID           uint
	Title        string
	Likes        int64 `gorm:"counter"`
	Views        int64 `gorm:"counter:slots=16,rollup"`
	Stock        int64 `gorm:"counter:guarded"`
	ReplyCount   int64 `gorm:"counter:counts=CitusReplies"`
	CitusReplies []CitusReply
}

// CitusReply is a child distributed beside its parent: Citus wants a
// unique key to hold the distribution column, so its primary key holds
// its parent's key.
type CitusReply struct {
	CitusPostID uint `gorm:"primaryKey;autoIncrement:false"`
	ID          uint `gorm:"primaryKey"`
	Body        string
}

// openCitus opens GORM with the plugin on a schema of its own on the
// Citus coordinator, and migrates the models, distributes the parent and
// the child as an operator would (create_distributed_table, the child
// beside the parent: its triggers need citus.enable_unsafe_triggers), and
// migrates again.
func openCitus(t testing.TB) *gorm.DB {
	t.Helper()
	dsn := testdb.WithParams(testdb.Citus(t), map[string]string{"citus.enable_unsafe_triggers": "on"})
	db, err := gorm.Open(postgres.Open(dsn), &gorm.Config{Logger: (&counting{}).LogMode(0)})
	must(t, err)
	sqlDB, err := db.DB()
	must(t, err)
	sqlDB.SetMaxOpenConns(writersPool)
	sqlDB.SetMaxIdleConns(writersPool)
	t.Cleanup(func() { sqlDB.Close() })
	must(t, db.Use(gormcounter.New(gormcounter.Config{})))
	must(t, db.AutoMigrate(&CitusPost{}, &CitusReply{}))
	must(t, db.Exec("SELECT create_distributed_table('citus_posts', 'id')").Error)
	must(t, db.Exec("SELECT create_distributed_table('citus_replies', 'citus_post_id', colocate_with => 'citus_posts')").Error)
	must(t, db.AutoMigrate(&CitusPost{}, &CitusReply{}))
	return db
}

// migrateDistributed migrates model, distributes its table by id beside
// the table with (Citus's colocate_with: "default" for none), and
// migrates again, as an operator adding a distributed parent would.
func migrateDistributed(t *testing.T, db *gorm.DB, table, with string, model any) {
	t.Helper()
	must(t, db.AutoMigrate(model))
	must(t, db.Exec(fmt.Sprintf("SELECT create_distributed_table('%s', 'id', colocate_with => '%s')", table, with)).Error)
	must(t, db.AutoMigrate(model))
}

// citusShards returns how many shards Citus sends the load to.
func citusShards(t *testing.T, db *gorm.DB, load func(tx *gorm.DB) *gorm.DB) int {
	t.Helper()
	var plan []string
	must(t, db.Raw("EXPLAIN "+db.ToSQL(load)).Scan(&plan).Error)
	for _, l := range plan {
		var n int
		if _, err := fmt.Sscanf(strings.TrimSpace(l), "Task Count: %d", &n); err == nil {
			return n
		}
	}
	t.Fatalf("no task count in the plan: %s", strings.Join(plan, "\n"))
	return 0
}

func TestAMigrationDistributesSlotTablesBesideTheirParentOnCitus(t *testing.T) {
	db := openCitus(t)
	var rows []struct {
		Table string
		Same  bool
	}
	must(t, db.Raw(`SELECT s.logicalrelid::text AS "table", s.colocationid = p.colocationid AS same
		FROM pg_dist_partition s, pg_dist_partition p
		WHERE p.logicalrelid = 'citus_posts'::regclass AND s.logicalrelid::text LIKE 'citus_post_%_slots' ORDER BY 1`).Scan(&rows).Error)
	if len(rows) != 4 {
		t.Fatalf("distributed slot tables: %+v, want the 4 counters' tables", rows)
	}
	for _, r := range rows {
		if !r.Same {
			t.Errorf("%s is distributed apart from citus_posts", r.Table)
		}
	}
	// A migration that changes nothing leaves the triggers as they are.
	triggers := func() (oids []int64) {
		must(t, db.Raw("SELECT oid::int8 FROM pg_trigger WHERE tgrelid = 'citus_replies'::regclass AND NOT tgisinternal ORDER BY 1").Scan(&oids).Error)
		return oids
	}
	before := triggers()
	must(t, db.AutoMigrate(&CitusPost{}, &CitusReply{}))
	if after := triggers(); len(before) != 3 || fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("count triggers %v became %v on a migration that changed nothing", before, after)
	}
}

func TestCountersOnCitusStayExactBesidePasses(t *testing.T) {
	db := openCitus(t)
	const posts, writers, rounds = 64, 32, 25
	ps := make([]CitusPost, posts)
	for i := range ps {
		ps[i].Title = "post"
	}
	must(t, db.CreateInBatches(&ps, 100).Error)
	index := map[uint]int{}
	for i, p := range ps {
		index[p.ID] = i
	}
	var likes, views, replies [posts]atomic.Int64
	var replyID atomic.Uint32

	stop := make(chan struct{})
	var passes sync.WaitGroup
	var passErr atomic.Value
	passes.Add(1)
	go func() {
		defer passes.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := gormcounter.RollupPass(db, &CitusPost{}); err != nil {
				passErr.Store(err)
				return
			}
			if _, err := gormcounter.CompactPass(db, &CitusPost{}); err != nil {
				passErr.Store(err)
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	var next atomic.Int64
	hammer(t, writers, rounds, func() error {
		i := int(next.Add(1))
		p := i % posts
		id := ps[p].ID
		switch i % 4 {
		case 0:
			likes[p].Add(1)
			return gormcounter.Increment(db.Model(&CitusPost{ID: id}), "Likes", 1).Error
		case 1:
			// In a transaction, beside a counted child.
			err := db.Transaction(func(tx *gorm.DB) error {
				if err := gormcounter.Increment(tx.Model(&CitusPost{ID: id}), "Likes", 1).Error; err != nil {
					return err
				}
				return tx.Create(&CitusReply{CitusPostID: id, ID: uint(replyID.Add(1)), Body: "reply"}).Error
			})
			if err == nil {
				likes[p].Add(1)
				replies[p].Add(1)
			}
			return err
		case 2:
			views[p].Add(1)
			return gormcounter.Increment(db.Model(&CitusPost{ID: id}), "Views", 1).Error
		default:
			likes[p].Add(2)
			return db.Model(&CitusPost{ID: id}).UpdateColumn("likes", gorm.Expr("likes + ?", 2)).Error
		}
	})
	close(stop)
	passes.Wait()
	if err, _ := passErr.Load().(error); err != nil {
		t.Fatalf("a pass beside the writers: %v", err)
	}
	check := func(what string) {
		t.Helper()
		var got []CitusPost
		// Live: a rollup counter's exact value, its column and what its
		// slot rows hold (a plain load reads the column).
		must(t, db.WithContext(gormcounter.WithLive(context.Background())).Find(&got).Error)
		if len(got) != posts {
			t.Fatalf("%s: %d posts", what, len(got))
		}
		for _, p := range got {
			i := index[p.ID]
			if p.Likes != likes[i].Load() || p.Views != views[i].Load() || p.ReplyCount != replies[i].Load() {
				t.Errorf("%s: post %d: likes %d, views %d, replies %d; want %d, %d, %d", what, p.ID,
					p.Likes, p.Views, p.ReplyCount, likes[i].Load(), views[i].Load(), replies[i].Load())
			}
		}
	}
	check("after the writers")
	must(t, gormcounter.RollupPass(db, &CitusPost{}))
	compacted, err := gormcounter.CompactPass(db, &CitusPost{})
	must(t, err)
	// The slot tables' size over every shard (each shard's key index has
	// a page of its own at least), not the coordinator's empty table.
	if compacted.BytesBefore < 32*8192 {
		t.Errorf("CompactPass measured %d bytes before, less than the 32 shards' key indexes", compacted.BytesBefore)
	}
	check("after a rollup and a compaction")
	var cached []struct {
		ID    uint
		Views int64
	}
	must(t, db.Raw("SELECT id, views FROM citus_posts").Scan(&cached).Error)
	for _, c := range cached {
		if want := views[index[c.ID]].Load(); c.Views != want {
			t.Errorf("post %d: views column %d after the rollup, want %d", c.ID, c.Views, want)
		}
	}
	var ranked []CitusPost
	must(t, db.Order("likes desc").Find(&ranked).Error)
	if !sort.SliceIsSorted(ranked, func(a, b int) bool { return ranked[a].Likes > ranked[b].Likes }) || len(ranked) != posts {
		t.Errorf("Order(likes desc) returned %d posts, not by likes", len(ranked))
	}

	// Deleted children uncount; a changed slot row is found by Recount.
	must(t, db.Where("citus_post_id = ?", ps[1].ID).Delete(&CitusReply{}).Error)
	replies[1].Store(0)
	must(t, db.Exec("UPDATE citus_post_reply_count_slots SET n = n + 5 WHERE citus_post_id = ?", ps[5].ID).Error)
	fixed, err := gormcounter.Recount(db.Model(&CitusPost{}), "ReplyCount")
	must(t, err)
	if fixed != 1 {
		t.Errorf("Recount fixed %d posts, want 1 (post %d)", fixed, ps[5].ID)
	}
	check("after deletes and a recount")
}

func TestGuardedStockOnCitusIsNeverOversold(t *testing.T) {
	db := openCitus(t)
	p := CitusPost{Title: "flash sale"}
	must(t, db.Create(&p).Error)
	must(t, gormcounter.Increment(db.Model(&CitusPost{ID: p.ID}), "Stock", 100).Error)
	var took atomic.Int64
	hammer(t, 32, 10, func() error {
		err := gormcounter.Take(db.Model(&CitusPost{ID: p.ID}), "Stock", 1).Error
		if err == nil {
			took.Add(1)
		} else if !errors.Is(err, hotcounter.ErrInsufficient) {
			return err
		}
		return nil
	})
	var got CitusPost
	must(t, db.First(&got, p.ID).Error)
	if took.Load() != 100 || got.Stock != 0 {
		t.Errorf("took %d of 100 with 320 takes; %d left", took.Load(), got.Stock)
	}
}

func TestLoadsByKeyGoToTheirShardsOnCitus(t *testing.T) {
	db := openCitus(t)
	ps := make([]CitusPost, 8)
	must(t, db.Create(&ps).Error)
	for _, c := range []struct {
		name string
		load func(tx *gorm.DB) *gorm.DB
		max  int
	}{
		{"First by key", func(tx *gorm.DB) *gorm.DB { return tx.First(&CitusPost{}, ps[0].ID) }, 1},
		{"Take by a struct condition", func(tx *gorm.DB) *gorm.DB { return tx.Where(&CitusPost{ID: ps[1].ID}).Take(&CitusPost{}) }, 1},
		{"Find by two keys", func(tx *gorm.DB) *gorm.DB { return tx.Find(&[]CitusPost{}, []uint{ps[2].ID, ps[3].ID}) }, 2},
	} {
		if n := citusShards(t, db, c.load); n > c.max {
			t.Errorf("%s: sent to %d shards, want at most %d", c.name, n, c.max)
		}
	}
	var p CitusPost
	must(t, gormcounter.Increment(db.Model(&CitusPost{ID: ps[0].ID}), "Likes", 3).Error)
	must(t, db.First(&p, ps[0].ID).Error)
	if p.Likes != 3 {
		t.Errorf("likes %d, want 3", p.Likes)
	}
}

// ent's slot tables are keyed by an id of their own, which Citus cannot
// distribute by the parent's key: the migration after the parent is
// distributed keys them by the parent's key and that id, distributes them
// beside the parent, and later migrations keep that key.
func TestEntCountersOnCitusStayExact(t *testing.T) {
	e := &env{kind: pg, dsn: testdb.Citus(t), log: &counting{}, pool: writersPool}
	ee := withEnt(t, e, false)
	ctx := context.Background()
	c := ee.client
	must(t, entMigrate(ctx, c, entcounter.WithCounters(c)))
	for _, q := range []string{
		"SELECT create_distributed_table('products', 'id')",
		"SELECT create_distributed_table('skip_posts', 'id', colocate_with => 'products')",
	} {
		if _, err := ee.sqlDB.ExecContext(ctx, q); err != nil {
			t.Fatal(q, err)
		}
	}
	for range 2 {
		must(t, entMigrate(ctx, c, entcounter.WithCounters(c)))
	}
	var beside int
	must(t, ee.sqlDB.QueryRowContext(ctx, `SELECT COUNT(*) FROM pg_dist_partition s, pg_dist_partition p
		WHERE p.logicalrelid = 'products'::regclass AND s.colocationid = p.colocationid
		AND s.logicalrelid IN ('product_stock_slots'::regclass, 'skip_post_likes_slots'::regclass)`).Scan(&beside))
	if beside != 2 {
		t.Fatalf("%d of the 2 slot tables distributed beside their parents", beside)
	}

	p, err := c.Product.Create().SetName("flash sale").Save(ctx)
	must(t, err)
	must(t, c.Product.UpdateOneID(p.ID).AddStock(100).Exec(ctx))
	s, err := c.SkipPost.Create().Save(ctx)
	must(t, err)
	var took, likes atomic.Int64
	var next atomic.Int64
	hammer(t, 32, 20, func() error {
		if next.Add(1)%2 == 0 {
			err := c.SkipPost.UpdateOneID(s.ID).AddLikes(1).Exec(ctx)
			if err == nil {
				likes.Add(1)
			}
			return err
		}
		err := c.Product.TakeStock(ctx, p.ID, 1)
		if err == nil {
			took.Add(1)
		} else if errors.Is(err, hotcounter.ErrInsufficient) {
			err = nil
		}
		return err
	})
	if _, err := entcounter.CompactPass(ctx, c); err != nil {
		t.Fatal(err)
	}
	must(t, entcounter.RollupPass(ctx, c))
	gotP, err := c.Product.Get(ctx, p.ID)
	must(t, err)
	gotS, err := c.SkipPost.Get(ctx, s.ID)
	must(t, err)
	if took.Load() != 100 || gotP.Stock != 0 || gotS.Likes != likes.Load() {
		t.Errorf("took %d of 100 stock, %d left; %d likes, want %d", took.Load(), gotP.Stock, gotS.Likes, likes.Load())
	}
}

// CitusAppendPost's claps are appended as delta rows.
type CitusAppendPost struct {
	ID    uint
	Title string
	Claps int64 `gorm:"counter:append"`
}

// An append counter's delta table is keyed by a delta row's id: the
// migration keys it by the parent's key and that id, distributes it beside
// the parent, and rollup passes fold it one parent per statement.
func TestAppendCountersOnCitusStayExact(t *testing.T) {
	db := openCitus(t)
	migrateDistributed(t, db, "citus_append_posts", "citus_posts", &CitusAppendPost{})
	ps := []CitusAppendPost{{Title: "a"}, {Title: "b"}, {Title: "c"}, {Title: "d"}}
	must(t, db.Create(&ps).Error)
	stop := make(chan struct{})
	passes := make(chan error, 1)
	go func() {
		for {
			select {
			case <-stop:
				passes <- nil
				return
			default:
			}
			if err := gormcounter.RollupPass(db, &CitusAppendPost{}); err != nil {
				passes <- err
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	var want [4]atomic.Int64
	var next atomic.Int64
	hammer(t, 32, 10, func() error {
		i := next.Add(1)
		err := gormcounter.Increment(db.Model(&CitusAppendPost{ID: ps[i%4].ID}), "Claps", 2).Error
		if err == nil {
			want[i%4].Add(2)
		}
		return err
	})
	close(stop)
	must(t, <-passes)
	must(t, gormcounter.RollupPass(db, &CitusAppendPost{}))
	for i, p := range ps {
		var got CitusAppendPost
		must(t, db.First(&got, p.ID).Error)
		if got.Claps != want[i].Load() {
			t.Errorf("post %d: %d claps after a rollup, want %d", p.ID, got.Claps, want[i].Load())
		}
	}
	var left int64
	must(t, db.Raw("SELECT COUNT(*) FROM citus_append_post_claps_deltas").Scan(&left).Error)
	if left != 0 {
		t.Errorf("%d delta rows left after a rollup", left)
	}
}

// CitusSkipPost's increments take a slot row no other transaction holds.
type CitusSkipPost struct {
	ID    uint
	Title string
	Hits  int64 `gorm:"counter:skiplocked"`
}

func TestSkipLockedIncrementsOnCitusStayExact(t *testing.T) {
	db := openCitus(t)
	migrateDistributed(t, db, "citus_skip_posts", "citus_posts", &CitusSkipPost{})
	ps := []CitusSkipPost{{Title: "a"}, {Title: "b"}, {Title: "c"}, {Title: "d"}}
	must(t, db.Create(&ps).Error)
	var want [4]atomic.Int64
	var next atomic.Int64
	hammer(t, 32, 25, func() error {
		i := int(next.Add(1))
		p := ps[i%4]
		var err error
		if i%5 == 0 {
			err = db.Transaction(func(tx *gorm.DB) error {
				return gormcounter.Increment(tx.Model(&CitusSkipPost{ID: p.ID}), "Hits", 1).Error
			})
		} else {
			err = gormcounter.Increment(db.Model(&CitusSkipPost{ID: p.ID}), "Hits", 1).Error
		}
		if err == nil {
			want[i%4].Add(1)
		}
		return err
	})
	for i, p := range ps {
		var got CitusSkipPost
		must(t, db.First(&got, p.ID).Error)
		if got.Hits != want[i].Load() {
			t.Errorf("post %d: %d hits, want %d", p.ID, got.Hits, want[i].Load())
		}
	}
}

// Increments of the parents a condition selects (rows on several shards),
// and a write-behind buffer's increments, its Live load and its flush.
func TestIncrementsByConditionAndTheBufferOnCitusStayExact(t *testing.T) {
	db := openCitus(t)
	ps := []CitusPost{{Title: "a"}, {Title: "a"}, {Title: "b"}, {Title: "a"}}
	for i := range ps { // one at a time: see TestAdoptionOnCitusKeepsEveryValue
		must(t, db.Create(&ps[i]).Error)
	}
	for _, r := range []*gorm.DB{
		gormcounter.Increment(db.Model(&CitusPost{}).Where("title = ?", "a"), "Likes", 2),
		gormcounter.Increment(db.Model(&CitusPost{}).Where("title = ?", "a"), "Views", 3),
		db.Model(&CitusPost{}).Where("title = ?", "b").UpdateColumn("likes", gorm.Expr("likes + ?", 5)),
	} {
		must(t, r.Error)
	}
	ctx := context.Background()
	buf, err := gormcounter.NewBuffer(context.Background(), db, hotcounter.BufferConfig{Interval: time.Hour})
	must(t, err)
	hammer(t, 16, 10, func() error { return buf.Increment(ctx, &CitusPost{ID: ps[0].ID}, "Likes", 1) })
	var live []CitusPost
	must(t, db.Clauses(buf.Live()).Find(&live, []uint{ps[0].ID}).Error)
	if len(live) != 1 || live[0].Likes != 162 {
		t.Errorf("Live load of the buffer: %+v, want 162 likes", live)
	}
	must(t, buf.Close(ctx))
	want := map[uint][2]int64{ps[0].ID: {162, 3}, ps[1].ID: {2, 3}, ps[2].ID: {5, 0}, ps[3].ID: {2, 3}}
	var got []CitusPost
	must(t, db.WithContext(gormcounter.WithLive(ctx)).Find(&got).Error)
	for _, p := range got {
		if w := want[p.ID]; p.Likes != w[0] || p.Views != w[1] {
			t.Errorf("post %d: likes %d, views %d; want %d, %d", p.ID, p.Likes, p.Views, w[0], w[1])
		}
	}
}

// CitusHookPost counts its notes with GORM hooks.
type CitusHookPost struct {
	ID             uint
	NoteCount      int64 `gorm:"counter:counts=CitusHookNotes,hooks"`
	CitusHookNotes []CitusHookNote
}

type CitusHookNote struct {
	CitusHookPostID uint `gorm:"primaryKey;autoIncrement:false"`
	ID              uint `gorm:"primaryKey"`
}

// Counts kept by hooks: creates (alone and in batches over several
// parents) and deletes that name the parent's key; a delete that does not
// is refused by Citus (the hooks' locking read would run on every shard)
// and changes nothing.
func TestCountsByHooksOnCitusStayExact(t *testing.T) {
	db := openCitus(t)
	must(t, db.AutoMigrate(&CitusHookPost{}, &CitusHookNote{}))
	must(t, db.Exec("SELECT create_distributed_table('citus_hook_posts', 'id', colocate_with => 'citus_posts')").Error)
	must(t, db.Exec("SELECT create_distributed_table('citus_hook_notes', 'citus_hook_post_id', colocate_with => 'citus_posts')").Error)
	must(t, db.AutoMigrate(&CitusHookPost{}, &CitusHookNote{}))
	var ps [4]CitusHookPost
	for i := range ps {
		must(t, db.Create(&ps[i]).Error)
	}
	var next atomic.Uint32
	hammer(t, 16, 10, func() error {
		i := next.Add(1)
		switch i % 4 {
		case 0: // a batch over every parent
			notes := make([]CitusHookNote, len(ps))
			for j := range ps {
				notes[j] = CitusHookNote{CitusHookPostID: ps[j].ID, ID: uint(i)*10 + uint(j)}
			}
			return db.Create(&notes).Error
		case 1: // created, then deleted by its key
			n := CitusHookNote{CitusHookPostID: ps[i%4].ID, ID: uint(i) * 10}
			if err := db.Create(&n).Error; err != nil {
				return err
			}
			return db.Delete(&n).Error
		default:
			return db.Create(&CitusHookNote{CitusHookPostID: ps[i%4].ID, ID: uint(i) * 10}).Error
		}
	})
	err := db.Where("id > ?", 0).Delete(&CitusHookNote{}).Error
	if err == nil || !strings.Contains(err.Error(), "FOR UPDATE") {
		t.Errorf("a delete of notes that names no parent: %v, want Citus's refusal of the locking read", err)
	}
	must(t, db.Where("citus_hook_post_id = ?", ps[2].ID).Delete(&CitusHookNote{}).Error)
	for _, p := range ps {
		var got CitusHookPost
		var rows int64
		must(t, db.First(&got, p.ID).Error)
		must(t, db.Model(&CitusHookNote{}).Where("citus_hook_post_id = ?", p.ID).Count(&rows).Error)
		if got.NoteCount != rows {
			t.Errorf("post %d: %d notes counted, %d there", p.ID, got.NoteCount, rows)
		}
	}
}

// BenchmarkLoadOneParentOnCitus: a load of one post by key, against the
// plain load of its row, and against the library's statement as it was
// before it named the key in its subqueries (Citus sent it to every
// shard).
func BenchmarkLoadOneParentOnCitus(b *testing.B) {
	db := openCitus(b)
	ps := make([]CitusPost, 64)
	for i := range ps {
		ps[i].Title = "post"
	}
	must(b, db.Create(&ps).Error)
	for _, p := range ps {
		must(b, gormcounter.Increment(db.Model(&CitusPost{ID: p.ID}), "Likes", 3).Error)
	}
	id := ps[7].ID
	everyShard := `SELECT "citus_posts".*, (COALESCE((SELECT SUM("hc_s"."n") FROM "citus_post_likes_slots" AS "hc_s" WHERE "hc_s"."citus_post_id" = "citus_posts"."id"), 0)) AS "likes",
		(COALESCE((SELECT SUM("hc_s"."n") FROM "citus_post_stock_slots" AS "hc_s" WHERE "hc_s"."citus_post_id" = "citus_posts"."id"), 0)) AS "stock",
		(COALESCE((SELECT SUM("hc_s"."n") FROM "citus_post_reply_count_slots" AS "hc_s" WHERE "hc_s"."citus_post_id" = "citus_posts"."id"), 0)) AS "reply_count"
		FROM "citus_posts" WHERE "citus_posts"."id" = $1 ORDER BY "citus_posts"."id" LIMIT 1`
	plain := db.Session(&gorm.Session{NewDB: true})
	b.Run("plain row", func(b *testing.B) {
		for b.Loop() {
			var row struct{ ID uint }
			must(b, plain.Raw(`SELECT * FROM "citus_posts" WHERE "id" = $1 LIMIT 1`, id).Scan(&row).Error)
		}
	})
	b.Run("First", func(b *testing.B) {
		for b.Loop() {
			var p CitusPost
			must(b, db.First(&p, id).Error)
		}
	})
	b.Run("without the key in the subqueries", func(b *testing.B) {
		for b.Loop() {
			var row struct{ ID uint }
			must(b, plain.Raw(everyShard, id).Scan(&row).Error)
		}
	})
}

// A table an application had before its counters: likes, a column of
// values, adopted by a sum counter; plays, a counter of adaptive width.
type citusShowBefore struct {
	ID    uint
	Title string
	Likes int64
}

func (citusShowBefore) TableName() string { return "citus_shows" }

type citusShow struct {
	ID    uint
	Title string
	Likes int64 `gorm:"counter"`
	Plays int64 `gorm:"counter:slots=auto"`
}

func (citusShow) TableName() string { return "citus_shows" }

// Adoption of a column of values on a distributed parent: loads add the
// column to the slots, MoveToSlots moves it (its locking read one parent
// per statement), and a slots=auto counter beside it keeps counting.
func TestAdoptionOnCitusKeepsEveryValue(t *testing.T) {
	db := openCitus(t)
	plain := db.Session(&gorm.Session{NewDB: true})
	must(t, plain.Migrator().CreateTable(&citusShowBefore{}))
	must(t, db.Exec("SELECT create_distributed_table('citus_shows', 'id', colocate_with => 'citus_posts')").Error)
	// One at a time: a batch insert returns the new keys in the order of
	// the shards, which GORM hands to the rows in the order of the slice.
	before := []citusShowBefore{{Title: "a", Likes: 5}, {Title: "b", Likes: 7}, {Title: "c"}}
	for i := range before {
		must(t, plain.Create(&before[i]).Error)
	}
	must(t, db.AutoMigrate(&citusShow{}))
	want := map[uint][2]int64{before[0].ID: {5, 0}, before[1].ID: {7, 0}, before[2].ID: {0, 0}}
	var mu sync.Mutex
	var next atomic.Int64
	hammer(t, 16, 10, func() error {
		id := before[next.Add(1)%3].ID
		if err := gormcounter.Increment(db.Model(&citusShow{ID: id}), "Likes", 1).Error; err != nil {
			return err
		}
		if err := gormcounter.Increment(db.Model(&citusShow{ID: id}), "Plays", 1).Error; err != nil {
			return err
		}
		mu.Lock()
		w := want[id]
		want[id] = [2]int64{w[0] + 1, w[1] + 1}
		mu.Unlock()
		return nil
	})
	check := func(what string) {
		t.Helper()
		var got []citusShow
		must(t, db.Find(&got).Error)
		for _, s := range got {
			if w := want[s.ID]; s.Likes != w[0] || s.Plays != w[1] {
				t.Errorf("%s: show %d: likes %d, plays %d; want %d, %d", what, s.ID, s.Likes, s.Plays, w[0], w[1])
			}
		}
	}
	check("before the move")
	moved, err := gormcounter.MoveToSlots(db, &citusShow{})
	must(t, err)
	if moved.Amount != 12 || moved.Busy != 0 {
		t.Errorf("MoveToSlots moved %+v, want 12 from 2 parents", moved)
	}
	check("after the move")
	var left int64
	must(t, db.Raw("SELECT COALESCE(SUM(likes), 0) FROM citus_shows").Scan(&left).Error)
	if left != 0 {
		t.Errorf("%d left in the likes column after the move", left)
	}
}

// citusMember is keyed by a UUID, the column Citus distributes it by.
type citusMember struct {
	ID      uuid.UUID `gorm:"type:uuid;primaryKey"`
	Name    string
	Likes   int64 `gorm:"counter"`
	Views   int64 `gorm:"counter:rollup"`
	Credits int64 `gorm:"counter:guarded"`
}

// Counters of a parent keyed by a UUID: exact, and a load by its key goes
// to its shard alone (the key bound as itself, not as an array).
func TestUUIDKeyedCountersOnCitusStayExact(t *testing.T) {
	db := openCitus(t)
	migrateDistributed(t, db, "citus_members", "default", &citusMember{})
	m := citusMember{ID: uuid.New(), Name: "member"}
	must(t, db.Create(&m).Error)
	must(t, gormcounter.Increment(db.Model(&citusMember{ID: m.ID}), "Credits", 100).Error)
	var took atomic.Int64
	hammer(t, 16, 10, func() error {
		for _, field := range []string{"Likes", "Views"} {
			if err := gormcounter.Increment(db.Model(&citusMember{ID: m.ID}), field, 1).Error; err != nil {
				return err
			}
		}
		err := gormcounter.Take(db.Model(&citusMember{ID: m.ID}), "Credits", 1).Error
		switch {
		case err == nil:
			took.Add(1)
		case errors.Is(err, hotcounter.ErrInsufficient):
			err = nil // 160 takes of 100
		}
		return err
	})
	must(t, gormcounter.RollupPass(db, &citusMember{}))
	var got citusMember
	must(t, db.Where(&citusMember{ID: m.ID}).Take(&got).Error)
	if got.Likes != 160 || got.Views != 160 || got.Credits != 100-took.Load() || took.Load() != 100 {
		t.Errorf("member: likes %d, views %d, credits %d after %d takes; want 160, 160, 0 after 100", got.Likes, got.Views, got.Credits, took.Load())
	}
	if n := citusShards(t, db, func(tx *gorm.DB) *gorm.DB { return tx.Where(&citusMember{ID: m.ID}).Take(&citusMember{}) }); n != 1 {
		t.Errorf("a load by its UUID went to %d shards, want 1", n)
	}
}
