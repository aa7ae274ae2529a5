package integration_test

import (
	"testing"

	"gorm.io/gorm"
)

// Without foreign key constraints (DisableForeignKeyConstraintWhenMigrating),
// a child may name a parent that does not exist (yet). PostgreSQL and SQLite
// triggers skip such a row; the MySQL/MariaDB trigger, and the hooks on every database, upsert a slot row for
// the missing parent, whose foreign key fails the child's INSERT.
func TestReviewCountsChildOfMissingParent(t *testing.T) {
	for _, kind := range allKinds {
		t.Run(string(kind), func(t *testing.T) {
			e := open(t, kind, &gorm.Config{DisableForeignKeyConstraintWhenMigrating: true})
			db := e.db
			for _, k := range countKinds {
				k.migrate(t, db)
				k.newParents(t, db, 1)
				k.newChildren(t, db, []*uint{ptr(999)}, "active")
			}
		})
	}
}
