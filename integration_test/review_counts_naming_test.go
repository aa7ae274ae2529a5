package integration_test

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"testing"

	"gorm.io/gorm"

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
			must(t, db.AutoMigrate(&RvQCat{}, &RvQItem{}))
			c := RvQCat{}
			must(t, db.Create(&c).Error)
			must(t, db.Create(&[]RvQItem{{CatID: &c.ID}, {CatID: &c.ID}}).Error)
			got := reviewLive(t, db, func(c RvQCat) any { return c.ID }, func(c RvQCat) []int64 { return []int64{c.N, c.H} })
			// [N (triggers), H (hooks)]
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
