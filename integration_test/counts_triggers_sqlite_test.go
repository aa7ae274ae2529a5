package integration_test

import (
	"testing"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// SQLite: "if an ON CONFLICT clause is specified as part of the statement
// causing the trigger to fire, then conflict handling policy of the outer
// statement is used instead" (CREATE TRIGGER docs). The count trigger's
// INSERT OR IGNORE of the slot row takes the outer statement's policy.

// An upsert (INSERT ... ON CONFLICT DO UPDATE) of an existing object: the
// trigger's INSERT OR IGNORE of an existing slot row aborts, and the write
// fails. GORM issues such upserts itself when it saves a parent's loaded
// children.
func TestSQLiteCountTriggersAllowUpserts(t *testing.T) {
	parallel(t)
	k := countKinds[0]
	setup := func(t *testing.T) (db *gorm.DB, ps []uint) {
		db = open(t, lite).db
		k.migrate(t, db)
		ps = k.newParents(t, db, 1)
		k.newChildren(t, db, []*uint{&ps[0], &ps[0]}, "active")
		return db, ps
	}
	t.Run("SaveParentWithChildren", func(t *testing.T) {
		db, ps := setup(t)
		var c Category
		must(t, db.Preload("Objects").First(&c, ps[0]).Error)
		must(t, db.Save(&c).Error)
		k.check(t, db, "Save of a category with its loaded objects")
	})
	t.Run("OnConflictUpdateAll", func(t *testing.T) {
		db, _ := setup(t)
		var o Object
		must(t, db.First(&o).Error)
		o.Status = "draft"
		must(t, db.Clauses(clause.OnConflict{UpdateAll: true}).Create(&o).Error)
		k.check(t, db, "an ON CONFLICT DO UPDATE create")
	})
}

// INSERT OR REPLACE of a new object is counted (the trigger's slot insert
// no longer inherits the REPLACE). Of an existing object, REPLACE deletes
// the old row without firing delete triggers unless the connection turned
// recursive_triggers on (SQLite's rule; docs/counts.md says so): with it on,
// the count stays exact.
func TestSQLiteCountTriggersCountInsertOrReplace(t *testing.T) {
	parallel(t)
	k := countKinds[0]
	setup := func(t *testing.T) (db *gorm.DB, ps, ids []uint) {
		db = open(t, lite).db
		k.migrate(t, db)
		ps = k.newParents(t, db, 1)
		ids = k.newChildren(t, db, []*uint{&ps[0], &ps[0], &ps[0]}, "active")
		return db, ps, ids
	}
	t.Run("NewRow", func(t *testing.T) {
		db, ps, _ := setup(t)
		must(t, db.Exec("INSERT OR REPLACE INTO objects (category_id, status) VALUES (?, 'active')", ps[0]).Error)
		k.check(t, db, "INSERT OR REPLACE of a new object")
	})
	t.Run("ExistingRowWithRecursiveTriggers", func(t *testing.T) {
		db, ps, ids := setup(t)
		must(t, db.Connection(func(tx *gorm.DB) error {
			if err := tx.Exec("PRAGMA recursive_triggers = ON").Error; err != nil {
				return err
			}
			return tx.Exec("INSERT OR REPLACE INTO objects (id, category_id, status) VALUES (?, ?, 'active')", ids[0], ps[0]).Error
		}))
		k.check(t, db, "INSERT OR REPLACE of an existing object")
	})
}
