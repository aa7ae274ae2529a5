package integration_test

import (
	"fmt"
	"testing"

	"gorm.io/gorm"

	"github.com/hotcounter/hotcounter/gormcounter"
)

// BenchmarkCountCacheHotParent: 32 writers insert children of one hot
// category (PostgreSQL), each insert in GORM's default transaction, each
// category with one count. ns/op is wall time per insert. bare: no count
// (and no foreign key); naive-trigger: a row trigger updating the
// category's column (the classic counter cache, one hot row); triggers16:
// counts= with its triggers; hooks16: the same count kept by GORM hooks.
func BenchmarkCountCacheHotParent(b *testing.B) { benchCountCacheHotParent(b, pg) }

// BenchmarkCountCacheHotParentMariaDB is BenchmarkCountCacheHotParent on
// MariaDB (row triggers there).
func BenchmarkCountCacheHotParentMariaDB(b *testing.B) { benchCountCacheHotParent(b, my) }

func benchCountCacheHotParent(b *testing.B, kind dbKind) {
	db := openBenchOn(b, kind)
	if err := db.AutoMigrate(&NaiveCategory{}, &NaiveObject{}, &BareObject{}, &BenchCategory{}, &BenchObject{}, &HookCategory{}, &HookObject{}); err != nil {
		b.Fatal(err)
	}
	naiveTrigger := []string{
		`CREATE FUNCTION naive_count() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
			UPDATE naive_categories SET object_count = object_count + 1 WHERE id = NEW.naive_category_id; RETURN NULL; END $$`,
		`CREATE TRIGGER naive_count AFTER INSERT ON naive_objects FOR EACH ROW EXECUTE FUNCTION naive_count()`,
	}
	if kind == my {
		naiveTrigger = []string{`CREATE TRIGGER naive_count AFTER INSERT ON naive_objects FOR EACH ROW
			UPDATE naive_categories SET object_count = object_count + 1 WHERE id = NEW.naive_category_id`}
	}
	for _, stmt := range naiveTrigger {
		if err := db.Exec(stmt).Error; err != nil {
			b.Fatal(err)
		}
	}
	naive, cat, hooked := NaiveCategory{}, BenchCategory{}, HookCategory{}
	for _, v := range []any{&naive, &cat, &hooked} {
		if err := db.Create(v).Error; err != nil {
			b.Fatal(err)
		}
	}
	run := func(name string, insert func(tx *gorm.DB) error) {
		b.Run(name, func(b *testing.B) { writersLoop(b, func() error { return insert(db) }) })
	}
	run("bare", func(tx *gorm.DB) error { return tx.Create(&BareObject{CategoryID: 1, Status: "active"}).Error })
	run("naive-trigger", func(tx *gorm.DB) error {
		return tx.Create(&NaiveObject{NaiveCategoryID: naive.ID, Status: "active"}).Error
	})
	run("triggers16", func(tx *gorm.DB) error {
		return tx.Create(&BenchObject{BenchCategoryID: cat.ID, Status: "active"}).Error
	})
	run("hooks16", func(tx *gorm.DB) error {
		return tx.Create(&HookObject{HookCategoryID: hooked.ID, Status: "active"}).Error
	})

	var n, want int64
	if err := db.Raw("SELECT object_count FROM naive_categories WHERE id = ?", naive.ID).Scan(&n).Error; err != nil {
		b.Fatal(err)
	}
	db.Model(&NaiveObject{}).Count(&want)
	if n != want {
		b.Fatalf("the naive trigger counted %d of %d", n, want)
	}
}

// UncountedCategory is BenchCategory without the count: the same child
// table, foreign key and index, no trigger.
type UncountedCategory struct {
	ID               uint
	UncountedObjects []UncountedObject
}

// UncountedObject is the child of UncountedCategory.
type UncountedObject struct {
	ID                  uint
	UncountedCategoryID uint `gorm:"index"`
	Status              string
}

// BenchmarkCountsOfNewParents: one writer on PostgreSQL, counts kept by
// triggers. first and second: the insert of a new category's first child,
// and of its second (ns/op per insert, one statement each, in GORM's
// default transaction). bulk-counted and bulk-uncounted: one INSERT ...
// SELECT of 100 children into each of 10,000 new categories (1,000,000
// rows per op), with the count and without it (UncountedCategory).
func BenchmarkCountsOfNewParents(b *testing.B) { benchCountsOfNewParents(b, pg) }

// BenchmarkCountsOfNewParentsMariaDB is BenchmarkCountsOfNewParents on
// MariaDB (row triggers there).
func BenchmarkCountsOfNewParentsMariaDB(b *testing.B) { benchCountsOfNewParents(b, my) }

func benchCountsOfNewParents(b *testing.B, kind dbKind) {
	db := openBenchOn(b, kind)
	if err := db.AutoMigrate(&BenchCategory{}, &BenchObject{}, &UncountedCategory{}, &UncountedObject{}); err != nil {
		b.Fatal(err)
	}
	// parents creates n categories in the table and returns the first id.
	parents := func(table string, n int) uint {
		b.Helper()
		var first uint
		if err := db.Raw("SELECT COALESCE(MAX(id), 0) + 1 FROM " + table).Row().Scan(&first); err != nil {
			b.Fatal(err)
		}
		rows := make([]map[string]any, n)
		for i := range rows {
			rows[i] = map[string]any{"id": first + uint(i)}
		}
		if err := db.Table(table).CreateInBatches(rows, 1000).Error; err != nil {
			b.Fatal(err)
		}
		return first
	}
	child := func(id uint) {
		if err := db.Exec("INSERT INTO bench_objects (bench_category_id, status) VALUES (?, 'active')", id).Error; err != nil {
			b.Fatal(err)
		}
	}
	b.Run("first", func(b *testing.B) {
		first := parents("bench_categories", b.N)
		b.ResetTimer()
		for i := range b.N {
			child(first + uint(i))
		}
	})
	b.Run("second", func(b *testing.B) {
		first := parents("bench_categories", b.N)
		for i := range b.N {
			child(first + uint(i))
		}
		b.ResetTimer()
		for i := range b.N {
			child(first + uint(i))
		}
	})
	const categories, each = 10_000, 100
	series := "generate_series(0, " + fmt.Sprint(categories*each-1) + ") AS g(n)"
	if kind == my {
		series = "(SELECT seq - 1 AS n FROM seq_1_to_" + fmt.Sprint(categories*each) + ") AS g"
	}
	bulk := func(parent, child, ref string) func(b *testing.B) {
		return func(b *testing.B) {
			for range b.N {
				b.StopTimer()
				first := parents(parent, categories)
				b.StartTimer()
				q := fmt.Sprintf("INSERT INTO %s (%s, status) SELECT ? + MOD(g.n, %d), 'active' FROM %s", child, ref, categories, series)
				if err := db.Exec(q, first).Error; err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	b.Run("bulk-counted", bulk("bench_categories", "bench_objects", "bench_category_id"))
	b.Run("bulk-uncounted", bulk("uncounted_categories", "uncounted_objects", "uncounted_category_id"))
	var bad int64
	if err := db.Raw(`SELECT COUNT(*) FROM bench_categories c WHERE (SELECT COUNT(*) FROM bench_objects o WHERE o.bench_category_id = c.id)
		<> COALESCE((SELECT SUM(n) FROM bench_category_object_count_slots s WHERE s.bench_category_id = c.id), 0)`).Row().Scan(&bad); err != nil {
		b.Fatal(err)
	}
	if bad != 0 {
		b.Fatalf("%d categories whose count differs from COUNT(*)", bad)
	}
}

// BenchmarkRecountNeverAnalysed: Recount of 20,000 categories and 200,000
// children (PostgreSQL, counts kept by triggers, autovacuum off on the
// tables), on tables never analysed and after ANALYZE. ns/op is one whole
// Recount.
func BenchmarkRecountNeverAnalysed(b *testing.B) {
	db := openBench(b)
	if err := db.AutoMigrate(&Category{}, &Object{}); err != nil {
		b.Fatal(err)
	}
	for _, q := range []string{
		"ALTER TABLE categories SET (autovacuum_enabled = off)",
		"ALTER TABLE objects SET (autovacuum_enabled = off)",
		"ALTER TABLE category_object_count_slots SET (autovacuum_enabled = off)",
		"ALTER TABLE category_active_count_slots SET (autovacuum_enabled = off)",
		"INSERT INTO categories (name) SELECT 'c' FROM generate_series(1, 20000)",
		"INSERT INTO objects (category_id, status) SELECT (SELECT MIN(id) FROM categories) + (g % 20000), 'active' FROM generate_series(1, 200000) g",
	} {
		if err := db.Exec(q).Error; err != nil {
			b.Fatal(err)
		}
	}
	for _, analysed := range []bool{false, true} {
		name := "never-analysed"
		if analysed {
			name = "analysed"
			for _, table := range []string{"categories", "objects", "category_object_count_slots", "category_active_count_slots"} {
				if err := db.Exec("ANALYZE " + table).Error; err != nil {
					b.Fatal(err)
				}
			}
		}
		b.Run(name, func(b *testing.B) {
			for range b.N {
				if n, err := gormcounter.Recount(db.Model(&Category{}), "ObjectCount"); err != nil || n != 0 {
					b.Fatalf("recount: %d corrected, %v; want 0, nil", n, err)
				}
			}
		})
	}
}

// BenchmarkPassesNeverAnalysed: RollupPass of 50,000 posts with four slot
// rows each of a rollup counter (Post.Views), CompactPass of as many with
// four of a sum counter (Post.Likes), and MoveToSlots of a likes column
// holding 1 in each, PostgreSQL, autovacuum off on the tables, never
// analysed and after ANALYZE. ns/op is one whole pass; the rows are put
// back, untimed, before each.
func BenchmarkPassesNeverAnalysed(b *testing.B) {
	db := openBench(b)
	if err := db.AutoMigrate(&Author{}, &Post{}); err != nil {
		b.Fatal(err)
	}
	exec := func(q string) {
		b.Helper()
		if err := db.Exec(q).Error; err != nil {
			b.Fatal(err)
		}
	}
	for _, table := range []string{"posts", "post_views_slots", "post_likes_slots"} {
		exec("ALTER TABLE " + table + " SET (autovacuum_enabled = off)")
	}
	exec("INSERT INTO posts (title) SELECT 'p' FROM generate_series(1, 50000)")
	exec("ALTER TABLE posts ADD COLUMN likes bigint") // the column MoveToSlots empties
	for _, analysed := range []bool{false, true} {
		name := "never-analysed"
		if analysed {
			name = "analysed"
		}
		pass := func(slots string, run func() error) func(b *testing.B) {
			return func(b *testing.B) {
				for range b.N {
					b.StopTimer()
					exec("DELETE FROM " + slots)
					exec("INSERT INTO " + slots + " (post_id, slot, n) SELECT id, g, 1 FROM posts CROSS JOIN generate_series(0, 3) g")
					if analysed {
						exec("ANALYZE posts")
						exec("ANALYZE " + slots)
					}
					b.StartTimer()
					if err := run(); err != nil {
						b.Fatal(err)
					}
				}
			}
		}
		b.Run("rollup/"+name, pass("post_views_slots", func() error { return gormcounter.RollupPass(db, &Post{}) }))
		b.Run("compact/"+name, pass("post_likes_slots", func() error { return errOf(gormcounter.CompactPass(db, &Post{})) }))
		// MoveToSlots of a likes column that every post holds 1 in, as a
		// counter declared over an existing column finds it.
		b.Run("move/"+name, func(b *testing.B) {
			for range b.N {
				b.StopTimer()
				exec("DELETE FROM post_likes_slots")
				exec("UPDATE posts SET likes = 1")
				if analysed {
					exec("ANALYZE posts")
					exec("ANALYZE post_likes_slots")
				}
				b.StartTimer()
				moved, err := gormcounter.MoveToSlots(db, &Post{})
				if err != nil {
					b.Fatal(err)
				}
				if moved.Parents != 50000 {
					b.Fatalf("MoveToSlots moved %d parents, want 50000", moved.Parents)
				}
			}
		})
	}
}
