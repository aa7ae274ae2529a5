package integration_test

import (
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/hotcounter/hotcounter/gormcounter"
	"github.com/hotcounter/hotcounter/internal/testdb"
	"gorm.io/gorm"
)

// viralWriters is the number of writers on the viral post of
// BenchmarkAutoSlots.
const viralWriters = 64

// BenchmarkAutoSlots sets slots=auto beside fixed widths, in one run:
//   - viral64/*: 64 writers increment one post (ns/op is wall time per
//     increment); auto should reach the best fixed width;
//   - cold10000/*: 10,000 posts liked 1 to 5 times each by 16 writers that
//     never write one post at once; reports slot rows per post (the rows
//     every load of them sums);
//   - hotcold/auto: a post written by 64 writers, then left cold past the
//     cooldown, compacted and liked 20 more times; reports its slot rows
//     while hot and at the end.
func BenchmarkAutoSlots(b *testing.B) {
	dsn := benchDSN(b, pg)
	db := openBenchWith(b, pg, dsn, gormcounter.Config{})
	sqlDB, _ := db.DB()
	sqlDB.SetMaxOpenConns(viralWriters + 8)
	sqlDB.SetMaxIdleConns(viralWriters + 8)
	if err := db.AutoMigrate(&NaivePost{}, &Author{}, &Post{}, &WidePost{}, &OneSlotPost{}, &AutoPost{}); err != nil {
		b.Fatal(err)
	}
	naive, post, wide, one, auto := NaivePost{}, Post{Title: "viral"}, WidePost{}, OneSlotPost{}, AutoPost{}
	for _, v := range []any{&naive, &post, &wide, &one, &auto} {
		if err := db.Create(v).Error; err != nil {
			b.Fatal(err)
		}
	}
	inc := func(model any) func() error {
		return func() error { return gormcounter.Increment(db.Model(model), "Likes", 1).Error }
	}
	plain := db.Session(&gorm.Session{SkipDefaultTransaction: true})
	b.Run("viral64/naive", func(b *testing.B) {
		writersLoopN(b, viralWriters, func() error {
			return plain.Model(&NaivePost{ID: naive.ID}).UpdateColumn("likes", gorm.Expr("likes + ?", 1)).Error
		})
	})
	b.Run("viral64/slots1", func(b *testing.B) { writersLoopN(b, viralWriters, inc(&OneSlotPost{ID: one.ID})) })
	b.Run("viral64/slots16", func(b *testing.B) { writersLoopN(b, viralWriters, inc(&Post{ID: post.ID})) })
	b.Run("viral64/slots64", func(b *testing.B) { writersLoopN(b, viralWriters, inc(&WidePost{ID: wide.ID})) })
	b.Run("viral64/auto", func(b *testing.B) {
		writersLoopN(b, viralWriters, inc(&AutoPost{ID: auto.ID}))
		b.ReportMetric(float64(rawInt(b, db, "SELECT COUNT(*) FROM auto_post_likes_slots WHERE auto_post_id = ?", auto.ID)), "rows")
	})

	// Cold posts: row counts, not speed, so commits need not reach the disk.
	cold := openBenchWith(b, pg, testdb.Postgres(b), gormcounter.Config{})
	if err := cold.AutoMigrate(&Author{}, &Post{}, &AutoPost{}); err != nil {
		b.Fatal(err)
	}
	const posts = 10_000
	b.Run("cold10000/slots16", func(b *testing.B) {
		b.ReportMetric(coldRows(b, cold, func(i int) any { return &Post{Title: fmt.Sprint(i)} }, "post_likes_slots"), "rows/post")
	})
	b.Run("cold10000/auto", func(b *testing.B) {
		b.ReportMetric(coldRows(b, cold, func(i int) any { return &AutoPost{Title: fmt.Sprint(i)} }, "auto_post_likes_slots"), "rows/post")
	})

	b.Run("hotcold/auto", func(b *testing.B) {
		db := openBenchWith(b, pg, testdb.Postgres(b), gormcounter.Config{AutoCooldown: 100 * time.Millisecond})
		sqlDB, _ := db.DB()
		sqlDB.SetMaxOpenConns(viralWriters + 8)
		if err := db.AutoMigrate(&AutoPost{}); err != nil {
			b.Fatal(err)
		}
		p := AutoPost{}
		if err := db.Create(&p).Error; err != nil {
			b.Fatal(err)
		}
		rows := func() float64 {
			return float64(rawInt(b, db, "SELECT COUNT(*) FROM auto_post_likes_slots WHERE auto_post_id = ?", p.ID))
		}
		writersLoopN(b, viralWriters, func() error { return gormcounter.Increment(db.Model(&AutoPost{ID: p.ID}), "Likes", 1).Error })
		b.StopTimer()
		b.ReportMetric(rows(), "rows-hot")
		time.Sleep(time.Second)
		if err := errOf(gormcounter.CompactPass(db, &AutoPost{})); err != nil {
			b.Fatal(err)
		}
		for range 20 {
			if err := gormcounter.Increment(db.Model(&AutoPost{ID: p.ID}), "Likes", 1).Error; err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(rows(), "rows-cold")
	})
}

// coldRows creates 10,000 posts with newPost, likes post i 1 + i%5 times
// from 16 writers that each write their own posts, and returns the slot
// rows of table per post.
func coldRows(b *testing.B, db *gorm.DB, newPost func(i int) any, table string) float64 {
	const posts, writers = 10_000, 16
	models := make([]any, posts)
	for i := range models {
		models[i] = newPost(i)
		if err := db.Create(models[i]).Error; err != nil {
			b.Fatal(err)
		}
	}
	before := rawInt(b, db, "SELECT COUNT(*) FROM "+table)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := w; i < posts; i += writers {
				for range 1 + i%5 {
					if err := gormcounter.Increment(db.Model(models[i]), "Likes", 1).Error; err != nil {
						b.Error(err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	return float64(rawInt(b, db, "SELECT COUNT(*) FROM "+table)-before) / posts
}

// writersLoopN is writersLoop with n writers.
func writersLoopN(b *testing.B, n int, op func() error) {
	b.SetParallelism((n + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := op(); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
