package gormcounter_test

import (
	"testing"

	"github.com/hotcounter/hotcounter/gormcounter"
)

// The old names keep working for a release: they run what the new ones do.
func TestDeprecatedNamesStillWork(t *testing.T) {
	db, done := openExample()
	defer done()
	post := Post{Title: "old names"}
	db.Create(&post)
	gormcounter.Increment(db.Model(&post), "Views", 2)
	if err := gormcounter.Rollup(db, &Post{}); err != nil {
		t.Fatal(err)
	}
	var loaded Post
	db.First(&loaded, post.ID)
	if loaded.Views != 2 {
		t.Fatalf("after Rollup: views %d, want 2", loaded.Views)
	}
}
