package integration_test

import (
	"context"
	"testing"
	"time"

	"github.com/hotcounter/hotcounter/gormcounter"
)

// GORM's MySQL fold: a caller's open transaction has incremented one post
// (holding that slot row). Rollup must skip the held row and not wait.
func TestMariaDBRollupSkipsAHeldSlot(t *testing.T) {
	e := open(t, my)
	db := e.db
	must(t, migrateAll(db))
	var ids []uint
	for i := 0; i < 3; i++ {
		p := newPost(t, db, "p")
		ids = append(ids, p.ID)
		for s := 0; s < 4; s++ {
			must(t, db.Exec("INSERT INTO post_views_slots (post_id, slot, n) VALUES (?, ?, 1)", p.ID, s).Error)
		}
	}
	holder := db.Begin()
	defer holder.Rollback()
	must(t, holder.Exec("UPDATE post_views_slots SET n = n + 1 WHERE post_id = ? AND slot = 3", ids[2]).Error)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	go func() {
		time.Sleep(500 * time.Millisecond)
		ictx, icancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer icancel()
		err := gormcounter.Increment(db.WithContext(ictx).Model(&Post{ID: ids[0]}), "Views", 1).Error
		t.Logf("autocommit increment of post %d (not held by anyone) during the fold: %v", ids[0], err)
	}()
	start := time.Now()
	err := gormcounter.Rollup(db.WithContext(ctx), &Post{})
	t.Logf("Rollup: %v after %v", err, time.Since(start))
	if err != nil {
		t.Fatalf("Rollup waited for a held slot row: %v", err)
	}
}
