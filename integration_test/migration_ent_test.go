package integration_test

import (
	"context"
	"testing"

	"entgo.io/ent/dialect/sql/schema"
	"github.com/hotcounter/hotcounter/entcounter"
	"github.com/hotcounter/hotcounter/integration_test/ent/migrate"
	_ "github.com/hotcounter/hotcounter/integration_test/ent/runtime"
	"github.com/hotcounter/hotcounter/integration_test/ent/shelf"
	_ "github.com/jackc/pgx/v5/stdlib"
)

// Parents that existed before a pre-creating counter get their slot rows
// from PrecreateExisting; rows already there are kept.
func TestEntPrecreateExisting(t *testing.T) {
	parallel(t)
	eachEnt(t, func(t *testing.T, e *entEnv) {
		ctx := context.Background()
		c := e.client
		// Rows written past ent's hooks, as an import would.
		must(t, e.db.Exec("INSERT INTO skip_posts (id) VALUES (1001), (1002)").Error)
		kept := c.SkipPost.Create().SaveX(ctx)
		c.SkipPost.UpdateOneID(kept.ID).AddLikes(5).ExecX(ctx)
		must(t, entcounter.PrecreateExisting(ctx, c))
		must(t, entcounter.PrecreateExisting(ctx, c)) // idempotent
		for _, id := range []int{1001, 1002, kept.ID} {
			if n := rawInt(t, e.db, "SELECT COUNT(*) FROM skip_post_likes_slots WHERE skip_post_id = ?", id); n != 64 {
				t.Fatalf("post %d has %d slot rows, want 64", id, n)
			}
		}
		if got := c.SkipPost.GetX(ctx, kept.ID); got.Likes != 5 {
			t.Fatalf("likes=%d after PrecreateExisting, want 5", got.Likes)
		}
		if e.kind == my { // Post.likes pre-creates by default on MariaDB
			must(t, e.db.Exec("INSERT INTO posts (title, views) VALUES ('imported', 0)").Error)
			must(t, entcounter.PrecreateExisting(ctx, c))
			if n := rawInt(t, e.db, "SELECT COUNT(*) FROM post_likes_slots WHERE post_id = (SELECT MAX(id) FROM posts)"); n != 16 {
				t.Fatalf("the imported post has %d likes slot rows, want 16", n)
			}
		}
	}, everyEntTable())
}

// The slot tables are ordinary ent tables: the generated migrate.Tables,
// which Schema.Create, migrate.NamedDiff and Atlas's ent:// all start from,
// hold them with their unique index and cascading foreign key.
func TestEntSlotTablesInMigrateTables(t *testing.T) {
	parallel(t)
	entSchemaMu.Lock()
	defer entSchemaMu.Unlock()
	var found bool
	for _, tbl := range migrate.Tables {
		if tbl.Name != "post_likes_slots" {
			continue
		}
		found = true
		var unique, cascade bool
		for _, idx := range tbl.Indexes {
			if idx.Unique && len(idx.Columns) == 2 && idx.Columns[0].Name == "post_id" && idx.Columns[1].Name == "slot" {
				unique = true
			}
		}
		for _, fk := range tbl.ForeignKeys {
			if fk.RefTable != nil && fk.RefTable.Name == "posts" && fk.OnDelete == schema.Cascade {
				cascade = true
			}
		}
		if !unique || !cascade {
			t.Fatalf("post_likes_slots: unique (post_id, slot) %v, ON DELETE CASCADE to posts %v", unique, cascade)
		}
	}
	if !found {
		t.Fatal("migrate.Tables has no post_likes_slots")
	}
	for _, tbl := range migrate.Tables {
		if tbl.Name == "posts" {
			for _, c := range tbl.Columns {
				if c.Name == "likes" {
					t.Fatal("migrate.Tables gives posts a likes column (a sum counter has none)")
				}
			}
		}
	}
}

func TestEntMigrationCreatesSlotTables(t *testing.T) {
	parallel(t)
	eachEnt(t, func(t *testing.T, e *entEnv) {
		ctx := context.Background()
		mig := e.db.Migrator()
		for _, table := range []string{"post_likes_slots", "post_views_slots", "author_followers_slots", "comment_upvote_slots"} {
			if !mig.HasTable(table) {
				t.Fatalf("Schema.Create made no %s", table)
			}
		}
		if mig.HasColumn("posts", "likes") {
			t.Fatal("a sum counter got a column on posts")
		}
		if !mig.HasColumn("posts", "views") {
			t.Fatal("a rollup counter has no column on posts")
		}
		// Cascade: deleting a post removes its slot rows.
		p := e.client.Post.Create().SetTitle("doomed").SaveX(ctx)
		e.client.Post.UpdateOneID(p.ID).AddLikes(3).AddViews(2).ExecX(ctx)
		// One slot row after one increment; all 16 where sum counters
		// pre-create their slot rows by default (MariaDB).
		want := int64(1)
		if e.kind == my {
			want = 16
		}
		if n := rawInt(t, e.db, "SELECT COUNT(*) FROM post_likes_slots WHERE post_id = ?", p.ID); n != want {
			t.Fatalf("%d slot rows after one increment, want %d", n, want)
		}
		e.client.Post.DeleteOneID(p.ID).ExecX(ctx)
		if n := rawInt(t, e.db, "SELECT COUNT(*) FROM post_likes_slots") + rawInt(t, e.db, "SELECT COUNT(*) FROM post_views_slots"); n != 0 {
			t.Fatalf("%d slot rows outlived their post", n)
		}
	})
}

// A migration of some of the schema's tables (the generated
// migrate.Create given some of migrate.Tables) with WithCounters readies
// the counters of those tables, their count triggers included, and
// leaves alone the counters of tables it does not create; a later
// migration of every table readies the rest, and counts stay exact
// through both.
func TestEntMigrationOfSomeTablesReadiesTheirCounters(t *testing.T) {
	eachDB(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		c := withEnt(t, e, false).client
		some := []*schema.Table{migrate.ShelvesTable, migrate.BooksTable, migrate.ShelfBookCountSlotsTable, migrate.ShelfOpenCountSlotsTable}
		must(t, oneMigrationAtATime(func() error { return migrate.Create(ctx, c.Schema, some, entcounter.WithCounters(c)) }))
		if e.db.Migrator().HasTable("posts") {
			t.Fatal("a migration of the shelves' tables made posts")
		}
		s := c.Shelf.Create().SaveX(ctx)
		c.Book.Create().SetShelfID(s.ID).ExecX(ctx)
		c.Book.Create().SetShelfID(s.ID).SetStatus("closed").ExecX(ctx)
		check := func(step string, books, open int64) {
			t.Helper()
			got, err := c.Shelf.Query().Where(shelf.ID(s.ID)).Live().Only(ctx)
			must(t, err)
			if got.BookCount != books || got.OpenCount != open {
				t.Errorf("after %s: the shelf counts %d books, %d open; want %d, %d", step, got.BookCount, got.OpenCount, books, open)
			}
		}
		check("a migration of the shelves' tables", 2, 1)
		must(t, entMigrate(ctx, c, entcounter.WithCounters(c)))
		c.Book.Create().SetShelfID(s.ID).ExecX(ctx)
		check("a migration of every table", 3, 2)
		p := c.Post.Create().SaveX(ctx)
		c.Post.UpdateOneID(p.ID).AddLikes(2).ExecX(ctx)
		if got := c.Post.GetX(ctx, p.ID).Likes; got != 2 {
			t.Errorf("a post of the second migration has likes %d after adding 2", got)
		}
	})
}
