package integration_test

import (
	"testing"

	"gorm.io/gorm"

	"github.com/hotcounter/hotcounter/gormcounter"
)

// Review repros: migrations.

// Migrator().AlterColumn on SQLite recreates the child table, and its
// triggers go with it; the wrapped migrator only reinstalls them from
// AutoMigrate/CreateTable.
func TestReviewMigrateAlterColumnDropsTriggers(t *testing.T) {
	e := open(t, lite)
	db := e.db
	k := countKinds[0]
	k.migrate(t, db)
	ps := k.newParents(t, db, 1)
	must(t, db.Migrator().AlterColumn(&Object{}, "Status"))
	must(t, db.Exec("INSERT INTO objects (category_id, status) VALUES (?, 'active')", ps[0]).Error)
	k.check(t, db, "Migrator().AlterColumn(&Object{}, \"Status\") and a raw insert")
}

// RvObjectV2 is a later version of Object (Status widened).
type RvObjectV2 struct {
	ID         uint
	CategoryID *uint  `gorm:"index"`
	Status     string `gorm:"type:varchar(40);default:active"`
	DeletedAt  gorm.DeletedAt
}

func (RvObjectV2) TableName() string { return "objects" }

// A deploy that migrates the child model alone (a process that has not
// loaded Category): SQLite recreates objects to alter Status, its count
// triggers go, and nothing puts them back.
func TestReviewMigrateChildAloneInFreshProcess(t *testing.T) {
	e := open(t, lite)
	k := countKinds[0]
	k.migrate(t, e.db)
	ps := k.newParents(t, e.db, 1)

	db2, err := gorm.Open(dialectorFor(e.kind, e.dsn), &gorm.Config{Logger: e.log})
	must(t, err)
	sqlDB, _ := db2.DB()
	defer sqlDB.Close()
	must(t, db2.Use(gormcounter.New(gormcounter.Config{})))
	must(t, db2.AutoMigrate(&RvObjectV2{}))

	must(t, e.db.Exec("INSERT INTO objects (category_id, status) VALUES (?, 'active')", ps[0]).Error)
	k.check(t, e.db, "AutoMigrate of the child alone (fresh process) and a raw insert")
}
