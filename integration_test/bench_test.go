package integration_test

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/hotcounter/hotcounter"
	"github.com/hotcounter/hotcounter/gormcounter"
	"github.com/hotcounter/hotcounter/internal/testdb"
	"github.com/hotcounter/hotcounter/redisstore"
)

// benchWriters is the number of concurrent writers in the write benchmarks.
const benchWriters = 32

// openBench opens a PostgreSQL schema for a benchmark, quietly, with a pool
// that lets every writer hold a connection.
func openBench(b *testing.B) *gorm.DB { return openBenchOn(b, pg) }

// openBenchOn is openBench on a database of the given kind.
func openBenchOn(b *testing.B, kind dbKind) *gorm.DB {
	b.Helper()
	dsn := testdb.Durable(testdb.Postgres(b)) // as docs/benchmarks.md states: commits reach the disk
	if kind == my {
		dsn = testdb.MySQL(b)
	}
	return openBenchWith(b, kind, dsn, gormcounter.Config{})
}

// openBenchWith opens dsn once more, as another process would, with the
// plugin configured by cfg.
func openBenchWith(b *testing.B, kind dbKind, dsn string, cfg gormcounter.Config) *gorm.DB {
	b.Helper()
	db, err := gorm.Open(dialectorFor(kind, dsn), &gorm.Config{Logger: logger.Discard})
	if err != nil {
		b.Fatal(err)
	}
	sqlDB, _ := db.DB()
	sqlDB.SetMaxOpenConns(benchWriters + 8)
	sqlDB.SetMaxIdleConns(benchWriters + 8)
	b.Cleanup(func() { sqlDB.Close() })
	if err := db.Use(gormcounter.New(cfg)); err != nil {
		b.Fatal(err)
	}
	return db
}

// benchDSN is a fresh database of the given kind for one benchmark.
func benchDSN(b *testing.B, kind dbKind) string {
	if kind == my {
		return testdb.MySQL(b)
	}
	return testdb.Durable(testdb.Postgres(b))
}

// writersLoop runs op from benchWriters goroutines; ns/op is then wall time per
// increment, the inverse of throughput.
func writersLoop(b *testing.B, op func() error) { writersLoopN(b, benchWriters, op) }

// BenchmarkIncrementOneRow: 32 writers increment one post's likes.
func BenchmarkIncrementOneRow(b *testing.B) { benchIncrementOneRow(b, pg) }

// BenchmarkIncrementOneRowMariaDB: the same on MariaDB.
func BenchmarkIncrementOneRowMariaDB(b *testing.B) { benchIncrementOneRow(b, my) }

func benchIncrementOneRow(b *testing.B, kind dbKind) {
	dsn := benchDSN(b, kind)
	db := openBenchWith(b, kind, dsn, gormcounter.Config{})
	// The same database through a plugin that never combines increments:
	// what the slots alone give.
	alone := openBenchWith(b, kind, dsn, gormcounter.Config{InFlight: -1})
	if err := db.AutoMigrate(&NaivePost{}, &Author{}, &Post{}, &WidePost{}, &SkipPost{}, &Story{}, &OneSlotPost{}); err != nil {
		b.Fatal(err)
	}
	naive, post, wide, skip, story, one := NaivePost{}, Post{Title: "viral"}, WidePost{}, SkipPost{}, Story{Title: "viral"}, OneSlotPost{}
	for _, v := range []any{&naive, &post, &wide, &skip, &story, &one} {
		if err := db.Create(v).Error; err != nil {
			b.Fatal(err)
		}
	}
	// The baseline as most code writes it (GORM's default transaction around
	// the UPDATE: the row lock is held across the COMMIT round trip) ...
	b.Run("naive-tx", func(b *testing.B) {
		writersLoop(b, func() error {
			return db.Model(&NaivePost{ID: naive.ID}).UpdateColumn("likes", gorm.Expr("likes + ?", 1)).Error
		})
	})
	// ... and at its best, one autocommit statement, as Increment runs.
	auto := db.Session(&gorm.Session{SkipDefaultTransaction: true})
	b.Run("naive", func(b *testing.B) {
		writersLoop(b, func() error {
			return auto.Model(&NaivePost{ID: naive.ID}).UpdateColumn("likes", gorm.Expr("likes + ?", 1)).Error
		})
	})
	b.Run("slots16", func(b *testing.B) {
		writersLoop(b, func() error { return gormcounter.Increment(db.Model(&Post{ID: post.ID}), "Likes", 1).Error })
	})
	b.Run("slots64", func(b *testing.B) {
		writersLoop(b, func() error { return gormcounter.Increment(db.Model(&WidePost{ID: wide.ID}), "Likes", 1).Error })
	})
	// Inside the caller's transaction, as naive-tx: the slot row stays locked
	// until the COMMIT, and no combining.
	b.Run("slots16-tx", func(b *testing.B) {
		writersLoop(b, func() error {
			return db.Transaction(func(tx *gorm.DB) error {
				return gormcounter.Increment(tx.Model(&Post{ID: post.ID}), "Likes", 1).Error
			})
		})
	})
	b.Run("slots16-alone", func(b *testing.B) {
		writersLoop(b, func() error { return gormcounter.Increment(alone.Model(&Post{ID: post.ID}), "Likes", 1).Error })
	})
	b.Run("slots64-alone", func(b *testing.B) {
		writersLoop(b, func() error { return gormcounter.Increment(alone.Model(&WidePost{ID: wide.ID}), "Likes", 1).Error })
	})
	// Combining alone: one slot row, so at most Config.InFlight statements
	// of this process, and they queue on its lock.
	b.Run("slots1", func(b *testing.B) {
		writersLoop(b, func() error { return gormcounter.Increment(db.Model(&OneSlotPost{ID: one.ID}), "Likes", 1).Error })
	})
	b.Run("skiplocked64", func(b *testing.B) {
		writersLoop(b, func() error { return gormcounter.Increment(db.Model(&SkipPost{ID: skip.ID}), "Likes", 1).Error })
	})
	// Append: one delta row per increment, no shared row at all.
	b.Run("append", func(b *testing.B) {
		writersLoop(b, func() error { return gormcounter.Increment(db.Model(&Story{ID: story.ID}), "Claps", 1).Error })
	})
	if kind == my {
		return // write-behind is not available on MySQL/MariaDB yet
	}
	// Write-behind: increments add up in memory; the timing includes the
	// final flush, so every increment counted here is in the database.
	b.Run("buffer", func(b *testing.B) {
		buf, err := gormcounter.NewBuffer(context.Background(), db, hotcounter.BufferConfig{Interval: time.Second})
		if err != nil {
			b.Fatal(err)
		}
		ctx := context.Background()
		writersLoop(b, func() error { return buf.Increment(ctx, &Post{ID: post.ID}, "Likes", 1) })
		if err := buf.Close(ctx); err != nil {
			b.Fatal(err)
		}
	})
	// Write-behind through Redis: an increment returns once Redis has it;
	// the timing includes the final flush.
	b.Run("redis", func(b *testing.B) {
		rdb, prefix := redisFor(b)
		buf, err := gormcounter.NewBuffer(context.Background(), db, hotcounter.BufferConfig{Interval: time.Second,
			Store: redisstore.New(rdb, redisstore.Options{Prefix: prefix})})
		if err != nil {
			b.Fatal(err)
		}
		ctx := context.Background()
		writersLoop(b, func() error { return buf.Increment(ctx, &Post{ID: post.ID}, "Likes", 1) })
		if err := buf.Close(ctx); err != nil {
			b.Fatal(err)
		}
	})
}

// BenchmarkIncrementOneRowFourProcesses: the 32 writers spread over four
// *gorm.DB (four pools, four plugins), as over four application servers.
// Increments combine within a process only, so four processes run up to
// 4 x Config.InFlight statements on the post at once: this is where the
// slots count again.
func BenchmarkIncrementOneRowFourProcesses(b *testing.B) {
	dsn := benchDSN(b, pg)
	var dbs []*gorm.DB
	for i := 0; i < 4; i++ {
		dbs = append(dbs, openBenchWith(b, pg, dsn, gormcounter.Config{}))
	}
	db := dbs[0]
	if err := db.AutoMigrate(&NaivePost{}, &Author{}, &Post{}, &OneSlotPost{}, &AutoPost{}); err != nil {
		b.Fatal(err)
	}
	naive, post, one, auto := NaivePost{}, Post{Title: "viral"}, OneSlotPost{}, AutoPost{}
	for _, v := range []any{&naive, &post, &one, &auto} {
		if err := db.Create(v).Error; err != nil {
			b.Fatal(err)
		}
	}
	var next atomic.Int64
	spread := func(op func(db *gorm.DB) error) func() error {
		return func() error { return op(dbs[next.Add(1)%4]) }
	}
	b.Run("naive", func(b *testing.B) {
		writersLoop(b, spread(func(db *gorm.DB) error {
			return db.Session(&gorm.Session{SkipDefaultTransaction: true}).Model(&NaivePost{ID: naive.ID}).
				UpdateColumn("likes", gorm.Expr("likes + ?", 1)).Error
		}))
	})
	b.Run("slots1", func(b *testing.B) {
		writersLoop(b, spread(func(db *gorm.DB) error {
			return gormcounter.Increment(db.Model(&OneSlotPost{ID: one.ID}), "Likes", 1).Error
		}))
	})
	b.Run("slots16", func(b *testing.B) {
		writersLoop(b, spread(func(db *gorm.DB) error {
			return gormcounter.Increment(db.Model(&Post{ID: post.ID}), "Likes", 1).Error
		}))
	})
	// slots=auto: each process widens from what its own statements meet.
	b.Run("auto", func(b *testing.B) {
		writersLoop(b, spread(func(db *gorm.DB) error {
			return gormcounter.Increment(db.Model(&AutoPost{ID: auto.ID}), "Likes", 1).Error
		}))
		b.ReportMetric(float64(rawInt(b, db, "SELECT COUNT(*) FROM auto_post_likes_slots WHERE auto_post_id = ?", auto.ID)), "rows")
	})
}

// BenchmarkLoad: one goroutine loads 1 or 100 posts, without counters
// (PlainPost on the same table) and with the sum counter filled. Two shapes
// of data: "typical" posts were liked 1 to 8 times (one slot row per like at
// most), "hot" posts have all 16 slot rows holding values (a viral post: the
// most rows a fill can meet; after about 50 increments, random slots leave
// any post there), and the hot posts again after a Compact pass.
func BenchmarkLoad(b *testing.B) {
	db := openBench(b)
	if err := db.AutoMigrate(&Author{}, &Post{}, &AutoPost{}); err != nil {
		b.Fatal(err)
	}
	posts := make([]Post, 200)
	for i := range posts {
		posts[i].Title = "post"
	}
	if err := db.Create(&posts).Error; err != nil {
		b.Fatal(err)
	}
	typical, hot := posts[:100], posts[100:]
	for i, p := range typical {
		for k := 0; k <= i%8; k++ {
			if err := gormcounter.Increment(db.Model(&Post{ID: p.ID}), "Likes", 1).Error; err != nil {
				b.Fatal(err)
			}
		}
	}
	for _, p := range hot {
		for rows := int64(0); rows < 16; {
			if err := gormcounter.Increment(db.Model(&Post{ID: p.ID}), "Likes", 1).Error; err != nil {
				b.Fatal(err)
			}
			if err := db.Raw("SELECT COUNT(*) FROM post_likes_slots WHERE post_id = ?", p.ID).Row().Scan(&rows); err != nil {
				b.Fatal(err)
			}
		}
	}
	// The typical posts again, under slots=auto: liked one at a time, each
	// keeps one slot row.
	autos := make([]AutoPost, 100)
	if err := db.Create(&autos).Error; err != nil {
		b.Fatal(err)
	}
	for i, p := range autos {
		for k := 0; k <= i%8; k++ {
			if err := gormcounter.Increment(db.Model(&AutoPost{ID: p.ID}), "Likes", 1).Error; err != nil {
				b.Fatal(err)
			}
		}
	}
	db.Exec("ANALYZE")
	load := func(name string, fn func() error) {
		b.Run(name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				if err := fn(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	within := func(ps []Post) (uint, uint) { return ps[0].ID, ps[len(ps)-1].ID }
	t1, t2 := within(typical)
	h1, h2 := within(hot)
	one := hot[50].ID
	// floor runs the statement GORM sends for build by hand, through
	// database/sql, reading every column as raw bytes: what the SQL
	// itself costs, without GORM's building and scanning.
	sqlDB, err := db.DB()
	if err != nil {
		b.Fatal(err)
	}
	drain := drainRows
	floor := func(name string, build func(tx *gorm.DB) *gorm.DB) {
		st := build(db.Session(&gorm.Session{DryRun: true})).Statement
		text, vars := st.SQL.String(), st.Vars
		b.Logf("%s: %s", name, text)
		load(name, func() error { return drain(sqlDB.Query(text, vars...)) })
	}
	load("plain-1", func() error { var p PlainPost; return db.First(&p, one).Error })
	load("filled-1", func() error { var p Post; return db.First(&p, one).Error })
	load("plain-100", func() error { var ps []PlainPost; return db.Where("id BETWEEN ? AND ?", t1, t2).Find(&ps).Error })
	load("filled-100", func() error { var ps []Post; return db.Where("id BETWEEN ? AND ?", t1, t2).Find(&ps).Error })
	load("filled-100-hot", func() error { var ps []Post; return db.Where("id BETWEEN ? AND ?", h1, h2).Find(&ps).Error })
	a1, a2 := autos[0].ID, autos[len(autos)-1].ID
	load("plain-100-auto", func() error { var ps []PlainAutoPost; return db.Where("id BETWEEN ? AND ?", a1, a2).Find(&ps).Error })
	load("filled-100-auto", func() error { var ps []AutoPost; return db.Where("id BETWEEN ? AND ?", a1, a2).Find(&ps).Error })
	// The other way to fill many rows, by hand: the plain select, then one
	// grouped SUM over the loaded keys (what the fill sends).
	grouped := func(name string, ps []Post) {
		ids, marks := make([]any, len(ps)), make([]string, len(ps))
		for i, p := range ps {
			ids[i], marks[i] = p.ID, fmt.Sprintf("$%d", i+1)
		}
		sum := "SELECT post_id, SUM(n) FROM post_likes_slots WHERE post_id IN (" + strings.Join(marks, ", ") + ") GROUP BY post_id"
		st := db.Session(&gorm.Session{DryRun: true}).Where("id BETWEEN ? AND ?", ps[0].ID, ps[len(ps)-1].ID).Find(&[]PlainPost{}).Statement
		text, vars := st.SQL.String(), st.Vars
		load(name, func() error {
			if err := drain(sqlDB.Query(text, vars...)); err != nil {
				return err
			}
			return drain(sqlDB.Query(sum, ids...))
		})
	}
	grouped("floor-grouped-100", typical)
	grouped("floor-grouped-100-hot", hot)
	floor("floor-plain-1", func(tx *gorm.DB) *gorm.DB { var p PlainPost; return tx.First(&p, one) })
	floor("floor-filled-1", func(tx *gorm.DB) *gorm.DB { var p Post; return tx.First(&p, one) })
	floor("floor-plain-100", func(tx *gorm.DB) *gorm.DB {
		var ps []PlainPost
		return tx.Where("id BETWEEN ? AND ?", t1, t2).Find(&ps)
	})
	floor("floor-filled-100", func(tx *gorm.DB) *gorm.DB { var ps []Post; return tx.Where("id BETWEEN ? AND ?", t1, t2).Find(&ps) })
	floor("floor-filled-100-hot", func(tx *gorm.DB) *gorm.DB { var ps []Post; return tx.Where("id BETWEEN ? AND ?", h1, h2).Find(&ps) })
	load("live-100-hot", func() error {
		var ps []Post
		return db.Clauses(gormcounter.Live).Where("id BETWEEN ? AND ?", h1, h2).Find(&ps).Error
	})
	// A Compact pass gathers each hot post's slots into one row. VACUUM then
	// does at once what autovacuum does soon after: clear the rows it deleted.
	if err := errOf(gormcounter.CompactPass(db, &Post{})); err != nil {
		b.Fatal(err)
	}
	db.Exec("VACUUM ANALYZE")
	load("filled-100-hot-compacted", func() error { var ps []Post; return db.Where("id BETWEEN ? AND ?", h1, h2).Find(&ps).Error })
}

// drainRows reads every row of a query as raw bytes: what a statement
// costs through database/sql, without an ORM's building and scanning.
func drainRows(rows *sql.Rows, err error) error {
	if err != nil {
		return err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return err
	}
	dest := make([]any, len(cols))
	for i := range dest {
		dest[i] = new(sql.RawBytes)
	}
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return err
		}
	}
	return rows.Err()
}
