package integration_test

import (
	"context"
	"fmt"
	"testing"

	entsql "entgo.io/ent/dialect/sql"
	"gorm.io/gorm"

	"github.com/hotcounter/hotcounter/integration_test/ent"
	"github.com/hotcounter/hotcounter/integration_test/ent/post"
)

// A page loaded with Limit and Offset sums the slot rows of the posts it
// returns, not of those it skips, and fills every counter right
// (PostgreSQL, GORM and ent): 2,000 posts with one like each, the page of
// 10 after the first 1,500, in a transaction whose own statistics
// (pg_stat_xact_user_tables) count the slot rows it read. Summed per row in
// the select list, the page read one slot row per skipped post.
func TestDeepPagesReadTheSlotsOfTheirRowsOnly(t *testing.T) {
	parallel(t)
	const posts, limit, offset = 2000, 10, 1500
	readSlots := `SELECT COALESCE(seq_tup_read, 0) + COALESCE(idx_tup_fetch, 0) FROM pg_stat_xact_user_tables
		WHERE relname = 'post_likes_slots' AND schemaname = current_schema()`
	seed := func(t *testing.T, db *gorm.DB) {
		must(t, db.Exec(fmt.Sprintf("INSERT INTO posts (title) SELECT 'p' FROM generate_series(1, %d)", posts)).Error)
		must(t, db.Exec("INSERT INTO post_likes_slots (post_id, slot, n) SELECT id, 0, 1 FROM posts").Error)
		must(t, db.Exec("ANALYZE posts").Error)
		must(t, db.Exec("ANALYZE post_likes_slots").Error)
	}
	check := func(t *testing.T, read int64, likes []int64) {
		t.Helper()
		if len(likes) != limit {
			t.Fatalf("%d posts on the page, want %d", len(likes), limit)
		}
		for i, l := range likes {
			if l != 1 {
				t.Fatalf("post %d of the page: likes=%d, want 1", i, l)
			}
		}
		if read > 4*limit {
			t.Fatalf("the page of %d read %d slot rows (it skipped %d posts); want no more than %d", limit, read, offset, 4*limit)
		}
	}
	t.Run("gorm", func(t *testing.T) {
		e := open(t, pg)
		must(t, e.db.AutoMigrate(&Author{}, &Post{}))
		seed(t, e.db)
		must(t, e.db.Transaction(func(tx *gorm.DB) error {
			var page []Post
			if err := tx.Order("id").Limit(limit).Offset(offset).Find(&page).Error; err != nil {
				return err
			}
			likes := make([]int64, len(page))
			for i, p := range page {
				likes[i] = p.Likes
			}
			check(t, rawInt(t, tx, readSlots), likes)
			return nil
		}))
	})
	t.Run("ent", func(t *testing.T) {
		e := openEnt(t, pg, true)
		seed(t, e.db)
		ctx := context.Background()
		must(t, inTxRollingBack(ctx, e.client, false, func(tx *ent.Tx) error {
			page, err := tx.Post.Query().Order(ent.Asc(post.FieldID)).Limit(limit).Offset(offset).All(ctx)
			if err != nil {
				return err
			}
			likes := make([]int64, len(page))
			for i, p := range page {
				likes[i] = p.Likes
			}
			var rows entsql.Rows
			if err := tx.HotCounter().Driver.Query(ctx, readSlots, []any{}, &rows); err != nil {
				return err
			}
			defer rows.Close()
			var read int64
			for rows.Next() {
				if err := rows.Scan(&read); err != nil {
					return err
				}
			}
			check(t, read, likes)
			return rows.Err()
		}))
	})
}
