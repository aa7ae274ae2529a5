package integration_test

import (
	"math/rand/v2"
	"testing"

	"github.com/hotcounter/hotcounter/gormcounter"
)

// BenchmarkCoveringSlotIndex weighs a covering index on a slot table,
// (post_id) INCLUDE (n), on PostgreSQL: it makes the load's per-row SUM an
// index-only scan, and it puts n in an index, so that no increment is a HOT
// update any more. Each case sets the index up or drops it before it runs
// (the writes then VACUUM ANALYZE), so that runs of the binary can
// alternate, each running one variant's cases in order:
//
//   - write-{plain,covering}: 32 writers increment one post (16 slots);
//   - spread-{plain,covering}: 32 writers increment random posts of 20,000;
//   - load-{plain,covering}: load 100 posts of 20,000 (1 to 8 slot rows
//     each) with their likes, after the writes, without a VACUUM between;
//     noload-*: the same rows without their likes.
func BenchmarkCoveringSlotIndex(b *testing.B) {
	db := openBench(b)
	if err := db.AutoMigrate(&Author{}, &Post{}); err != nil {
		b.Fatal(err)
	}
	const posts = 20000
	if err := db.Exec("INSERT INTO posts (title) SELECT 'post' FROM generate_series(1, ?)", posts).Error; err != nil {
		b.Fatal(err)
	}
	// 1 to 8 slot rows per post, as typical posts are liked a few times.
	if err := db.Exec(`INSERT INTO post_likes_slots (post_id, slot, n)
		SELECT p.id, s, 1 FROM posts p, generate_series(0, 7) s WHERE s <= p.id % 8`).Error; err != nil {
		b.Fatal(err)
	}
	var lo, hi uint
	if err := db.Raw("SELECT MIN(id), MAX(id) FROM posts").Row().Scan(&lo, &hi); err != nil {
		b.Fatal(err)
	}
	viral := lo
	index := func(b *testing.B, covering, vacuum bool) {
		ddl := "DROP INDEX IF EXISTS post_likes_slots_covering"
		if covering {
			ddl = "CREATE INDEX IF NOT EXISTS post_likes_slots_covering ON post_likes_slots (post_id) INCLUDE (n)"
		}
		qs := []string{ddl}
		if vacuum {
			qs = append(qs, "VACUUM ANALYZE post_likes_slots")
		}
		for _, q := range qs {
			if err := db.Exec(q).Error; err != nil {
				b.Fatal(err)
			}
		}
	}
	for _, c := range []struct {
		name     string
		covering bool
	}{{"plain", false}, {"covering", true}} {
		b.Run("write-"+c.name, func(b *testing.B) {
			index(b, c.covering, true)
			writersLoop(b, func() error { return gormcounter.Increment(db.Model(&Post{ID: viral}), "Likes", 1).Error })
		})
		b.Run("spread-"+c.name, func(b *testing.B) {
			index(b, c.covering, true)
			writersLoop(b, func() error {
				id := lo + uint(rand.IntN(int(hi-lo+1)))
				return gormcounter.Increment(db.Model(&Post{ID: id}), "Likes", 1).Error
			})
		})
		from := lo + posts/2
		b.Run("load-"+c.name, func(b *testing.B) {
			index(b, c.covering, false)
			for i := 0; i < b.N; i++ {
				var ps []Post
				if err := db.Where("id BETWEEN ? AND ?", from, from+99).Find(&ps).Error; err != nil {
					b.Fatal(err)
				}
				if len(ps) != 100 {
					b.Fatalf("loaded %d posts, want 100", len(ps))
				}
			}
		})
		// The same rows without their likes: what the ratio is taken against.
		b.Run("noload-"+c.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				var ps []PlainPost
				if err := db.Where("id BETWEEN ? AND ?", from, from+99).Find(&ps).Error; err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
