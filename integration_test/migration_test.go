package integration_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"
	"gorm.io/gorm/schema"

	"github.com/hotcounter/hotcounter"
	"github.com/hotcounter/hotcounter/gormcounter"
)

func TestMigratorWrapperKeepsGormWorking(t *testing.T) {
	parallel(t)
	for _, k := range allKinds {
		t.Run(string(k), func(t *testing.T) {
			e := open(t, k, config(&gorm.Config{TranslateError: true}))
			db := e.db
			must(t, migrateAll(db))
			must(t, migrateAll(db)) // idempotent

			// Index creation (BuildIndexOptions is forwarded).
			must(t, db.AutoMigrate(&Indexed{}))
			for _, idx := range []string{"idx_indexeds_email", "idx_ab"} {
				if !db.Migrator().HasIndex(&Indexed{}, idx) {
					t.Fatalf("index %s missing", idx)
				}
			}
			must(t, db.Migrator().DropIndex(&Indexed{}, "idx_ab"))
			must(t, db.Migrator().CreateIndex(&Indexed{}, "idx_ab"))

			// TranslateError (ErrorTranslator is forwarded).
			p := newPost(t, db, "dup")
			err := db.Create(&Post{ID: p.ID, Title: "again"}).Error
			if !errors.Is(err, gorm.ErrDuplicatedKey) {
				t.Fatalf("duplicate key: %v, want gorm.ErrDuplicatedKey", err)
			}

			// Savepoints (SavePointerDialectorInterface is forwarded).
			must(t, db.Transaction(func(tx *gorm.DB) error {
				must(t, gormcounter.Increment(tx.Model(&p), "Likes", 1).Error)
				must(t, tx.SavePoint("sp").Error)
				must(t, gormcounter.Increment(tx.Model(&p), "Likes", 10).Error)
				must(t, tx.RollbackTo("sp").Error)
				return nil
			}))
			if got := exact(t, db, p.ID).Likes; got != 1 {
				t.Fatalf("after RollbackTo: likes = %d, want 1", got)
			}

			u, ok := db.Dialector.(interface{ Unwrap() gorm.Dialector })
			if !ok || u.Unwrap().Name() != dialectName(k) {
				t.Fatalf("Unwrap: %T", db.Dialector)
			}
		})
	}
}

func TestSessionsMadeBeforeUseKeepWorking(t *testing.T) {
	parallel(t)
	for _, k := range allKinds {
		t.Run(string(k), func(t *testing.T) {
			// Open without the plugin, take sessions, then register it.
			e := open(t, k)
			raw, err := gorm.Open(dialectorFor(k, e.dsn), &gorm.Config{Logger: e.log})
			must(t, err)
			early := raw.Session(&gorm.Session{})
			earlyCtx := raw.WithContext(t.Context())
			must(t, raw.Use(gormcounter.New(gormcounter.Config{})))
			must(t, migrateAll(raw))

			for _, s := range []*gorm.DB{early, earlyCtx} {
				p := Post{Title: "early"}
				must(t, s.Create(&p).Error)
				must(t, gormcounter.Increment(s.Model(&p), "Likes", 2).Error)
				must(t, s.Transaction(func(tx *gorm.DB) error {
					must(t, gormcounter.Increment(tx.Model(&p), "Likes", 1).Error)
					return tx.Transaction(func(tx2 *gorm.DB) error { // savepoint on the old dialector
						return gormcounter.Increment(tx2.Model(&p), "Likes", 1).Error
					})
				}))
				var got Post
				must(t, s.First(&got, p.ID).Error)
				if got.Likes != 4 {
					t.Fatalf("session made before Use: likes = %d, want 4", got.Likes)
				}
			}
		})
	}
}

func TestCreateAndDropTableManageSlotTables(t *testing.T) {
	parallel(t)
	eachDB(t, func(t *testing.T, e *env) {
		db := e.db
		m := db.Migrator()
		must(t, m.CreateTable(&Author{}))
		if !m.HasTable("author_followers_slots") {
			t.Fatal("CreateTable did not create the slot table")
		}
		a := Author{Name: "a"}
		must(t, db.Create(&a).Error)
		must(t, gormcounter.Increment(db.Model(&a), "Followers", 3).Error)
		must(t, m.DropTable(&Author{}))
		if m.HasTable("author_followers_slots") || m.HasTable("authors") {
			t.Fatal("DropTable left a table behind")
		}
		// A recreated table starts from zero: no stale slots for reused ids.
		must(t, db.AutoMigrate(&Author{}))
		b := Author{Name: "b"}
		must(t, db.Create(&b).Error)
		var got Author
		must(t, db.First(&got, b.ID).Error)
		if got.Followers != 0 {
			t.Fatalf("recreated table: followers = %d, want 0", got.Followers)
		}
	})
}

func TestAddingACounterToAnExistingTable(t *testing.T) {
	parallel(t)
	eachDB(t, func(t *testing.T, e *env) {
		db := e.db
		must(t, db.AutoMigrate(&Before{}))
		old := Before{Title: "old"}
		must(t, db.Create(&old).Error)
		must(t, db.AutoMigrate(&After{}))
		if !db.Migrator().HasColumn(&After{}, "saves") || db.Migrator().HasColumn(&After{}, "reads") {
			t.Fatal("want a saves column (rollup) and no reads column (sum)")
		}
		rows, _ := slotRows(t, db, "article_reads_slots", "article_id", old.ID)
		if rows != 4 {
			t.Fatalf("the existing row got %d pre-created slot rows, want 4", rows)
		}
		must(t, gormcounter.Increment(db.Model(&After{ID: old.ID}), "Reads", 2).Error)
		must(t, gormcounter.Increment(db.Model(&After{ID: old.ID}), "Saves", 3).Error)
		var got After
		must(t, db.Clauses(gormcounter.Live).First(&got, old.ID).Error)
		if got.Reads != 2 || got.Saves != 3 || got.Title != "old" {
			t.Fatalf("after adding counters: %+v", got)
		}
		// Slot tables are named after the table, not the struct.
		var other Renamed
		must(t, db.First(&other, old.ID).Error)
		if other.Reads != 2 {
			t.Fatalf("another struct on the same table reads %d, want 2", other.Reads)
		}
	})
}

// Deleting a post, by itself or by a condition, removes its slot rows and
// no other post's. GORM and ent.
func TestDeletingAParentRemovesItsSlots(t *testing.T) {
	eachORM(t, func(t *testing.T, o counterORM) {
		ids := o.createMany(t, modelPost, 3)
		for _, id := range ids {
			must(t, o.increment(modelPost, id, "likes", 1))
			must(t, o.increment(modelPost, id, "views", 1))
		}
		must(t, o.remove(modelPost, ids[0]))
		must(t, o.removePosts(ids[1:2]))
		for _, table := range []string{"post_likes_slots", "post_views_slots"} {
			if n := rawInt(t, o.db(), "SELECT COUNT(*) FROM "+table+" WHERE post_id IN ?", ids[:2]); n != 0 {
				t.Fatalf("%s keeps %d rows of deleted posts", table, n)
			}
		}
		if likes, views := exactly(t, o, modelPost, ids[2], "likes"), exactly(t, o, modelPost, ids[2], "views"); likes != 1 || views != 1 {
			t.Fatalf("the post left: likes %d views %d, want 1 and 1", likes, views)
		}
	})
}

// Bad declarations, each a model of its own.
type (
	ZeroSlots struct {
		ID uint
		N  int64 `gorm:"counter:slots=0"`
	}
	WordSlots struct {
		ID uint
		N  int64 `gorm:"counter:slots=x"`
	}
	UnknownOption struct {
		ID uint
		N  int64 `gorm:"counter:slots=4,fast"`
	}
	TextCounter struct {
		ID uint
		N  string `gorm:"counter"`
	}
	RollupPrecreate struct {
		ID uint
		N  int64 `gorm:"counter:rollup,precreate"`
	}
	TooManySlots struct {
		ID uint
		N  int64 `gorm:"counter:slots=5000"`
	}
	TwoKeys struct {
		A uint  `gorm:"primaryKey"`
		B uint  `gorm:"primaryKey"`
		N int64 `gorm:"counter"`
	}
	SemicolonSlots struct {
		ID uint
		N  int64 `gorm:"counter;slots=4"`
	}
	RepeatedSlots struct {
		ID uint
		N  int64 `gorm:"counter:slots=4,slots=8"`
	}
	StrayRollup struct {
		ID uint
		N  int64 `gorm:"rollup"`
	}
	PointerCounter struct {
		ID uint
		N  *int64 `gorm:"counter"`
	}
)

func TestBadDeclarationsNameModelAndField(t *testing.T) {
	parallel(t)
	e := open(t, lite)
	cases := []struct {
		model any
		name  string
		says  string
	}{
		{&ZeroSlots{}, "ZeroSlots.N", "slots=0"},
		{&WordSlots{}, "WordSlots.N", "slots=x"},
		{&UnknownOption{}, "UnknownOption.N", `"fast"`},
		{&TextCounter{}, "TextCounter.N", "integer"},
		{&RollupPrecreate{}, "RollupPrecreate.N", "precreate"},
		{&TooManySlots{}, "TooManySlots.N", "slots=5000"},
		{&TwoKeys{}, "TwoKeys.N", "primary key"},
		{&SemicolonSlots{}, "SemicolonSlots.N", "`gorm:\"counter:slots=4\"`"},
		{&RepeatedSlots{}, "RepeatedSlots.N", "slots given twice"},
		{&StrayRollup{}, "StrayRollup.N", "`gorm:\"counter:rollup\"`"},
		{&PointerCounter{}, "PointerCounter.N", "not a pointer: a counter has no NULL"},
	}
	for _, c := range cases {
		for _, step := range []struct {
			what string
			run  func() error
		}{
			{"AutoMigrate", func() error { return e.db.AutoMigrate(c.model) }},
			{"Find", func() error { return e.db.Find(c.model).Error }},
			{"DropTable", func() error { return e.db.Migrator().DropTable(c.model) }},
		} {
			err := step.run()
			if !errors.Is(err, hotcounter.ErrInvalidCounter) {
				t.Fatalf("%s %T: err = %v, want ErrInvalidCounter", step.what, c.model, err)
			}
			if !strings.Contains(err.Error(), c.name) || !strings.Contains(err.Error(), c.says) {
				t.Fatalf("%s %T: %q should name %s and say %s", step.what, c.model, err, c.name, c.says)
			}
		}
	}
	raw, err := gorm.Open(dialectorFor(lite, e.dsn), &gorm.Config{})
	must(t, err)
	if err := raw.Use(gormcounter.New(gormcounter.Config{DefaultSlots: -1})); err == nil {
		t.Fatal("Use accepted DefaultSlots: -1")
	}
	err = raw.Use(gormcounter.New(gormcounter.Config{Models: []any{&Post{}, &WordSlots{}}}))
	if !errors.Is(err, hotcounter.ErrInvalidCounter) || !strings.Contains(err.Error(), "WordSlots.N") {
		t.Fatalf("Use with a bad model in Config.Models: %v", err)
	}
	if _, wrapped := raw.Dialector.(interface{ Unwrap() gorm.Dialector }); wrapped {
		t.Fatal("a failed Use left the dialector wrapped")
	}
}

var itemSchema string

func TestSlotTablesFollowASchemaQualifiedParentTable(t *testing.T) {
	parallel(t)
	e := open(t, pg)
	db := e.db
	itemSchema = "hcq_" + strings.ReplaceAll(strings.ToLower(t.Name()), "/", "_")
	must(t, db.Exec("DROP SCHEMA IF EXISTS "+itemSchema+" CASCADE").Error)
	must(t, db.Exec("CREATE SCHEMA "+itemSchema).Error)
	t.Cleanup(func() { db.Exec("DROP SCHEMA IF EXISTS " + itemSchema + " CASCADE") })
	must(t, db.AutoMigrate(&QualifiedItem{}))
	if n := rawInt(t, db, "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = ? AND table_name IN ('item_hits_slots', 'item_likes_slots')", itemSchema); n != 2 {
		t.Fatalf("%d slot tables in schema %s, want 2", n, itemSchema)
	}
	it := QualifiedItem{}
	must(t, db.Create(&it).Error)
	must(t, gormcounter.Increment(db.Model(&it), "Hits", 3).Error)
	must(t, gormcounter.Increment(db.Model(&QualifiedItem{}).Where("id = ?", it.ID), "Likes", 4).Error)
	must(t, gormcounter.RollupPass(db, &QualifiedItem{}))
	var got QualifiedItem
	must(t, db.First(&got, it.ID).Error)
	if got.Hits != 3 || got.Likes != 4 {
		t.Fatalf("item: %+v", got)
	}
}

func TestNamingStrategyAndQuoting(t *testing.T) {
	parallel(t)
	for _, k := range allKinds {
		t.Run(string(k), func(t *testing.T) {
			e := open(t, k, config(&gorm.Config{NamingStrategy: schema.NamingStrategy{TablePrefix: "blog_", SingularTable: true}}))
			db := e.db
			must(t, db.AutoMigrate(&Order{}, &Doc{}))
			for _, table := range []string{"blog_order", "blog_order_group_slot", "blog_order_select_slot", "blog_doc_reads_slot"} {
				if !db.Migrator().HasTable(table) {
					t.Fatalf("table %s missing", table)
				}
			}
			o := Order{}
			must(t, db.Create(&o).Error)
			must(t, gormcounter.Increment(db.Model(&o), "Group", 5).Error)
			var quoted strings.Builder
			db.Dialector.QuoteTo(&quoted, "select")
			must(t, db.Model(&o).UpdateColumn("select", gorm.Expr(quoted.String()+" + ?", 7)).Error)
			var got Order
			must(t, db.Clauses(gormcounter.Live).First(&got, o.ID).Error)
			if got.Group != 5 || got.Select != 7 {
				t.Fatalf("order: %+v", got)
			}
			must(t, gormcounter.RollupPass(db, &Order{}))
			must(t, db.First(&got, o.ID).Error)
			if got.Select != 7 {
				t.Fatalf("order after rollup: %+v", got)
			}

			docs := []Doc{{Key: "b-doc"}, {Key: "a-doc"}}
			must(t, db.Create(&docs).Error)
			must(t, gormcounter.Increment(db.Model(&Doc{}).Where(map[string]any{"key": []string{"a-doc", "b-doc"}}), "Reads", 2).Error)
			must(t, gormcounter.Increment(db.Model(&docs[0]), "Saves", 4).Error)
			must(t, gormcounter.RollupPass(db, &Doc{}))
			var loaded []Doc
			must(t, db.Order(clause.OrderByColumn{Column: clause.Column{Name: "key"}}).Find(&loaded).Error)
			if len(loaded) != 2 || loaded[0].Reads != 2 || loaded[1].Reads != 2 || loaded[1].Saves != 4 {
				t.Fatalf("docs: %+v", loaded)
			}
			must(t, db.Delete(&docs[1]).Error)
			if n := rawInt(t, db, `SELECT COUNT(*) FROM blog_doc_reads_slot WHERE doc_id = 'a-doc'`); n != 0 {
				t.Fatalf("string key cascade left %d rows", n)
			}
		})
	}
}

// SQLite alters a table by copying it, dropping it and renaming the copy.
// With foreign keys enforced, dropping a parent table cascades to its slot
// tables and deletes every count; GORM's migrator turns them off for some
// rebuilds (not DropColumn) with a PRAGMA that holds on one pooled
// connection only. The plugin's migrator runs every rebuild on one
// connection with foreign keys off: the counts survive, and foreign keys
// are on again afterwards.
func TestSQLiteTableRebuildKeepsCounts(t *testing.T) {
	parallel(t)
	e := open(t, lite)
	db := e.db
	must(t, db.AutoMigrate(&SumShow{}))
	shows := make([]SumShow, 3)
	for i := range shows {
		must(t, db.Create(&shows[i]).Error)
		for j := 0; j <= i; j++ {
			must(t, gormcounter.Increment(db.Model(&shows[i]), "Likes", 10).Error)
		}
	}
	ids := []uint{shows[0].ID, shows[1].ID, shows[2].ID}
	// Several idle connections, so that a PRAGMA and the rebuild's
	// transaction would run on different ones.
	for i := 0; i < 8; i++ {
		must(t, db.Exec("SELECT 1").Error)
	}
	must(t, db.Migrator().AlterColumn(&SumShow{}, "Title"))
	assert.Equal(t, []int64{10, 20, 30}, sumLikes(t, db, ids), "after AlterColumn")
	must(t, db.Exec("ALTER TABLE shows ADD COLUMN extra INTEGER").Error)
	must(t, db.Migrator().DropColumn(&SumShow{}, "extra"))
	assert.Equal(t, []int64{10, 20, 30}, sumLikes(t, db, ids), "after DropColumn")
	assert.EqualValues(t, 1, rawInt(t, db, "PRAGMA foreign_keys"), "foreign keys are enforced again")
	must(t, db.Delete(&SumShow{ID: ids[0]}).Error)
	assert.EqualValues(t, 0, rawInt(t, db, "SELECT COUNT(*) FROM show_likes_slots WHERE show_id = ?", ids[0]), "deleting a show still cascades")
}

// SQLite without foreign keys would keep a deleted parent's slot rows (and
// hand them to a new row that takes its id): db.Use refuses, naming the DSN
// setting that turns them on, and so does AutoMigrate on a connection that
// turned them off.
func TestSQLiteWithoutForeignKeysIsRefused(t *testing.T) {
	parallel(t)
	db, err := gorm.Open(dialectorFor(lite, "file:"+filepath.Join(t.TempDir(), "nofk.db")), &gorm.Config{})
	must(t, err)
	err = db.Use(gormcounter.New(gormcounter.Config{}))
	if !errors.Is(err, gormcounter.ErrForeignKeysOff) || !strings.Contains(err.Error(), "_pragma=foreign_keys(1)") {
		t.Fatalf("Use on SQLite without foreign keys: %v; want ErrForeignKeysOff naming the DSN setting", err)
	}
	e := open(t, lite)
	must(t, e.db.Connection(func(conn *gorm.DB) error {
		must(t, conn.Exec("PRAGMA foreign_keys = OFF").Error)
		defer conn.Exec("PRAGMA foreign_keys = ON")
		err := conn.AutoMigrate(&Story{})
		if !errors.Is(err, gormcounter.ErrForeignKeysOff) || !strings.Contains(err.Error(), "Story") {
			t.Errorf("AutoMigrate on a connection without foreign keys: %v; want ErrForeignKeysOff naming Story", err)
		}
		return nil
	}))
}
