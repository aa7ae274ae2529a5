package integration_test

import (
	"context"
	"testing"

	"gorm.io/gorm"

	"github.com/hotcounter/hotcounter"
	"github.com/hotcounter/hotcounter/entcounter"
	"github.com/hotcounter/hotcounter/gormcounter"
	"github.com/hotcounter/hotcounter/integration_test/ent"
	"github.com/hotcounter/hotcounter/integration_test/ent/naivepost"
	"github.com/hotcounter/hotcounter/integration_test/ent/post"
	"github.com/hotcounter/hotcounter/integration_test/ent/product"
	"github.com/hotcounter/hotcounter/internal/testdb"
)

// openEntBench opens ent on a fresh database of the given kind for a
// benchmark.
func openEntBench(b *testing.B, kind dbKind) *entEnv {
	b.Helper()
	e := open(b, kind, pool(benchWriters+8))
	if kind == pg {
		e.dsn = testdb.Durable(e.dsn) // every commit flushed, as GORM's benchmarks and production run
	}
	return withEnt(b, e, true)
}

// BenchmarkEntIncrementOneRow: 32 writers on one row, as ent users write it:
// the naive AddLikes of a plain column (UpdateOne: the UPDATE and its
// re-read in one transaction) against entcounter's AddLikes (16 slots, sum)
// and AddViews (64 slots, rollup).
func BenchmarkEntIncrementOneRow(b *testing.B) { benchEntIncrementOneRow(b, pg) }

// BenchmarkEntIncrementOneRowMariaDB: the same on MariaDB.
func BenchmarkEntIncrementOneRowMariaDB(b *testing.B) { benchEntIncrementOneRow(b, my) }

func benchEntIncrementOneRow(b *testing.B, kind dbKind) {
	e := openEntBench(b, kind)
	ctx := context.Background()
	c := e.client
	naive := c.NaivePost.Create().SaveX(ctx)
	p := c.Post.Create().SetTitle("viral").SaveX(ctx)
	b.Run("naive", func(b *testing.B) {
		writersLoop(b, func() error { return c.NaivePost.UpdateOneID(naive.ID).AddLikes(1).Exec(ctx) })
	})
	b.Run("slots16", func(b *testing.B) {
		writersLoop(b, func() error { return c.Post.UpdateOneID(p.ID).AddLikes(1).Exec(ctx) })
	})
	b.Run("slots64", func(b *testing.B) {
		writersLoop(b, func() error { return c.Post.UpdateOneID(p.ID).AddViews(1).Exec(ctx) })
	})
	// Write-behind in memory, through the client's hooks (the privacy
	// policy and interceptors a schema may have): the timing includes the
	// final flush.
	b.Run("buffered", func(b *testing.B) {
		buf, err := entcounter.NewBuffer(ctx, c, hotcounter.BufferConfig{})
		if err != nil {
			b.Fatal(err)
		}
		writersLoop(b, func() error { return c.Post.Buffered(buf).AddLikes(ctx, p.ID, 1) })
		if err := buf.Close(ctx); err != nil {
			b.Fatal(err)
		}
	})
	// SkipPost.likes: 64 skip-locked slots (pre-created on MariaDB).
	sp := c.SkipPost.Create().SaveX(ctx)
	b.Run("skiplocked64", func(b *testing.B) {
		writersLoop(b, func() error { return c.SkipPost.UpdateOneID(sp.ID).AddLikes(1).Exec(ctx) })
	})
	// The bulk form skips the re-read: one id query and one upsert.
	b.Run("naive-bulk", func(b *testing.B) {
		writersLoop(b, func() error {
			_, err := c.NaivePost.Update().Where(naivepost.ID(naive.ID)).AddLikes(1).Save(ctx)
			return err
		})
	})
	b.Run("slots16-bulk", func(b *testing.B) {
		writersLoop(b, func() error { _, err := c.Post.Update().Where(post.ID(p.ID)).AddLikes(1).Save(ctx); return err })
	})
	// GORM on the same database and rows, for its ratio in the same run:
	// its naive row in GORM's default transaction, and Increment.
	db := openBenchWith(b, kind, e.dsn, gormcounter.Config{})
	b.Run("gorm-naive-tx", func(b *testing.B) {
		writersLoop(b, func() error {
			return db.Model(&NaivePost{ID: uint(naive.ID)}).UpdateColumn("likes", gorm.Expr("likes + ?", 1)).Error
		})
	})
	b.Run("gorm-slots16", func(b *testing.B) {
		writersLoop(b, func() error { return gormcounter.Increment(db.Model(&Post{ID: uint(p.ID)}), "Likes", 1).Error })
	})
}

// BenchmarkEntLoad: loads of 1 and 100 posts, plain (the same table, the
// counters not selected) and with likes filled; "hot" posts have all 16
// slot rows in use.
func BenchmarkEntLoad(b *testing.B) {
	e := openEntBench(b, pg)
	ctx := context.Background()
	c := e.client
	builders := make([]*ent.PostCreate, 200)
	for i := range builders {
		builders[i] = c.Post.Create().SetTitle("post")
	}
	posts := c.Post.CreateBulk(builders...).SaveX(ctx)
	typical, hot := posts[:100], posts[100:]
	for i, p := range typical {
		for k := 0; k <= i%8; k++ {
			c.Post.UpdateOneID(p.ID).AddLikes(1).ExecX(ctx)
		}
	}
	for _, p := range hot {
		for rawInt(b, e.db, "SELECT COUNT(*) FROM post_likes_slots WHERE post_id = ?", p.ID) < 16 {
			c.Post.UpdateOneID(p.ID).AddLikes(1).ExecX(ctx)
		}
	}
	e.db.Exec("ANALYZE")
	load := func(name string, fn func() error) {
		b.Run(name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				if err := fn(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	plain := []string{post.FieldTitle, post.FieldViews, post.FieldAuthorID}
	between := func(ps []*ent.Post) *ent.PostQuery {
		return c.Post.Query().Where(post.IDGTE(ps[0].ID), post.IDLTE(ps[len(ps)-1].ID))
	}
	one := hot[50].ID
	load("plain-1", func() error { _, err := c.Post.Query().Where(post.ID(one)).Select(plain...).Only(ctx); return err })
	load("filled-1", func() error { _, err := c.Post.Get(ctx, one); return err })
	load("plain-100", func() error { _, err := between(typical).Select(plain...).All(ctx); return err })
	load("filled-100", func() error { _, err := between(typical).All(ctx); return err })
	load("filled-100-hot", func() error { _, err := between(hot).All(ctx); return err })
	load("live-100-hot", func() error { _, err := between(hot).All(entcounter.WithLive(ctx)); return err })
}

// BenchmarkEntGuardedTake: BenchmarkGuardedTake through ent: 32 buyers take
// 1 each with entcounter.Take from a guarded counter of 16 slots, against
// the naive guarded row in the same run.
func BenchmarkEntGuardedTake(b *testing.B) { benchEntGuardedTake(b, pg) }

// BenchmarkEntGuardedTakeMariaDB is BenchmarkEntGuardedTake on MariaDB.
func BenchmarkEntGuardedTakeMariaDB(b *testing.B) { benchEntGuardedTake(b, my) }

func benchEntGuardedTake(b *testing.B, kind dbKind) {
	e := openEntBench(b, kind)
	ctx := context.Background()
	db := openBenchWith(b, kind, e.dsn, gormcounter.Config{})
	if err := db.AutoMigrate(&NaiveProduct{}); err != nil {
		b.Fatal(err)
	}
	const plenty = 1 << 40
	naive := NaiveProduct{Stock: plenty}
	if err := db.Create(&naive).Error; err != nil {
		b.Fatal(err)
	}
	p := e.client.Product.Create().SetName("flash sale").SetStock(plenty).SaveX(ctx)
	auto := db.Session(&gorm.Session{SkipDefaultTransaction: true})
	b.Run("naive", func(b *testing.B) {
		writersLoop(b, func() error {
			return auto.Exec("UPDATE naive_products SET stock = stock - 1 WHERE id = ? AND stock >= 1", naive.ID).Error
		})
	})
	b.Run("take16", func(b *testing.B) {
		writersLoop(b, func() error { return entcounter.Take(ctx, e.client, product.Table, product.FieldStock, p.ID, 1) })
	})
}
