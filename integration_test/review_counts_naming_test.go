package integration_test

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"

	"gorm.io/gorm"
	"gorm.io/gorm/schema"

	"github.com/hotcounter/hotcounter/gormcounter"
)

// Review repros: counts under unusual names and shapes.

// reviewLive returns the values of a parent's counter fields, loaded live,
// by the parent's key.
func reviewLive[P any](t *testing.T, db *gorm.DB, key func(P) any, val func(P) []int64) map[string][]int64 {
	t.Helper()
	var ps []P
	must(t, db.Clauses(gormcounter.Live).Find(&ps).Error)
	out := map[string][]int64{}
	for _, p := range ps {
		out[fmt.Sprint(key(p))] = val(p)
	}
	return out
}

func reviewExpect(t *testing.T, step string, got map[string][]int64, want map[string][]int64) {
	t.Helper()
	for k, w := range want {
		if fmt.Sprint(got[k]) != fmt.Sprint(w) {
			t.Errorf("after %s: parent %s has counts %v, want %v", step, k, got[k], w)
		}
	}
}

// --- string keys -----------------------------------------------------------

type RvSCat struct {
	ID    string    `gorm:"primaryKey;size:36"`
	N     int64     `gorm:"counter:counts=Items"`
	H     int64     `gorm:"counter:counts=Items,hooks"`
	Items []RvSItem `gorm:"foreignKey:CatID"`
}

type RvSItem struct {
	ID        string  `gorm:"primaryKey;size:36"`
	CatID     *string `gorm:"size:36;index"`
	DeletedAt gorm.DeletedAt
}

func TestReviewCountsStringKeys(t *testing.T) {
	eachDB(t, func(t *testing.T, e *env) {
		db := e.db
		must(t, db.AutoMigrate(&RvSCat{}, &RvSItem{}))
		must(t, db.Create(&[]RvSCat{{ID: "a"}, {ID: "b"}}).Error)
		a, b := "a", "b"
		must(t, db.Create(&[]RvSItem{{ID: "i1", CatID: &a}, {ID: "i2", CatID: &a}, {ID: "i3", CatID: &b}}).Error)
		must(t, db.Model(&RvSItem{}).Where("id IN ?", []string{"i1", "i2"}).Update("cat_id", b).Error)
		must(t, db.Delete(&RvSItem{}, "id = ?", "i3").Error)
		got := reviewLive(t, db, func(c RvSCat) any { return c.ID }, func(c RvSCat) []int64 { return []int64{c.N, c.H} })
		reviewExpect(t, "moves and a delete with string keys", got, map[string][]int64{"a": {0, 0}, "b": {2, 2}})
		for _, f := range []string{"N", "H"} {
			n, err := gormcounter.Recount(db.Model(&RvSCat{}), f)
			must(t, err)
			if n != 0 {
				t.Errorf("Recount(%s) corrected %d", f, n)
			}
		}
	})
}

// --- self-referencing table -----------------------------------------------

type RvNode struct {
	ID        uint
	ParentID  *uint    `gorm:"index"`
	Kids      []RvNode `gorm:"foreignKey:ParentID"`
	KidCount  int64    `gorm:"counter:counts=Kids"`
	HookCount int64    `gorm:"counter:counts=Kids,hooks"`
}

func TestReviewCountsSelfReferencing(t *testing.T) {
	eachDB(t, func(t *testing.T, e *env) {
		db := e.db
		must(t, db.AutoMigrate(&RvNode{}))
		root := RvNode{}
		must(t, db.Create(&root).Error)
		kids := []RvNode{{ParentID: &root.ID}, {ParentID: &root.ID}}
		must(t, db.Create(&kids).Error)
		grand := RvNode{ParentID: &kids[0].ID}
		must(t, db.Create(&grand).Error)
		must(t, db.Model(&RvNode{}).Where("id = ?", grand.ID).Update("parent_id", root.ID).Error)
		must(t, db.Delete(&RvNode{}, kids[1].ID).Error)
		got := reviewLive(t, db, func(c RvNode) any { return c.ID }, func(c RvNode) []int64 { return []int64{c.KidCount, c.HookCount} })
		reviewExpect(t, "writes to a self-referencing table", got, map[string][]int64{
			fmt.Sprint(root.ID): {2, 2}, fmt.Sprint(kids[0].ID): {0, 0},
		})
	})
}

// --- a child counted by two parents, odd column names, where with quotes ---

type RvOwner struct {
	ID    uint
	N     int64       `gorm:"counter:counts=Items"`
	Items []RvTwoItem `gorm:"foreignKey:OwnerRef"`
}

type RvGroup struct {
	ID    uint
	N     int64       `gorm:"counter:counts=Items,where=note NOT LIKE '%x,y%' AND note <> 'it''s'"`
	H     int64       `gorm:"counter:counts=Items,hooks,where=note NOT LIKE '%x,y%' AND note <> 'it''s'"`
	Items []RvTwoItem `gorm:"foreignKey:GroupRef"`
}

type RvTwoItem struct {
	ID       uint
	OwnerRef *uint  `gorm:"column:OwnerRef;index"`
	GroupRef *uint  `gorm:"column:group;index"`
	Note     string `gorm:"size:50"`
	Order    int    `gorm:"column:order"`
}

func TestReviewCountsTwoParentsOddNames(t *testing.T) {
	eachDB(t, func(t *testing.T, e *env) {
		db := e.db
		must(t, db.AutoMigrate(&RvOwner{}, &RvGroup{}, &RvTwoItem{}))
		o := RvOwner{}
		g := RvGroup{}
		must(t, db.Create(&o).Error)
		must(t, db.Create(&g).Error)
		items := []RvTwoItem{
			{OwnerRef: &o.ID, GroupRef: &g.ID, Note: "plain"},
			{OwnerRef: &o.ID, GroupRef: &g.ID, Note: "has x,y inside"},
			{OwnerRef: &o.ID, GroupRef: &g.ID, Note: "it's"},
			{GroupRef: &g.ID, Note: "100%"},
		}
		must(t, db.Create(&items).Error)
		must(t, db.Model(&RvTwoItem{}).Where("id = ?", items[0].ID).Update("Note", "it's").Error)
		gotO := reviewLive(t, db, func(c RvOwner) any { return c.ID }, func(c RvOwner) []int64 { return []int64{c.N} })
		gotG := reviewLive(t, db, func(c RvGroup) any { return c.ID }, func(c RvGroup) []int64 { return []int64{c.N, c.H} })
		reviewExpect(t, "writes", gotO, map[string][]int64{fmt.Sprint(o.ID): {3}})
		reviewExpect(t, "writes", gotG, map[string][]int64{fmt.Sprint(g.ID): {1, 1}})
		for _, f := range []string{"N", "H"} {
			n, err := gormcounter.Recount(db.Model(&RvGroup{}), f)
			must(t, err)
			if n != 0 {
				t.Errorf("Recount(%s) corrected %d", f, n)
			}
		}
	})
}

// --- table prefix -----------------------------------------------------------

func TestReviewCountsTablePrefix(t *testing.T) {
	for _, kind := range allKinds {
		t.Run(string(kind), func(t *testing.T) {
			e := open(t, kind, &gorm.Config{NamingStrategy: schema.NamingStrategy{TablePrefix: "app_"}})
			db := e.db
			must(t, db.AutoMigrate(&Category{}, &Object{}, &Album{}, &Photo{}))
			c := Category{Name: "c"}
			a := Album{Name: "a"}
			must(t, db.Create(&c).Error)
			must(t, db.Create(&a).Error)
			must(t, db.Create(&[]Object{{CategoryID: &c.ID}, {CategoryID: &c.ID, Status: "draft"}}).Error)
			must(t, db.Create(&[]Photo{{AlbumID: &a.ID}, {AlbumID: &a.ID, Status: "draft"}}).Error)
			gotC := reviewLive(t, db, func(c Category) any { return c.ID }, func(c Category) []int64 { return []int64{c.ObjectCount, c.ActiveCount} })
			gotA := reviewLive(t, db, func(c Album) any { return c.ID }, func(c Album) []int64 { return []int64{c.PhotoCount, c.LiveCount} })
			reviewExpect(t, "creates under a table prefix", gotC, map[string][]int64{fmt.Sprint(c.ID): {2, 1}})
			reviewExpect(t, "creates under a table prefix", gotA, map[string][]int64{fmt.Sprint(a.ID): {2, 1}})
		})
	}
}

// --- schema-qualified tables -----------------------------------------------

var rvSchema string

type RvQCat struct {
	ID    uint
	N     int64     `gorm:"counter:counts=Items"`
	H     int64     `gorm:"counter:counts=Items,hooks"`
	Items []RvQItem `gorm:"foreignKey:CatID"`
}

func (RvQCat) TableName() string { return rvSchema + ".rv_cats" }

type RvQItem struct {
	ID        uint
	CatID     *uint `gorm:"index"`
	DeletedAt gorm.DeletedAt
}

func (RvQItem) TableName() string { return rvSchema + ".rv_items" }

func TestReviewCountsSchemaQualified(t *testing.T) {
	for _, kind := range []dbKind{pg, my} {
		t.Run(string(kind), func(t *testing.T) {
			e := open(t, kind)
			db := e.db
			b := make([]byte, 4)
			rand.Read(b)
			rvSchema = "rv_other_" + hex.EncodeToString(b)
			if kind == pg {
				must(t, db.Exec("CREATE SCHEMA "+rvSchema).Error)
				t.Cleanup(func() { db.Exec("DROP SCHEMA " + rvSchema + " CASCADE") })
			} else {
				must(t, db.Exec("CREATE DATABASE "+rvSchema).Error)
				t.Cleanup(func() { db.Exec("DROP DATABASE " + rvSchema) })
			}
			e.log.reset()
			must(t, db.AutoMigrate(&RvQCat{}, &RvQItem{}))
			for _, s := range e.log.statements() {
				if strings.Contains(s, "TRIGGER") || strings.Contains(s, "SELECT count") {
					t.Log(s[:min(len(s), 300)])
				}
			}
			c := RvQCat{}
			must(t, db.Create(&c).Error)
			must(t, db.Create(&[]RvQItem{{CatID: &c.ID}, {CatID: &c.ID}}).Error)
			got := reviewLive(t, db, func(c RvQCat) any { return c.ID }, func(c RvQCat) []int64 { return []int64{c.N, c.H} })
			reviewExpect(t, "creates in another schema", got, map[string][]int64{fmt.Sprint(c.ID): {2, 2}})
		})
	}
}

// --- a child field without a column ----------------------------------------

type RvGCat struct {
	ID    uint
	N     int64     `gorm:"counter:counts=Items"`
	Items []RvGItem `gorm:"foreignKey:CatID"`
}

type RvGItem struct {
	ID        uint
	CatID     *uint  `gorm:"index"`
	Extra     string `gorm:"->;-:migration"` // filled by a select, no column
	DeletedAt gorm.DeletedAt
}

func TestReviewCountsChildFieldWithoutColumn(t *testing.T) {
	eachDB(t, func(t *testing.T, e *env) {
		db := e.db
		must(t, db.AutoMigrate(&RvGCat{}, &RvGItem{}))
		c := RvGCat{}
		must(t, db.Create(&c).Error)
		must(t, db.Create(&RvGItem{CatID: &c.ID}).Error)
		got := reviewLive(t, db, func(c RvGCat) any { return c.ID }, func(c RvGCat) []int64 { return []int64{c.N} })
		reviewExpect(t, "a create", got, map[string][]int64{fmt.Sprint(c.ID): {1}})
	})
}
