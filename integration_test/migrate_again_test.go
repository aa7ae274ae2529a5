package integration_test

import (
	"context"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/hotcounter/hotcounter/entcounter"
	"github.com/hotcounter/hotcounter/gormcounter"
	"github.com/hotcounter/hotcounter/integration_test/ent"
	"github.com/hotcounter/hotcounter/integration_test/ent/file"
)

// ddl matches a statement that changes the schema.
var ddl = regexp.MustCompile(`(?i)^\s*(CREATE|DROP|ALTER|RENAME|COMMENT)\b`)

// ddlOf returns the statements among stmts that change the schema.
func ddlOf(stmts []string) []string {
	var out []string
	for _, s := range stmts {
		if ddl.MatchString(s) {
			out = append(out, s)
		}
	}
	return out
}

// TestMigratingAgainWithNothingChangedSendsNoDDL: a deploy runs the
// migration of a schema it already has; with nothing changed, neither
// AutoMigrate nor Schema.Create with WithCounters sends any statement
// that changes the schema (each would lock the table it names, and on
// MySQL/MariaDB commit on its own).
func TestMigratingAgainWithNothingChangedSendsNoDDL(t *testing.T) {
	t.Run("gorm", func(t *testing.T) {
		eachDB(t, func(t *testing.T, e *env) {
			models := []any{&FilePost{}, &FileComment{}, &FileTag{}}
			must(t, e.db.AutoMigrate(models...))
			rec := &recordingLogger{Interface: logger.Discard}
			must(t, e.db.Session(&gorm.Session{Logger: rec}).AutoMigrate(models...))
			if sent := ddlOf(rec.stmts); len(sent) > 0 {
				t.Errorf("the second AutoMigrate sent %d statements that change the schema:\n%s", len(sent), strings.Join(sent, "\n"))
			}
		})
	})
	t.Run("ent", func(t *testing.T) {
		eachDB(t, func(t *testing.T, e *env) {
			ctx := context.Background()
			ee := withEnt(t, e, false)
			must(t, entMigrate(ctx, ee.client, entcounter.WithCounters(ee.client)))
			var mu sync.Mutex
			var stmts []string
			again := ent.NewClient(ent.Driver(entDriverSending(e.kind, ee.sqlDB, func(s string) {
				mu.Lock()
				defer mu.Unlock()
				stmts = append(stmts, strings.TrimPrefix(s[strings.Index(s, "query=")+len("query="):], ""))
			})))
			must(t, entMigrate(ctx, again, entcounter.WithCounters(again)))
			if sent := ddlOf(stmts); len(sent) > 0 {
				t.Errorf("the second Schema.Create sent %d statements that change the schema:\n%s", len(sent), strings.Join(sent, "\n"))
			}
		})
	})
}

// FilePostWider is FilePost as a release that widens its count declares
// it: the same tables, the count of comments on 32 slots, so its triggers
// differ from FilePost's.
type FilePostWider struct {
	ID           uint
	Title        string
	Likes        int64         `gorm:"counter"`
	Views        int64         `gorm:"counter:rollup"`
	Claps        int64         `gorm:"counter:append"`
	CommentCount int64         `gorm:"counter:counts=FileComments,slots=32"`
	FileComments []FileComment `gorm:"foreignKey:FilePostID"`
}

func (FilePostWider) TableName() string { return "file_posts" }

// TestMigrationsBesideLiveWritersLoseNoCount: a deploy migrates while the
// running version writes: 8 goroutines insert, move and delete comments of
// two posts while AutoMigrate runs five times with nothing changed and
// once with the count's triggers changed (ent: files of two folders, and
// Schema.Create with WithCounters twice, nothing changed). No write fails and every count
// equals the rows the ORM reads: on PostgreSQL and SQLite the triggers are
// replaced in one transaction, on MariaDB each in place (CREATE OR REPLACE
// TRIGGER), and a migration with nothing changed sends no DDL at all.
func TestMigrationsBesideLiveWritersLoseNoCount(t *testing.T) {
	t.Run("gorm", func(t *testing.T) { eachDB(t, gormMigratesBesideWriters) })
	t.Run("ent", func(t *testing.T) { eachDB(t, entMigratesBesideWriters) })
}

// entMigratesBesideWriters: ent's half of
// TestMigrationsBesideLiveWritersLoseNoCount, two migrations of the
// schema as it is while 8 goroutines add, move and delete files.
func entMigratesBesideWriters(t *testing.T, e *env) {
	ctx := context.Background()
	ee := withEnt(t, e, false)
	c := ee.client
	must(t, entMigrate(ctx, c, entcounter.WithCounters(c)))
	folders := []int{c.Folder.Create().SaveX(ctx).ID, c.Folder.Create().SaveX(ctx).ID}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				f, err := c.File.Create().SetSize(int64(i%7 + 1)).SetFolderID(folders[(w+i)%2]).Save(ctx)
				if err == nil && i%3 == 1 {
					err = c.File.UpdateOneID(f.ID).SetFolderID(folders[(w+i+1)%2]).Exec(ctx)
				}
				if err == nil && i%3 == 2 {
					err = c.File.DeleteOneID(f.ID).Exec(ctx)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for range 2 { // ent's 52 tables take a while to diff
		deploy := reopenEnt(t, ee) // the new version's process
		must(t, entMigrate(ctx, deploy, entcounter.WithCounters(deploy)))
	}
	time.Sleep(100 * time.Millisecond)
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("a write beside the migrations failed: %v", err)
	}
	for _, id := range folders {
		var sum []struct{ Sum int64 }
		c.File.Query().Where(file.FolderID(id)).Aggregate(ent.Sum(file.FieldSize)).ScanX(ctx, &sum)
		if got := c.Folder.GetX(ctx, id).Bytes; got != sum[0].Sum || got == 0 {
			t.Errorf("folder %d: bytes %d, its files' sizes add up to %d", id, got, sum[0].Sum)
		}
	}
}

// gormMigratesBesideWriters: GORM's half of
// TestMigrationsBesideLiveWritersLoseNoCount.
func gormMigratesBesideWriters(t *testing.T, e *env) {
	must(t, e.db.AutoMigrate(&FilePost{}, &FileComment{}, &FileTag{}))
	posts := []FilePost{{Title: "a"}, {Title: "b"}}
	must(t, e.db.Create(&posts).Error)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				c := FileComment{FilePostID: posts[(w+i)%2].ID}
				err := e.db.Create(&c).Error
				if err == nil && i%3 == 1 {
					err = e.db.Model(&c).Update("file_post_id", posts[(w+i+1)%2].ID).Error
				}
				if err == nil && i%3 == 2 {
					err = e.db.Delete(&c).Error
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	deploy := withPlugin(t, e, gormcounter.Config{}) // the new version's process
	for range 5 {
		must(t, deploy.AutoMigrate(&FilePost{}, &FileComment{}, &FileTag{}))
	}
	wider := withPlugin(t, e, gormcounter.Config{})
	must(t, wider.AutoMigrate(&FilePostWider{}, &FileComment{}))
	time.Sleep(100 * time.Millisecond) // writes under the new triggers too
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("a write beside the migrations failed: %v", err)
	}
	for _, p := range posts {
		got, comments := filePostCounts(t, e.db, p.ID)
		if got.CommentCount != comments || comments == 0 {
			t.Errorf("post %d: comment_count %d, its comments %d", p.ID, got.CommentCount, comments)
		}
	}
}
