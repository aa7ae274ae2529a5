package integration_test

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/hotcounter/hotcounter"
	"github.com/hotcounter/hotcounter/gormcounter"
	"github.com/hotcounter/hotcounter/internal/detect"
)

// scaleSizes are the sizes of the posts table that BenchmarkAtScale
// compares: 10,000 and 1,000,000, or the comma-separated list in
// HOTCOUNTER_SCALE_SIZES (e.g. "2000,10000"; underscores allowed).
func scaleSizes(b *testing.B) []int {
	env := os.Getenv("HOTCOUNTER_SCALE_SIZES")
	if env == "" {
		return []int{10_000, 1_000_000}
	}
	var sizes []int
	for _, s := range strings.Split(env, ",") {
		n, err := strconv.Atoi(strings.ReplaceAll(strings.TrimSpace(s), "_", ""))
		if err != nil || n < 1000 {
			b.Fatalf("HOTCOUNTER_SCALE_SIZES=%q: %q is not a size of at least 1000 posts", env, s)
		}
		sizes = append(sizes, n)
	}
	return sizes
}

// BenchmarkAtScale measures the same operations on a posts table of 10,000
// posts and of 1,000,000 (HOTCOUNTER_SCALE_SIZES overrides the list),
// PostgreSQL through GORM, durable commits, so that each figure can be read
// against its own at the other size.
//
// The seed of a size n (INSERT ... SELECT generate_series, then VACUUM
// ANALYZE): posts 1..n; post_likes_slots with slots 0, 1 and 2 holding 1 for
// every post (likes 3), and all 16 slots for every 1,000th post (hot, likes
// 16); post_views_slots with one pending row (1) for every 10th post. The
// cases, posts=N/<case>, ns/op being one operation:
//
//   - plain-id, load-id: the posts columns of one typical post through
//     database/sql, and db.First(&post, id) with its likes (x-plain: load
//     against plain).
//   - plain-in100, load-in100: 100 random typical posts, WHERE id IN (...).
//   - plain-page-deep, page-deep: Order("id").Limit(100).Offset(n/2).
//   - status: what `hotcounter status -schema S` runs (detect.Status, the 5
//     widest parents of each table) on the benchmark's schema.
//   - rollup-pass: gormcounter.RollupPass over the n/10 pending views rows,
//     put back untimed before each pass, with the two tables vacuumed so
//     that every pass meets the seeded state (parents/s: parents folded).
//   - recount: gormcounter.Recount of Category.ObjectCount (counts kept by
//     triggers) over n/10 categories of 10 children each, none off
//     (parents/s: categories checked), seeded when the case first runs.
//   - load-hot, compact, load-in100-compacted, load-hot-compacted: a hot
//     post's load, one CompactPass over the likes (MB-before, MB-after: the
//     slot table and its indexes), then the loads again, and once more
//     after a VACUUM, as autovacuum would run one.
//
// Each case checks what it got and fails on anything else.
func BenchmarkAtScale(b *testing.B) {
	for _, n := range scaleSizes(b) {
		b.Run(fmt.Sprintf("posts=%d", n), func(b *testing.B) { benchAtScale(b, n) })
	}
}

func benchAtScale(b *testing.B, n int) {
	dsn := benchDSN(b, pg)
	db := openBenchWith(b, pg, dsn, gormcounter.Config{})
	if err := db.AutoMigrate(&Author{}, &Post{}); err != nil {
		b.Fatal(err)
	}
	sqlDB, err := db.DB()
	if err != nil {
		b.Fatal(err)
	}
	exec := func(qs ...string) {
		b.Helper()
		for _, q := range qs {
			if _, err := sqlDB.Exec(q); err != nil {
				b.Fatalf("%s: %v", q, err)
			}
		}
	}
	const pendingViews = "INSERT INTO post_views_slots (post_id, slot, n) SELECT id, 0, 1 FROM posts WHERE id % 10 = 0"
	exec(
		fmt.Sprintf("INSERT INTO posts (title) SELECT 'p' || g FROM generate_series(1, %d) g", n),
		"INSERT INTO post_likes_slots (post_id, slot, n) SELECT id, g, 1 FROM posts CROSS JOIN generate_series(0, 2) g",
		"INSERT INTO post_likes_slots (post_id, slot, n) SELECT id, g, 1 FROM posts CROSS JOIN generate_series(3, 15) g WHERE id % 1000 = 0",
		pendingViews,
		"VACUUM ANALYZE posts", "VACUUM ANALYZE post_likes_slots", "VACUUM ANALYZE post_views_slots",
	)
	if lo, hi, count := rawInt(b, db, "SELECT MIN(id) FROM posts"), rawInt(b, db, "SELECT MAX(id) FROM posts"),
		rawInt(b, db, "SELECT COUNT(*) FROM posts"); lo != 1 || hi != int64(n) || count != int64(n) {
		b.Fatalf("posts hold ids %d..%d (%d rows), want 1..%d", lo, hi, count, n)
	}
	hot := int64(n / 1000)
	likeRows := 3*int64(n) + 13*hot
	if got := rawInt(b, db, "SELECT COUNT(*) FROM post_likes_slots"); got != likeRows {
		b.Fatalf("%d likes slot rows, want %d", got, likeRows)
	}
	pending := int64(n / 10)
	likes := func(id uint) int64 {
		if id%1000 == 0 {
			return 16
		}
		return 3
	}

	// run runs one case; with plain set, it reports its time against that
	// case's, measured before it in the same run.
	perOp := map[string]float64{}
	run := func(name, plain string, op func() error) {
		b.Run(name, func(b *testing.B) {
			for range b.N {
				if err := op(); err != nil {
					b.Fatal(err)
				}
			}
			ns := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
			perOp[name] = ns
			if p, ok := perOp[plain]; ok {
				b.ReportMetric(ns/p, "x-plain")
			}
		})
	}
	// plainRows reads the posts' own columns of a query through
	// database/sql and returns the ids it read.
	plainRows := func(q string, args ...any) ([]uint, error) {
		rows, err := sqlDB.Query(q, args...)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		var ids []uint
		for rows.Next() {
			var (
				id     uint
				title  string
				author sql.NullInt64
				views  int64
			)
			if err := rows.Scan(&id, &title, &author, &views); err != nil {
				return nil, err
			}
			ids = append(ids, id)
		}
		return ids, rows.Err()
	}
	const cols = "id, title, author_id, views"
	// checkPosts checks that posts are the ids wanted, each with its likes.
	checkPosts := func(posts []Post, want []uint) error {
		got := make([]uint, len(posts))
		for i, p := range posts {
			got[i] = p.ID
			if p.Likes != likes(p.ID) {
				return fmt.Errorf("post %d loaded with %d likes, want %d", p.ID, p.Likes, likes(p.ID))
			}
		}
		return sameIDs(got, want)
	}

	// One typical post, from the middle of the table.
	one := uint(n/2 + 1)
	if one%1000 == 0 {
		one++
	}
	run("plain-id", "", func() error {
		ids, err := plainRows("SELECT "+cols+" FROM posts WHERE id = $1", one)
		if err != nil {
			return err
		}
		return sameIDs(ids, []uint{one})
	})
	// loadOne loads one post with its likes and checks them.
	loadOne := func(id uint) func() error {
		return func() error {
			var p Post
			if err := db.First(&p, id).Error; err != nil {
				return err
			}
			return checkPosts([]Post{p}, []uint{id})
		}
	}
	run("load-id", "plain-id", loadOne(one))

	// 100 typical posts at random.
	rng := rand.New(rand.NewPCG(uint64(n), 100))
	picked := map[uint]bool{}
	var ids []uint
	for len(ids) < 100 {
		id := uint(rng.IntN(n)) + 1
		if id%1000 != 0 && !picked[id] {
			picked[id] = true
			ids = append(ids, id)
		}
	}
	marks, args := make([]string, len(ids)), make([]any, len(ids))
	for i, id := range ids {
		marks[i], args[i] = fmt.Sprintf("$%d", i+1), id
	}
	inQuery := "SELECT " + cols + " FROM posts WHERE id IN (" + strings.Join(marks, ", ") + ")"
	run("plain-in100", "", func() error {
		got, err := plainRows(inQuery, args...)
		if err != nil {
			return err
		}
		return sameIDs(got, ids)
	})
	// loadIn loads the 100 posts with their likes and checks them.
	loadIn := func() error {
		var posts []Post
		if err := db.Where("id IN ?", ids).Find(&posts).Error; err != nil {
			return err
		}
		return checkPosts(posts, ids)
	}
	run("load-in100", "plain-in100", loadIn)

	// A page of 100 from the middle of the table.
	page := make([]uint, 100)
	for i := range page {
		page[i] = uint(n/2 + 1 + i)
	}
	inOrder := func(got []uint) error {
		if !slices.Equal(got, page) {
			return fmt.Errorf("page of %d posts from %v, want %d..%d in order", len(got), got[:min(len(got), 1)], page[0], page[99])
		}
		return nil
	}
	run("plain-page-deep", "", func() error {
		got, err := plainRows(fmt.Sprintf("SELECT %s FROM posts ORDER BY id LIMIT 100 OFFSET %d", cols, n/2))
		if err != nil {
			return err
		}
		return inOrder(got)
	})
	run("page-deep", "plain-page-deep", func() error {
		var posts []Post
		if err := db.Order("id").Limit(100).Offset(n / 2).Find(&posts).Error; err != nil {
			return err
		}
		got := make([]uint, len(posts))
		for i, p := range posts {
			got[i] = p.ID
		}
		if err := inOrder(got); err != nil {
			return err
		}
		return checkPosts(posts, page)
	})

	// hotcounter status on this schema, as the command runs it.
	ctx := context.Background()
	var schema string
	if err := sqlDB.QueryRow("SELECT current_schema()").Scan(&schema); err != nil {
		b.Fatal(err)
	}
	status, err := detect.Open(ctx, dsn)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { status.Close() })
	run("status", "", func() error {
		tables, err := detect.Status(ctx, status, schema, 5)
		if err != nil {
			return err
		}
		return checkScaleStatus(tables, schema, n, likeRows, pending)
	})

	// One rollup pass over the pending views, each pass from the seeded
	// state.
	folded := int64(0) // views folded into posts.views by every pass so far
	b.Run("rollup-pass", func(b *testing.B) {
		for range b.N {
			b.StopTimer()
			exec("DELETE FROM post_views_slots", pendingViews, "VACUUM ANALYZE post_views_slots", "VACUUM posts")
			if got := rawInt(b, db, "SELECT COUNT(*) FROM post_views_slots"); got != pending {
				b.Fatalf("%d pending views rows before the pass, want %d", got, pending)
			}
			b.StartTimer()
			if err := gormcounter.RollupPass(db, &Post{}); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			folded += pending
			if left := rawInt(b, db, "SELECT COUNT(*) FROM post_views_slots"); left != 0 {
				b.Fatalf("%d views rows left pending after the pass, want 0", left)
			}
			b.StartTimer()
		}
		b.ReportMetric(float64(pending)*float64(b.N)/b.Elapsed().Seconds(), "parents/s")
		b.StopTimer()
		if got := rawInt(b, db, "SELECT SUM(views) FROM posts"); got != folded {
			b.Fatalf("posts hold %d views, want the %d folded", got, folded)
		}
		// Leave the views pending, as seeded.
		exec(pendingViews, "VACUUM ANALYZE post_views_slots", "VACUUM posts")
	})

	// Recount of n/10 categories with n children, seeded the first time the
	// case runs.
	categories := n / 10
	seeded := false
	b.Run("recount", func(b *testing.B) {
		if !seeded {
			if err := db.AutoMigrate(&Category{}, &Object{}); err != nil {
				b.Fatal(err)
			}
			exec(
				fmt.Sprintf("INSERT INTO categories (name) SELECT 'c' FROM generate_series(1, %d)", categories),
				fmt.Sprintf("INSERT INTO objects (category_id, status) SELECT (SELECT MIN(id) FROM categories) + (g %% %d), 'active' FROM generate_series(1, %d) g", categories, n),
			)
			// Recount must find and correct a count that is off: take one
			// category's slot rows away.
			exec("DELETE FROM category_object_count_slots WHERE category_id = (SELECT MIN(id) FROM categories)")
			if fixed, err := gormcounter.Recount(db.Model(&Category{}), "ObjectCount"); err != nil || fixed != 1 {
				b.Fatalf("recount after a count was taken away: %d corrected, %v; want 1, nil", fixed, err)
			}
			exec("VACUUM ANALYZE categories", "VACUUM ANALYZE objects",
				"VACUUM ANALYZE category_object_count_slots", "VACUUM ANALYZE category_active_count_slots")
			if bad := rawInt(b, db, `SELECT COUNT(*) FROM categories c WHERE 10 <> COALESCE((SELECT SUM(n)
				FROM category_object_count_slots s WHERE s.category_id = c.id), 0)`); bad != 0 {
				b.Fatalf("%d categories whose count is not their 10 children", bad)
			}
			seeded = true
			b.ResetTimer()
		}
		for range b.N {
			if fixed, err := gormcounter.Recount(db.Model(&Category{}), "ObjectCount"); err != nil || fixed != 0 {
				b.Fatalf("recount: %d corrected, %v; want 0, nil", fixed, err)
			}
		}
		b.ReportMetric(float64(categories)*float64(b.N)/b.Elapsed().Seconds(), "parents/s")
	})

	// A compaction pass over the likes, and loads before and after it: a
	// hot post (16 slot rows, 13 of them written apart from its first
	// three) and the 100 typical posts. Each pass after the first runs on a
	// fresh copy of the seed (TRUNCATE, the same inserts, VACUUM ANALYZE),
	// untimed. MB-before and MB-after are the slot table's and its indexes'
	// data files, as the pass reports them.
	hotPost := uint(1000 * (n / 2000))
	if hotPost == 0 {
		hotPost = 1000
	}
	run("load-hot", "plain-id", loadOne(hotPost))
	fresh := true // the likes are as seeded, not compacted yet
	b.Run("compact", func(b *testing.B) {
		var done hotcounter.Compacted
		for range b.N {
			if !fresh {
				b.StopTimer()
				exec("TRUNCATE post_likes_slots",
					"INSERT INTO post_likes_slots (post_id, slot, n) SELECT id, g, 1 FROM posts CROSS JOIN generate_series(0, 2) g",
					"INSERT INTO post_likes_slots (post_id, slot, n) SELECT id, g, 1 FROM posts CROSS JOIN generate_series(3, 15) g WHERE id % 1000 = 0",
					"VACUUM ANALYZE post_likes_slots")
				b.StartTimer()
			}
			var err error
			if done, err = gormcounter.CompactPass(db, &Post{}); err != nil {
				b.Fatal(err)
			}
			fresh = false
			if done.Postponed != "" || done.Parents != int64(n) || done.Removed != likeRows-int64(n) {
				b.Fatalf("the pass gathered %d parents and removed %d rows (postponed: %q), want %d and %d",
					done.Parents, done.Removed, done.Postponed, n, likeRows-int64(n))
			}
		}
		b.ReportMetric(float64(done.BytesBefore)/(1<<20), "MB-before")
		b.ReportMetric(float64(done.BytesAfter)/(1<<20), "MB-after")
		b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "parents/s")
	})
	run("load-in100-compacted", "plain-in100", loadIn)
	run("load-hot-compacted", "plain-id", loadOne(hotPost))
	// Once VACUUM (autovacuum, in production) has removed the index
	// entries of the rows the pass deleted.
	exec("VACUUM ANALYZE post_likes_slots")
	run("load-in100-vacuumed", "plain-in100", loadIn)
	run("load-hot-vacuumed", "plain-id", loadOne(hotPost))
}

// sameIDs reports whether got holds the ids of want, in any order.
func sameIDs(got, want []uint) error {
	g, w := slices.Clone(got), slices.Clone(want)
	slices.Sort(g)
	slices.Sort(w)
	if !slices.Equal(g, w) {
		return fmt.Errorf("got %d rows (%v...), want %d (%v...)", len(got), got[:min(len(got), 3)], len(want), want[:min(len(want), 3)])
	}
	return nil
}

// checkScaleStatus checks what detect.Status reported of BenchmarkAtScale's
// seed: the likes slot table with every post and its hot ones the widest,
// and the pending views.
func checkScaleStatus(tables []detect.Table, schema string, n int, likeRows, pending int64) error {
	find := func(name string) *detect.Table {
		for i := range tables {
			if tables[i].Table == schema+"."+name {
				return &tables[i]
			}
		}
		return nil
	}
	likes, views := find("post_likes_slots"), find("post_views_slots")
	if likes == nil || views == nil {
		return fmt.Errorf("status listed %+v, want %s.post_likes_slots and %s.post_views_slots", tables, schema, schema)
	}
	if likes.Kind != "slots" || likes.Owner != "post_id" || likes.Rows != likeRows || likes.Parents != int64(n) ||
		likes.Nonzero != likeRows || likes.MaxRows != 16 || len(likes.Widest) != 5 || likes.Widest[0].Rows != 16 || likes.Widest[0].Sum != 16 {
		return fmt.Errorf("post_likes_slots: %+v, want %d rows over %d parents, the 5 widest listed with 16 rows each", *likes, likeRows, n)
	}
	if views.Rows != pending || views.Parents != pending || views.Nonzero != pending || views.MaxRows != 1 {
		return fmt.Errorf("post_views_slots: %+v, want %d rows pending over as many parents", *views, pending)
	}
	return nil
}
