package integration_test

import (
	"testing"

	"gorm.io/gorm"
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
