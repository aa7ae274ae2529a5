package integration_test

import (
	"context"
	"testing"

	"github.com/hotcounter/hotcounter/gormcounter"
	"github.com/hotcounter/hotcounter/integration_test/ent"
	"gorm.io/gorm"
)

// TestFirstIncrementsOfAFreshParentDoNotDeadlock is InnoDB's trap: an UPDATE
// that finds no slot row locks its gap, and the INSERT that follows
// deadlocks with other writers doing the same (MySQL bug 52020). 64
// goroutines increment a parent created an instant before. With the slots
// pre-created (the default on MariaDB) every increment is an exact-match
// UPDATE: the total is exact and the server counts no deadlock. Without
// pre-created slots the rows are inserted with ON DUPLICATE KEY UPDATE and
// no UPDATE first: the total must be exact (Increment retries a deadlock it
// owns); the deadlocks and row lock waits the server counted are logged.
func TestFirstIncrementsOfAFreshParentDoNotDeadlock(t *testing.T) {
	exclusive(t, my) // it reads the server's count of deadlocks
	e := open(t, my, pool(70))
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

// GORM, MariaDB: a pre-creating sum counter whose parent lacks its slot rows
// (inserted past GORM, or before the counter existed), incremented inside
// callers' transactions. An UPDATE that finds no row keeps its gap lock
// until commit unless it ran in a savepoint that is rolled back; outside
// one, the insert that follows deadlocks with every other writer.
func TestMariaDBIncrementsInTransactionsOfMissingRows(t *testing.T) {
	parallel(t)
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

// ent, MariaDB: the same on ent's layout (a surrogate id beside the unique
// (post_id, slot) index), where the first increments of a parent without
// slot rows, inside callers' transactions, deadlocked with each other
// (about 600 of 640 failed) while sessions shared random slot rows. Each
// session now writes its own row, updated by id once it exists: none fails.
func TestMariaDBEntIncrementsInTransactionsOfMissingRows(t *testing.T) {
	parallel(t)
	e := openEnt(t, my, true, pool(writersPool))
	ctx := context.Background()
	failed, deadlocks := 0, innodbStatus(t, e.db, "Innodb_deadlocks")
	for round := 0; round < 5; round++ {
		must(t, e.db.Exec("INSERT INTO posts (title, views) VALUES ('imported', 0)").Error)
		id := int(rawInt(t, e.db, "SELECT MAX(id) FROM posts"))
		hammerCount(32, 4, func() error {
			return inTx(ctx, e.client, func(tx *ent.Tx) error {
				return tx.Post.UpdateOneID(id).AddLikes(1).AddViews(1).Exec(ctx)
			})
		}, &failed)
	}
	t.Logf("%d of 640 transactions failed, %d deadlocks", failed, innodbStatus(t, e.db, "Innodb_deadlocks")-deadlocks)
	if failed > 0 {
		t.Fail()
	}
	var likes, views int64
	must(t, e.db.Raw("SELECT COALESCE(SUM(n), 0) FROM post_likes_slots").Row().Scan(&likes))
	must(t, e.db.Raw("SELECT COALESCE(SUM(n), 0) FROM post_views_slots").Row().Scan(&views))
	if likes != 640 || views != 640 {
		t.Fatalf("likes %d, views %d in the slot tables after 640 transactions; want 640 each", likes, views)
	}
}
