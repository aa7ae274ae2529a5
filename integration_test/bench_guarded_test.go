package integration_test

import (
	"testing"

	"github.com/hotcounter/hotcounter/gormcounter"
	"gorm.io/gorm"
)

// WideProduct is Product with 64 slots.
type WideProduct struct {
	ID    uint
	Stock int64 `gorm:"counter:guarded,slots=64"`
}

// NaiveProduct keeps its stock in one guarded row, the classic way.
type NaiveProduct struct {
	ID    uint
	Stock int64
}

// BenchmarkGuardedTake: 32 buyers take 1 each from one product with stock
// enough for the whole run, on PostgreSQL. ns/op is wall time per take.
// naive: one row, UPDATE ... SET stock = stock - 1 WHERE id = ? AND stock >=
// 1 in autocommit; take16, take64: gormcounter.Take from a guarded counter
// of 16 or 64 slots.
func BenchmarkGuardedTake(b *testing.B) { benchGuardedTake(b, pg) }

// BenchmarkGuardedTakeMariaDB is BenchmarkGuardedTake on MariaDB.
func BenchmarkGuardedTakeMariaDB(b *testing.B) { benchGuardedTake(b, my) }

func benchGuardedTake(b *testing.B, kind dbKind) {
	db := openBenchOn(b, kind)
	if err := db.AutoMigrate(&NaiveProduct{}, &Product{}, &WideProduct{}); err != nil {
		b.Fatal(err)
	}
	const plenty = 1 << 40
	naive, p, wide := NaiveProduct{Stock: plenty}, Product{Name: "flash sale"}, WideProduct{}
	for _, v := range []any{&naive, &p, &wide} {
		if err := db.Create(v).Error; err != nil {
			b.Fatal(err)
		}
	}
	for _, m := range []any{&Product{ID: p.ID}, &WideProduct{ID: wide.ID}} {
		if err := gormcounter.Increment(db.Model(m), "Stock", plenty).Error; err != nil {
			b.Fatal(err)
		}
	}
	auto := db.Session(&gorm.Session{SkipDefaultTransaction: true})
	b.Run("naive", func(b *testing.B) {
		writersLoop(b, func() error {
			return auto.Exec("UPDATE naive_products SET stock = stock - 1 WHERE id = ? AND stock >= 1", naive.ID).Error
		})
	})
	b.Run("take16", func(b *testing.B) {
		writersLoop(b, func() error { return gormcounter.Take(db.Model(&Product{ID: p.ID}), "Stock", 1).Error })
	})
	b.Run("take64", func(b *testing.B) {
		writersLoop(b, func() error { return gormcounter.Take(db.Model(&WideProduct{ID: wide.ID}), "Stock", 1).Error })
	})
}
