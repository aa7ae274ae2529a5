package integration_test

import (
	"context"
	"testing"
	"time"

	"github.com/hotcounter/hotcounter/gormcounter"
	"gorm.io/gorm"
)

// Rollup and compaction passes never wait for slot rows that transactions
// hold: six transactions increment a post's likes (sum) and views (rollup)
// and stay open while the passes run, with a deadline far shorter than
// the transactions. The passes fold what no one holds, return, and the
// totals stay exact once the transactions commit. A second post that no
// transaction holds is folded whole. (Compaction refuses MariaDB: see
// Compact. There the open transactions' foreign key checks hold the post
// itself, so rollup passes over it until they end.)
func TestPassesNeverWaitForHeldSlotRows(t *testing.T) {
	eachDB(t, func(t *testing.T, e *env) {
		db := e.db
		must(t, migrateAll(db))
		post, other := newPost(t, db, "p"), newPost(t, db, "other")
		for range 50 {
			must(t, gormcounter.Increment(db.Model(&Post{ID: other.ID}), "Views", 1).Error)
		}
		for range 100 {
			must(t, gormcounter.Increment(db.Model(&Post{ID: post.ID}), "Likes", 1).Error)
			must(t, gormcounter.Increment(db.Model(&Post{ID: post.ID}), "Views", 1).Error)
		}
		const held = 6
		txs := make([]*gorm.DB, held)
		for i := range txs {
			txs[i] = db.Session(&gorm.Session{NewDB: true}).Begin()
			must(t, txs[i].Error)
			defer txs[i].Rollback()
			must(t, gormcounter.Increment(txs[i].Model(&Post{ID: post.ID}), "Likes", 1).Error)
			must(t, gormcounter.Increment(txs[i].Model(&Post{ID: post.ID}), "Views", 1).Error)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		start := time.Now()
		must(t, gormcounter.RollupPass(db.WithContext(ctx), &Post{}))
		if e.kind != my {
			must(t, errOf(gormcounter.CompactPass(db.WithContext(ctx), &Post{})))
		}
		took := time.Since(start)
		if v := rawInt(t, db, "SELECT views FROM posts WHERE id = ?", other.ID); v != 50 {
			t.Fatalf("the other post's views column = %d after a rollup pass; want its 50 folded", v)
		}
		folded := rawInt(t, db, "SELECT views FROM posts WHERE id = ?", post.ID)
		if e.kind == pg && folded == 0 {
			t.Fatalf("posts.views = 0 after a rollup pass beside %d open transactions; want the rows no one holds folded", held)
		}
		for _, tx := range txs {
			must(t, tx.Commit().Error)
		}
		if got := exact(t, db, post.ID); got.Likes != 100+held || got.Views != 100+held {
			t.Fatalf("likes=%d views=%d, want %d each", got.Likes, got.Views, 100+held)
		}
		t.Logf("%s: passes beside %d open transactions returned in %v, folding %d of the held post's 106 views", e.kind, held, took.Round(time.Millisecond), folded)
	}, on(pg, my))
}
