package integration_test

import (
	"testing"

	"gorm.io/gorm"
)

// Creating an album with new photos (GORM saves the has-many association
// with INSERT ... ON CONFLICT DO NOTHING / DO UPDATE SET album_id, rows
// without keys): countBeforeCreate treats the association save as an
// upsert of rows without keys and refuses it.
func TestReview2GormCreateParentWithNewChildren(t *testing.T) {
	eachDB(t, func(t *testing.T, e *env) {
		db := e.db
		reviewAlbums(t, db, 1)
		a := Album{Name: "with photos", Photos: []Photo{{Status: "active"}, {Status: "draft"}}}
		must(t, db.Create(&a).Error)
		hooksKind.check(t, db, "Create of an album with two new photos")
	})
}

// Inside db.Connection (one *gorm.DB whose statement is reused, ConnPool a
// *sql.Conn) under SkipDefaultTransaction, countCommit resets the
// statement's ConnPool to the pool (db.ConnPool) instead of the one it
// replaced: the statements after a hooked write leave the connection.
func TestReview2GormConnectionLostAfterHookedWrite(t *testing.T) {
	e := open(t, pg, &gorm.Config{SkipDefaultTransaction: true})
	db := e.db
	as := reviewAlbums(t, db, 1)
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
