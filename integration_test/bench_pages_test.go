package integration_test

import (
	"context"
	"database/sql"
	"fmt"
	"testing"

	"entgo.io/ent/dialect"
	entsql "entgo.io/ent/dialect/sql"

	"github.com/hotcounter/hotcounter/integration_test/ent"
	"github.com/hotcounter/hotcounter/integration_test/ent/post"
)

// BenchmarkDeepPage: one page of 100 posts from the middle of the table,
// ordered by id (Order("id").Limit(100).Offset(n/2) in GORM, ent's
// Order/Limit/Offset), at 10,000 and at 1,000,000 posts (PostgreSQL; each
// post has one slot row of likes, every 1,000th sixteen). plain is the same
// page of the posts' columns through database/sql, no counter; gorm and ent
// load Post with its counters. A load should cost the page, not the rows it
// skips: the ratio to plain the same at both sizes.
func BenchmarkDeepPage(b *testing.B) {
	for _, n := range []int{10_000, 1_000_000} {
		b.Run(fmt.Sprintf("posts=%d", n), func(b *testing.B) {
			// seed fills posts and post_likes_slots of db's schema.
			seed := func(db *sql.DB, title string) {
				for _, q := range []string{
					fmt.Sprintf("INSERT INTO posts (%s) SELECT 'p' FROM generate_series(1, %d)", title, n),
					"INSERT INTO post_likes_slots (post_id, slot, n) SELECT id, 0, 1 FROM posts",
					"INSERT INTO post_likes_slots (post_id, slot, n) SELECT id, g, 1 FROM posts CROSS JOIN generate_series(1, 15) g WHERE id % 1000 = 0",
					"VACUUM ANALYZE posts", "VACUUM ANALYZE post_likes_slots",
				} {
					if _, err := db.Exec(q); err != nil {
						b.Fatal(err)
					}
				}
			}
			run := func(name string, fn func() (int, error)) {
				b.Run(name, func(b *testing.B) {
					for range b.N {
						got, err := fn()
						if err != nil {
							b.Fatal(err)
						}
						if got != 100 {
							b.Fatalf("%d posts on the page, want 100", got)
						}
					}
				})
			}
			plain := func(db *sql.DB, cols string) func() (int, error) {
				return func() (int, error) {
					rows, err := db.Query(fmt.Sprintf("SELECT %s FROM posts ORDER BY id LIMIT 100 OFFSET %d", cols, n/2))
					if err != nil {
						return 0, err
					}
					defer rows.Close()
					got := 0
					for rows.Next() {
						got++
					}
					return got, rows.Err()
				}
			}

			db := openBench(b)
			if err := db.AutoMigrate(&Author{}, &Post{}); err != nil {
				b.Fatal(err)
			}
			sqlDB, err := db.DB()
			if err != nil {
				b.Fatal(err)
			}
			seed(sqlDB, "title")
			run("plain", plain(sqlDB, "id, title, author_id, views"))
			run("gorm", func() (int, error) {
				var page []Post
				err := db.Order("id").Limit(100).Offset(n / 2).Find(&page).Error
				return len(page), err
			})

			e := openEntBench(b, pg)
			entDB, err := sql.Open("pgx", e.dsn)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { entDB.Close() })
			seed(entDB, "title")
			c := ent.NewClient(ent.Driver(entsql.OpenDB(dialect.Postgres, entDB)))
			ctx := context.Background()
			run("ent-plain", plain(entDB, "id, views, title, author_id"))
			run("ent", func() (int, error) {
				page, err := c.Post.Query().Order(ent.Asc(post.FieldID)).Limit(100).Offset(n / 2).All(ctx)
				return len(page), err
			})
		})
	}
}
