package integration_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"gorm.io/gorm"

	"github.com/hotcounter/hotcounter"
	"github.com/hotcounter/hotcounter/entcounter"
	"github.com/hotcounter/hotcounter/gormcounter"
)

// UnmigratedPost is a model whose counter's slot table no migration made.
type UnmigratedPost struct {
	ID    uint
	Title string
	Likes int64 `gorm:"counter"`
}

// TestACounterWithoutItsSlotTableSaysToMigrate: on a database whose
// migration left out the library's part (files without SchemaSQL's
// statements), the first increment and the first load of a counter fail
// with ErrNotMigrated naming the counter, the missing table and what makes
// it, not with the database's own "no such table"; once the table is
// there, the same process counts.
func TestACounterWithoutItsSlotTableSaysToMigrate(t *testing.T) {
	check := func(t *testing.T, what string, err error, counter, table string) {
		t.Helper()
		if !errors.Is(err, hotcounter.ErrNotMigrated) || !strings.Contains(err.Error(), counter) || !strings.Contains(err.Error(), table) ||
			!strings.Contains(err.Error(), "SchemaSQL") {
			t.Errorf("%s: got %v; want ErrNotMigrated naming %s, %s and SchemaSQL", what, err, counter, table)
		}
	}
	t.Run("gorm", func(t *testing.T) {
		eachDB(t, func(t *testing.T, e *env) {
			plain, err := gorm.Open(dialectorFor(e.kind, e.dsn), &gorm.Config{Logger: e.log})
			must(t, err)
			e.limit(t, plain)
			must(t, plain.AutoMigrate(&UnmigratedPost{})) // the team's own DDL: the table, no slot table
			p := UnmigratedPost{Title: "a"}
			if e.kind == my {
				// Slot rows are created with the row on MySQL/MariaDB: the
				// create says so itself.
				check(t, "Create", e.db.Create(&UnmigratedPost{}).Error, "UnmigratedPost.Likes", "unmigrated_post_likes_slots")
			}
			must(t, plain.Create(&p).Error)
			check(t, "Increment", gormcounter.Increment(e.db.Model(&p), "Likes", 1).Error, "UnmigratedPost.Likes", "unmigrated_post_likes_slots")
			var got UnmigratedPost
			check(t, "First", e.db.First(&got, p.ID).Error, "UnmigratedPost.Likes", "unmigrated_post_likes_slots")

			script, err := gormcounter.SchemaSQL(e.db, &UnmigratedPost{})
			must(t, err)
			for _, st := range script.Up {
				must(t, plain.Exec(st).Error)
			}
			// The absence is trusted for a while (engine.AbsentRecheck); a
			// process that did not see it starts counting at once.
			fresh := withPlugin(t, e, gormcounter.Config{})
			must(t, gormcounter.Increment(fresh.Model(&p), "Likes", 2).Error)
			must(t, fresh.First(&got, p.ID).Error)
			if got.Likes != 2 {
				t.Errorf("after applying SchemaSQL: likes %d; want 2", got.Likes)
			}
		})
	})
	t.Run("ent", func(t *testing.T) {
		eachDB(t, func(t *testing.T, e *env) {
			ctx := context.Background()
			ee := withEnt(t, e, false)
			must(t, entMigrate(ctx, ee.client, entcounter.WithCounters(ee.client)))
			post := ee.client.Post.Create().SaveX(ctx)
			_, err := ee.sqlDB.ExecContext(ctx, "DROP TABLE post_likes_slots")
			must(t, err)
			c := reopenEnt(t, ee)
			check(t, "AddLikes", c.Post.UpdateOneID(post.ID).AddLikes(1).Exec(ctx), "Post.likes", "post_likes_slots")
			_, err = c.Post.Get(ctx, post.ID)
			check(t, "Get", err, "Post.likes", "post_likes_slots")
		})
	})
}

// TestAChildWriteWhoseCountHasNoTriggersIsRefused: on a database whose
// migration left out a count's triggers, a write of the counted rows
// through the ORM fails with ErrNotMigrated naming the count and what
// makes its triggers, instead of succeeding uncounted; once they are
// installed, the same process writes and counts.
func TestAChildWriteWhoseCountHasNoTriggersIsRefused(t *testing.T) {
	check := func(t *testing.T, what string, err error, counter string) {
		t.Helper()
		if !errors.Is(err, hotcounter.ErrNotMigrated) || !strings.Contains(err.Error(), counter) || !strings.Contains(err.Error(), "SchemaSQL") {
			t.Errorf("%s: got %v; want ErrNotMigrated naming %s and SchemaSQL", what, err, counter)
		}
	}
	t.Run("gorm", func(t *testing.T) {
		eachDB(t, func(t *testing.T, e *env) {
			plain, err := gorm.Open(dialectorFor(e.kind, e.dsn), &gorm.Config{Logger: e.log})
			must(t, err)
			e.limit(t, plain)
			must(t, plain.AutoMigrate(&FilePost{}, &FileComment{})) // no plugin: tables only
			post := FilePost{Title: "a"}
			must(t, plain.Create(&post).Error)
			db := withPlugin(t, e, gormcounter.Config{Models: []any{&FilePost{}}})
			check(t, "Create", db.Create(&FileComment{FilePostID: post.ID}).Error, "FilePost.CommentCount")

			script, err := gormcounter.SchemaSQL(db, &FilePost{})
			must(t, err)
			for _, st := range script.Up {
				must(t, plain.Exec(st).Error)
			}
			must(t, db.Create(&FileComment{FilePostID: post.ID}).Error)
			var got FilePost
			must(t, db.First(&got, post.ID).Error)
			if got.CommentCount != 1 {
				t.Errorf("after applying SchemaSQL: comment_count %d; want 1", got.CommentCount)
			}
		})
	})
	t.Run("ent", func(t *testing.T) {
		eachDB(t, func(t *testing.T, e *env) {
			ctx := context.Background()
			ee := withEnt(t, e, false)
			must(t, entMigrate(ctx, ee.client)) // without WithCounters: no triggers
			folder := ee.client.Folder.Create().SaveX(ctx)
			err := ee.client.File.Create().SetSize(3).SetFolderID(folder.ID).Exec(ctx)
			check(t, "File.Create", err, "Folder.bytes")

			script, err := entcounter.SchemaSQL(ctx, ee.client)
			must(t, err)
			for _, st := range script.Up {
				_, err := ee.sqlDB.ExecContext(ctx, st)
				must(t, err)
			}
			ee.client.File.Create().SetSize(3).SetFolderID(folder.ID).ExecX(ctx)
			if got := ee.client.Folder.GetX(ctx, folder.ID).Bytes; got != 3 {
				t.Errorf("after applying SchemaSQL: bytes %d; want 3", got)
			}
		})
	})
}
