package integration_test

import (
	"context"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/hotcounter/hotcounter/gormcounter"
)

// Review repros: counts kept by GORM hooks (Album.PhotoCount, Album.LiveCount).

var hooksKind = countKinds[1]

func reviewAlbums(t *testing.T, db *gorm.DB, n int) []uint {
	t.Helper()
	hooksKind.migrate(t, db)
	return hooksKind.newParents(t, db, n)
}

// An upsert of an existing child (INSERT ... ON CONFLICT) runs the create
// hook, which adds +1 for every row in the statement as if each were new.
func TestReviewHooksCreateOnConflict(t *testing.T) {
	eachDB(t, func(t *testing.T, e *env) {
		setup := func(t *testing.T) (*gorm.DB, []uint, Photo) {
			db := open(t, e.kind).db
			as := reviewAlbums(t, db, 2)
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

// Saving a parent with its loaded children: GORM upserts the children
// (ON CONFLICT (id) DO UPDATE SET album_id = excluded.album_id), and the
// create hook counts every one of them again.
func TestReviewHooksSaveParentWithChildren(t *testing.T) {
	eachDB(t, func(t *testing.T, e *env) {
		db := e.db
		as := reviewAlbums(t, db, 1)
		hooksKind.newChildren(t, db, []*uint{&as[0], &as[0]}, "active")
		hooksKind.check(t, db, "creating photos")
		var a Album
		must(t, db.Preload("Photos").First(&a, as[0]).Error)
		a.Name = "renamed"
		must(t, db.Save(&a).Error)
		hooksKind.check(t, db, "Save of an album with its preloaded photos")
	})
}

// Association("Photos").Append of a photo that belongs to another album
// moves it with an upsert: the new album gains one, the old one keeps it.
func TestReviewHooksAssociationAppendMoves(t *testing.T) {
	eachDB(t, func(t *testing.T, e *env) {
		db := e.db
		as := reviewAlbums(t, db, 2)
		p := Photo{AlbumID: ptr(as[0]), Status: "active"}
		must(t, db.Create(&p).Error)
		must(t, db.Model(&Album{ID: as[1]}).Association("Photos").Append(&p))
		hooksKind.check(t, db, "Association(Photos).Append of another album's photo")
	})
}

// Save of an unchanged child: on MySQL/MariaDB the UPDATE reports 0 rows
// affected, GORM's Save falls back to Create ... ON DUPLICATE KEY UPDATE,
// and the create hook counts the photo a second time.
func TestReviewHooksSaveUnchanged(t *testing.T) {
	eachDB(t, func(t *testing.T, e *env) {
		db := e.db
		as := reviewAlbums(t, db, 1)
		p := Photo{AlbumID: ptr(as[0]), Status: "active"}
		must(t, db.Create(&p).Error)
		var loaded Photo
		must(t, db.First(&loaded, p.ID).Error)
		must(t, db.Save(&loaded).Error)
		hooksKind.check(t, db, "Save of an unchanged photo")
	})
}

// Create from a map: the rows cannot be found again by key (GORM fills the
// key into the map on some databases only), so hooks refuse it, naming the
// model, rather than miscount.
func TestReviewHooksCreateFromMap(t *testing.T) {
	eachDB(t, func(t *testing.T, e *env) {
		db := e.db
		as := reviewAlbums(t, db, 1)
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
// Photo has no relation to Album, so a process that writes photos first
// must list Album in Config.Models (the README says so); then it counts.
func TestReviewHooksChildWrittenBeforeParentIsSeen(t *testing.T) {
	eachDB(t, func(t *testing.T, e *env) {
		as := reviewAlbums(t, e.db, 1)
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

// SkipDefaultTransaction: the hook's "before" read (FOR UPDATE) is not in a
// transaction with the write, so concurrent moves of one photo read the
// same old album and decrement it twice.
func TestReviewHooksSkipDefaultTransactionRace(t *testing.T) {
	for _, kind := range []dbKind{pg, my} {
		t.Run(string(kind), func(t *testing.T) {
			e := open(t, kind, &gorm.Config{SkipDefaultTransaction: true})
			db := e.db
			as := reviewAlbums(t, db, 8)
			ids := hooksKind.newChildren(t, db, []*uint{&as[0], &as[1]}, "active")
			hammer(t, 16, 100, func() error {
				return db.Model(&Photo{}).Where("id = ?", ids[rand.IntN(len(ids))]).Update("album_id", as[rand.IntN(len(as))]).Error
			})
			hooksKind.check(t, db, "concurrent moves without transactions")
		})
	}
}

// RvLCat counts, by hooks and with a condition, items that have counters
// of their own.
type RvLCat struct {
	ID    uint
	N     int64     `gorm:"counter:counts=Items,hooks,where=kind = 'a'"`
	Items []RvLItem `gorm:"foreignKey:CatID"`
}

type RvLItem struct {
	ID    uint
	CatID *uint  `gorm:"index"`
	Kind  string `gorm:"size:10"`
	Likes int64  `gorm:"counter"`
}

// An Increment of a child's own counter is an update of the child to GORM:
// the count hook reads the child row FOR UPDATE, so the increment waits for
// (and then holds) the child row lock, which a counter increment otherwise
// never takes.
func TestReviewHooksChildIncrementLocksChildRow(t *testing.T) {
	for _, kind := range []dbKind{pg, my} {
		t.Run(string(kind), func(t *testing.T) {
			e := open(t, kind)
			db := e.db
			must(t, db.AutoMigrate(&RvLCat{}, &RvLItem{}))
			c := RvLCat{}
			must(t, db.Create(&c).Error)
			it := RvLItem{CatID: &c.ID, Kind: "a"}
			must(t, db.Create(&it).Error)

			tx := db.Begin()
			defer tx.Rollback()
			must(t, tx.Exec("UPDATE rv_l_items SET kind = kind WHERE id = ?", it.ID).Error) // a writer holds the row
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			if err := gormcounter.Increment(db.WithContext(ctx).Model(&RvLItem{ID: it.ID}), "Likes", 1).Error; err != nil {
				t.Fatalf("Increment of the item's own counter while another transaction holds the item row: %v", err)
			}
		})
	}
}
