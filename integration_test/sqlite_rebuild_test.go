package integration_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/hotcounter/hotcounter/gormcounter"
)

// SQLite alters a table by copying it, dropping it and renaming the copy.
// With foreign keys enforced, dropping a parent table cascades to its slot
// tables and deletes every count; GORM's migrator turns them off for some
// rebuilds (not DropColumn) with a PRAGMA that holds on one pooled
// connection only. The plugin's migrator runs every rebuild on one
// connection with foreign keys off: the counts survive, and foreign keys
// are on again afterwards.
func TestSQLiteTableRebuildKeepsCounts(t *testing.T) {
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
