package integration_test

import (
	"testing"

	"gorm.io/gorm"

	"github.com/hotcounter/hotcounter/gormcounter"
)

func TestSmoke(t *testing.T) {
	eachDB(t, func(t *testing.T, e *env) {
		db := e.db
		must(t, migrateAll(db))
		post := Post{Title: "hello"}
		must(t, db.Create(&post).Error)
		for i := 0; i < 10; i++ {
			must(t, gormcounter.Increment(db.Model(&post), "Likes", 1).Error)
			must(t, gormcounter.Increment(db.Model(&post), "views", 2).Error)
		}
		must(t, db.Model(&post).UpdateColumn("likes", gorm.Expr("likes + ?", 5)).Error)
		var got Post
		must(t, db.First(&got, post.ID).Error)
		t.Logf("likes=%d views=%d", got.Likes, got.Views)
		must(t, db.Clauses(gormcounter.Live).First(&got, post.ID).Error)
		t.Logf("live likes=%d views=%d", got.Likes, got.Views)
		must(t, gormcounter.Rollup(db, &Post{}))
		must(t, db.First(&got, post.ID).Error)
		t.Logf("after rollup likes=%d views=%d", got.Likes, got.Views)
		t.Log(joined(e.log.statements()))
	})
}
