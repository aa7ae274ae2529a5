package integration_test

import (
	"testing"

	"gorm.io/gorm"

	"github.com/hotcounter/hotcounter/gormcounter"
)

// GORM, MariaDB: a pre-creating sum counter whose parent lacks its slot rows
// (inserted past GORM, or before the counter existed), incremented inside
// callers' transactions. An UPDATE that finds no row keeps its gap lock
// until commit unless it ran in a savepoint that is rolled back; outside
// one, the insert that follows deadlocks with every other writer.
func TestMariaDBIncrementsInTransactionsOfMissingRows(t *testing.T) {
	e := open(t, my)
	db := e.db
	must(t, migrateAll(db))
	for _, field := range []string{"Likes", "Views"} {
		t.Run(field, func(t *testing.T) {
			failed, deadlocks := 0, innodbStatus(t, db, "Innodb_deadlocks")
			for round := 0; round < 5; round++ {
				must(t, db.Exec("INSERT INTO posts (title, views) VALUES ('imported', 0)").Error)
				id := uint(rawInt(t, db, "SELECT MAX(id) FROM posts"))
				hammerCount(32, 4, func() error {
					return db.Transaction(func(tx *gorm.DB) error {
						return gormcounter.Increment(tx.Model(&Post{ID: id}), field, 1).Error
					})
				}, &failed)
			}
			t.Logf("%s: %d of 640 transactions failed, %d deadlocks", field, failed, innodbStatus(t, db, "Innodb_deadlocks")-deadlocks)
			if failed > 0 {
				t.Fail()
			}
		})
	}
}

// hammerCount runs fn from writers goroutines each times, counting failures
// into failed instead of failing the test, and returns the successes.
func hammerCount(writers, each int, fn func() error, failed *int) int {
	type r struct{ ok, bad int }
	ch := make(chan r, writers)
	for w := 0; w < writers; w++ {
		go func() {
			var x r
			for i := 0; i < each; i++ {
				if err := fn(); err != nil {
					x.bad++
				} else {
					x.ok++
				}
			}
			ch <- x
		}()
	}
	ok := 0
	for w := 0; w < writers; w++ {
		x := <-ch
		ok += x.ok
		*failed += x.bad
	}
	return ok
}
