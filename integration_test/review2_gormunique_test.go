package integration_test

import (
	"strings"
	"testing"

	"gorm.io/gorm/clause"
)

// Rv2Cat counts, by hooks, things that have a unique natural key.
type Rv2Cat struct {
	ID     uint
	N      int64      `gorm:"counter:counts=Things,hooks"`
	Things []Rv2Thing `gorm:"foreignKey:CatID"`
}

type Rv2Thing struct {
	ID    uint
	CatID *uint  `gorm:"index"`
	Code  string `gorm:"size:20;uniqueIndex"`
}

// An upsert whose conflict target is another unique column (code) may move
// a row the create does not name (id 1): hooks cannot read it before, so
// they refuse the upsert, naming the model, and the counts stay exact. An
// upsert on the primary key of the same model is counted.
func TestReview2GormUpsertOnOtherUniqueKey(t *testing.T) {
	eachDB(t, func(t *testing.T, e *env) {
		db := e.db
		must(t, db.AutoMigrate(&Rv2Cat{}, &Rv2Thing{}))
		c1, c2 := Rv2Cat{}, Rv2Cat{}
		must(t, db.Create(&c1).Error)
		must(t, db.Create(&c2).Error)
		must(t, db.Create(&Rv2Thing{CatID: &c1.ID, Code: "a"}).Error)
		up := clause.OnConflict{Columns: []clause.Column{{Name: "code"}}, DoUpdates: clause.AssignmentColumns([]string{"cat_id"})}
		err := db.Clauses(up).Create(&Rv2Thing{ID: 1000, CatID: &c2.ID, Code: "a"}).Error
		if err == nil || !strings.Contains(err.Error(), "Rv2Thing") {
			t.Fatalf("an upsert on code: %v; want a refusal naming Rv2Thing", err)
		}
		byKey := clause.OnConflict{Columns: []clause.Column{{Name: "id"}}, DoUpdates: clause.AssignmentColumns([]string{"cat_id"})}
		if e.kind != my { // ON DUPLICATE KEY matches any unique key: refused there too
			must(t, db.Clauses(byKey).Create(&Rv2Thing{ID: 1, CatID: &c2.ID, Code: "a"}).Error)
		}
		var n int64
		must(t, db.Raw("SELECT COUNT(*) FROM rv2_things").Scan(&n).Error)
		if n != 1 {
			t.Fatalf("%d things, want 1 (the upsert should have updated the existing one)", n)
		}
		var cats []Rv2Cat
		must(t, db.Order("id").Find(&cats).Error)
		for _, c := range cats {
			var want int64
			must(t, db.Raw("SELECT COUNT(*) FROM rv2_things WHERE cat_id = ?", c.ID).Scan(&want).Error)
			if c.N != want {
				t.Errorf("cat %d: count %d, COUNT(*) %d", c.ID, c.N, want)
			}
		}
	})
}
