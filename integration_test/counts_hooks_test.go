package integration_test

import (
	"context"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/hotcounter/hotcounter/gormcounter"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// Creating an album with new photos: GORM saves the has-many association
// after the album, with INSERT ... ON CONFLICT of rows without keys, and the
// hooks count the photos it inserted: the counts stay exact.
func TestCountsByHooksCountCreatingAParentWithNewChildren(t *testing.T) {
	parallel(t)
	eachDB(t, func(t *testing.T, e *env) {
		db := e.db
		hookedAlbums(t, db, 1)
		a := Album{Name: "with photos", Photos: []Photo{{Status: "active"}, {Status: "draft"}}}
		must(t, db.Create(&a).Error)
		hooksKind.check(t, db, "Create of an album with two new photos")
	})
}

// Inside db.Connection (a statement reused on one *sql.Conn) under
// SkipDefaultTransaction, a hooked write leaves the statement on that
// connection: the statements after it run on the same backend.
func TestCountsByHooksKeepTheConnection(t *testing.T) {
	parallel(t)
	e := open(t, pg, config(&gorm.Config{SkipDefaultTransaction: true}))
	db := e.db
	as := hookedAlbums(t, db, 1)
	must(t, db.Connection(func(c *gorm.DB) error {
		var before, after int
		if err := c.Raw("SELECT pg_backend_pid()").Scan(&before).Error; err != nil {
			return err
		}
		if err := c.Create(&Photo{AlbumID: &as[0], Status: "active"}).Error; err != nil {
			return err
		}
		if err := c.Raw("SELECT pg_backend_pid()").Scan(&after).Error; err != nil {
			return err
		}
		if before != after {
			t.Errorf("db.Connection: backend %d before a hooked Create, %d after it: the statement left the connection", before, after)
		}
		return nil
	}))
}

// An upsert whose conflict target is another unique column (code) may move a
// row the create does not name: hooks refuse it, naming the model, and the
// counts stay exact. An upsert on the primary key of the same model is
// counted.
func TestCountsByHooksRefuseUpsertsOnAnotherUniqueKey(t *testing.T) {
	parallel(t)
	eachDB(t, func(t *testing.T, e *env) {
		db := e.db
		must(t, db.AutoMigrate(&CodeCat{}, &CodeThing{}))
		c1, c2 := CodeCat{}, CodeCat{}
		must(t, db.Create(&c1).Error)
		must(t, db.Create(&c2).Error)
		must(t, db.Create(&CodeThing{CatID: &c1.ID, Code: "a"}).Error)
		up := clause.OnConflict{Columns: []clause.Column{{Name: "code"}}, DoUpdates: clause.AssignmentColumns([]string{"cat_id"})}
		err := db.Clauses(up).Create(&CodeThing{ID: 1000, CatID: &c2.ID, Code: "a"}).Error
		if err == nil || !strings.Contains(err.Error(), "CodeThing") {
			t.Fatalf("an upsert on code: %v; want a refusal naming CodeThing", err)
		}
		byKey := clause.OnConflict{Columns: []clause.Column{{Name: "id"}}, DoUpdates: clause.AssignmentColumns([]string{"cat_id"})}
		if e.kind != my { // ON DUPLICATE KEY matches any unique key: refused there too
			must(t, db.Clauses(byKey).Create(&CodeThing{ID: 1, CatID: &c2.ID, Code: "a"}).Error)
		}
		var n int64
		must(t, db.Raw("SELECT COUNT(*) FROM code_things").Scan(&n).Error)
		if n != 1 {
			t.Fatalf("%d things, want 1 (the upsert should have updated the existing one)", n)
		}
		var cats []CodeCat
		must(t, db.Order("id").Find(&cats).Error)
		for _, c := range cats {
			var want int64
			must(t, db.Raw("SELECT COUNT(*) FROM code_things WHERE cat_id = ?", c.ID).Scan(&want).Error)
			if c.N != want {
				t.Errorf("cat %d: count %d, COUNT(*) %d", c.ID, c.N, want)
			}
		}
	})
}

var hooksKind = countKinds[1]

func hookedAlbums(t *testing.T, db *gorm.DB, n int) []uint {
	t.Helper()
	hooksKind.migrate(t, db)
	return hooksKind.newParents(t, db, n)
}

// An upsert of an existing child (INSERT ... ON CONFLICT DO NOTHING or DO
// UPDATE, and Save of a slice, which GORM runs as one) counts only what it
// changed: a row that existed is not counted again, a row it moves is moved.
func TestCountsByHooksCountUpsertsOfExistingChildren(t *testing.T) {
	parallel(t)
	eachDB(t, func(t *testing.T, e *env) {
		setup := func(t *testing.T) (*gorm.DB, []uint, Photo) {
			db := open(t, e.kind).db
			as := hookedAlbums(t, db, 2)
			p := Photo{AlbumID: ptr(as[0]), Status: "active"}
			must(t, db.Create(&p).Error)
			hooksKind.check(t, db, "creating a photo")
			return db, as, p
		}
		t.Run("DoNothing", func(t *testing.T) {
			db, as, p := setup(t)
			again := Photo{ID: p.ID, AlbumID: ptr(as[0]), Status: "active"}
			must(t, db.Clauses(clause.OnConflict{DoNothing: true}).Create(&again).Error)
			hooksKind.check(t, db, "an ON CONFLICT DO NOTHING create of an existing photo")
		})
		t.Run("UpdateAll", func(t *testing.T) {
			db, as, p := setup(t)
			moved := Photo{ID: p.ID, AlbumID: ptr(as[1]), Status: "active"}
			must(t, db.Clauses(clause.OnConflict{UpdateAll: true}).Create(&moved).Error)
			hooksKind.check(t, db, "an ON CONFLICT DO UPDATE create that moves an existing photo")
		})
		t.Run("SaveSlice", func(t *testing.T) { // Save of a slice is a Create ... ON CONFLICT DO UPDATE
			db, _, _ := setup(t)
			var loaded []Photo
			must(t, db.Find(&loaded).Error)
			must(t, db.Save(&loaded).Error)
			hooksKind.check(t, db, "Save of a slice of loaded photos")
		})
	})
}

// Saving a parent with its loaded children (GORM upserts the children with
// ON CONFLICT (id) DO UPDATE) counts none of them again.
func TestCountsByHooksCountSavingAParentWithItsChildren(t *testing.T) {
	parallel(t)
	eachDB(t, func(t *testing.T, e *env) {
		db := e.db
		as := hookedAlbums(t, db, 1)
		hooksKind.newChildren(t, db, []*uint{&as[0], &as[0]}, "active")
		hooksKind.check(t, db, "creating photos")
		var a Album
		must(t, db.Preload("Photos").First(&a, as[0]).Error)
		a.Name = "renamed"
		must(t, db.Save(&a).Error)
		hooksKind.check(t, db, "Save of an album with its preloaded photos")
	})
}

// Association("Photos").Append of a photo that belongs to another album moves
// it with an upsert: the new album gains one and the old one loses it.
func TestCountsByHooksCountAssociationAppendMoves(t *testing.T) {
	parallel(t)
	eachDB(t, func(t *testing.T, e *env) {
		db := e.db
		as := hookedAlbums(t, db, 2)
		p := Photo{AlbumID: ptr(as[0]), Status: "active"}
		must(t, db.Create(&p).Error)
		must(t, db.Model(&Album{ID: as[1]}).Association("Photos").Append(&p))
		hooksKind.check(t, db, "Association(Photos).Append of another album's photo")
	})
}

// Save of an unchanged child (on MySQL/MariaDB the UPDATE reports 0 rows
// affected and GORM's Save falls back to Create ... ON DUPLICATE KEY UPDATE)
// does not count the child a second time.
func TestCountsByHooksCountSaveOfAnUnchangedChild(t *testing.T) {
	parallel(t)
	eachDB(t, func(t *testing.T, e *env) {
		db := e.db
		as := hookedAlbums(t, db, 1)
		p := Photo{AlbumID: ptr(as[0]), Status: "active"}
		must(t, db.Create(&p).Error)
		var loaded Photo
		must(t, db.First(&loaded, p.ID).Error)
		must(t, db.Save(&loaded).Error)
		hooksKind.check(t, db, "Save of an unchanged photo")
	})
}

// A create from a map without the key cannot be found again by key (GORM
// fills the key into the map on some databases only): hooks refuse it, naming
// the model, rather than miscount; with the key it is counted.
func TestCountsByHooksRefuseCreateFromMap(t *testing.T) {
	parallel(t)
	eachDB(t, func(t *testing.T, e *env) {
		db := e.db
		as := hookedAlbums(t, db, 1)
		err := db.Model(&Photo{}).Create(map[string]any{"album_id": as[0], "status": "active"}).Error
		if err == nil || !strings.Contains(err.Error(), "Photo") {
			t.Fatalf("Model(&Photo{}).Create(map): %v; want an error naming Photo", err)
		}
		hooksKind.check(t, db, "a refused Model(&Photo{}).Create(map)")
		must(t, db.Model(&Photo{}).Create(map[string]any{"id": 1000, "album_id": as[0], "status": "active"}).Error)
		hooksKind.check(t, db, "Model(&Photo{}).Create(map) with its key")
	})
}

// A process learns of a count kept by hooks when it first sees the parent.
// Photo has no relation to Album, so a process that writes photos first lists
// Album in Config.Models (docs/counts.md says so), and then its writes count.
func TestCountsByHooksNeedTheParentKnown(t *testing.T) {
	parallel(t)
	eachDB(t, func(t *testing.T, e *env) {
		as := hookedAlbums(t, e.db, 1)
		// A second process: a fresh gorm.DB (own schema cache) and plugin.
		db2, err := gorm.Open(dialectorFor(e.kind, e.dsn), &gorm.Config{Logger: e.log})
		must(t, err)
		sqlDB, _ := db2.DB()
		defer sqlDB.Close()
		must(t, db2.Use(gormcounter.New(gormcounter.Config{Models: []any{&Album{}}})))
		must(t, db2.Create(&Photo{AlbumID: ptr(as[0]), Status: "active"}).Error)
		hooksKind.check(t, e.db, "a create by a process that lists Album in Config.Models")
	})
}

// Under SkipDefaultTransaction the hooks open a transaction of their own
// around a hooked write, so concurrent moves of one photo each read its album
// under the row lock, and no album is decremented twice.
func TestCountsByHooksWithoutDefaultTransaction(t *testing.T) {
	parallel(t)
	for _, kind := range []dbKind{pg, my} {
		t.Run(string(kind), func(t *testing.T) {
			e := open(t, kind, config(&gorm.Config{SkipDefaultTransaction: true}))
			db := e.db
			as := hookedAlbums(t, db, 8)
			ids := hooksKind.newChildren(t, db, []*uint{&as[0], &as[1]}, "active")
			hammer(t, 16, 40, func() error {
				return db.Model(&Photo{}).Where("id = ?", ids[rand.IntN(len(ids))]).Update("album_id", as[rand.IntN(len(as))]).Error
			})
			hooksKind.check(t, db, "concurrent moves without transactions")
		})
	}
}

// An Increment of a child's own counter is an update of the child to GORM,
// but it changes no count: the count hooks leave it alone, so it neither
// reads the child row FOR UPDATE nor waits for a transaction that holds it.
func TestCountsByHooksLeaveChildIncrementsAlone(t *testing.T) {
	parallel(t)
	for _, kind := range []dbKind{pg, my} {
		t.Run(string(kind), func(t *testing.T) {
			e := open(t, kind)
			db := e.db
			must(t, db.AutoMigrate(&LockCat{}, &LockItem{}))
			c := LockCat{}
			must(t, db.Create(&c).Error)
			it := LockItem{CatID: &c.ID, Kind: "a"}
			must(t, db.Create(&it).Error)

			tx := db.Begin()
			defer tx.Rollback()
			must(t, tx.Exec("UPDATE lock_items SET kind = kind WHERE id = ?", it.ID).Error) // a writer holds the row
			ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
			defer cancel()
			if err := gormcounter.Increment(db.WithContext(ctx).Model(&LockItem{ID: it.ID}), "Likes", 1).Error; err != nil {
				t.Fatalf("Increment of the item's own counter while another transaction holds the item row: %v", err)
			}
		})
	}
}
