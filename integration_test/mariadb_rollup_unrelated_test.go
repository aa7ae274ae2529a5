package integration_test

import (
	"context"
	"testing"
	"time"

	"github.com/hotcounter/hotcounter/gormcounter"
)

// GORM's MySQL fold: a caller holds a post that has nothing pending and is
// far from the posts the pass folds. Rollup must not wait for it.
func TestMariaDBRollupDoesNotWaitForAnUnrelatedPost(t *testing.T) {
	e := open(t, my)
	db := e.db
	must(t, migrateAll(db))
	var ids []uint
	for i := 0; i < 200; i++ {
		p := newPost(t, db, "p")
		ids = append(ids, p.ID)
		if i < 50 {
			must(t, gormcounter.Increment(db.Model(&p), "Views", 1).Error)
		}
	}
	release := locked(t, db, &Post{}, ids[150], "UPDATE") // no pending views
	defer release()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	start := time.Now()
	err := gormcounter.Rollup(db.WithContext(ctx), &Post{})
	t.Logf("Rollup: %v after %v", err, time.Since(start))
	if err != nil {
		t.Fatalf("Rollup waited for a post it does not fold: %v", err)
	}
}
