package integration_test

import (
	"testing"

	"gorm.io/gorm"

	"github.com/hotcounter/hotcounter/gormcounter"
)

// innodbStatus reads a global status counter of the MariaDB server.
func innodbStatus(t *testing.T, db *gorm.DB, name string) int64 {
	t.Helper()
	var value int64
	must(t, db.Raw("SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = ?", name).Row().Scan(&value))
	return value
}

// Burst counts likes of a fresh parent; BurstCold does too, without
// pre-created slots.
type Burst struct {
	ID    uint
	Name  string
	Likes int64 `gorm:"counter"`
}

// BurstCold has its slot rows inserted by the first increments.
type BurstCold struct {
	ID    uint
	Name  string
	Likes int64 `gorm:"counter:precreate=false"`
}

// TestFirstIncrementsOfAFreshParentDoNotDeadlock is InnoDB's trap: concurrent
// first inserts of a slot row take gap and insert-intention locks and can
// deadlock (MySQL bug 52020). 64 goroutines increment a parent created an
// instant before. With the slots pre-created (the default on MariaDB) every
// increment is an exact-match UPDATE: the total is exact and the server
// counts no deadlock. Without pre-created slots the total is still exact
// (Increment owns its transaction and retries a deadlock); the deadlocks and
// row lock waits the server counted are logged.
func TestFirstIncrementsOfAFreshParentDoNotDeadlock(t *testing.T) {
	e := open(t, my)
	db := e.db
	must(t, db.AutoMigrate(&Burst{}, &BurstCold{}))
	const writers, each = 64, 20
	for _, c := range []struct {
		name   string
		model  func(id uint) any
		strict bool // pre-created: no deadlock allowed
	}{
		{"pre-created", func(id uint) any { return &Burst{ID: id} }, true},
		{"inserted by the first increments", func(id uint) any { return &BurstCold{ID: id} }, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			for round := range 5 {
				var id uint
				if c.strict {
					b := Burst{Name: "x"}
					must(t, db.Create(&b).Error)
					id = b.ID
				} else {
					b := BurstCold{Name: "x"}
					must(t, db.Create(&b).Error)
					id = b.ID
				}
				deadlocks, waits := innodbStatus(t, db, "Innodb_deadlocks"), innodbStatus(t, db, "Innodb_row_lock_waits")
				done := hammer(t, writers, each, func() error {
					return gormcounter.Increment(db.Model(c.model(id)), "Likes", 1).Error
				})
				deadlocks = innodbStatus(t, db, "Innodb_deadlocks") - deadlocks
				waits = innodbStatus(t, db, "Innodb_row_lock_waits") - waits
				var likes int64
				var err error
				if c.strict {
					var b Burst
					err = db.First(&b, id).Error
					likes = b.Likes
				} else {
					var b BurstCold
					err = db.First(&b, id).Error
					likes = b.Likes
				}
				must(t, err)
				t.Logf("round %d: %d writers x %d: likes %d, deadlocks %d, row lock waits %d", round, writers, each, likes, deadlocks, waits)
				if done != writers*each || likes != done {
					t.Fatalf("likes %d after %d of %d increments", likes, done, writers*each)
				}
				if c.strict && deadlocks != 0 {
					t.Fatalf("%d deadlocks with pre-created slots", deadlocks)
				}
			}
		})
	}
}
