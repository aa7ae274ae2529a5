package integration_test

import (
	"context"
	"testing"
	"time"

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

// TestUpdateOfSomePostsWithACounterTouchesOnlyThem: Updates on a slice of
// posts with a Where, setting a column and incrementing a counter, changes
// exactly those posts. (On MariaDB the increment's savepoint once ran on the
// update's own statement and dropped the slice's key condition: every post
// matching the Where got the new title.)
func TestUpdateOfSomePostsWithACounterTouchesOnlyThem(t *testing.T) {
	eachDB(t, func(t *testing.T, e *env) {
		db := e.db
		posts := seed(t, db, 3)
		before := exact(t, db, posts[2].ID)
		some := []Post{{ID: posts[0].ID}, {ID: posts[1].ID}}
		tx := db.Model(&some).Where("title = ?", "post").Updates(map[string]any{"title": "changed", "views": gorm.Expr("views + ?", 1)})
		must(t, tx.Error)
		for i, p := range posts {
			got := exact(t, db, p.ID)
			changed := i < 2
			if (got.Title == "changed") != changed {
				t.Fatalf("post %d: title %q (should change: %v)", i, got.Title, changed)
			}
			if i == 2 && got.Views != before.Views {
				t.Fatalf("post 3: views %d, want %d", got.Views, before.Views)
			}
		}
		if v := exact(t, db, posts[0].ID).Views; v != 10+1 {
			t.Fatalf("post 1: views %d, want 11", v)
		}
	})
}

// Wide has the most slots a counter may have, in both modes.
type Wide struct {
	ID    uint
	Name  string
	Likes int64 `gorm:"counter:slots=1024"`
	Views int64 `gorm:"counter:slots=1024,rollup"`
}

// TestTheWidestCounters: 1,024 slots are pre-created with the parent where
// that is the default (MariaDB: past its 1,000-row limit on recursive CTEs),
// and a rollup pass folds 40 parents with every slot pending (40,960 rows,
// past MySQL's 65,535 placeholders if deleted in one statement).
func TestTheWidestCounters(t *testing.T) {
	eachDB(t, func(t *testing.T, e *env) {
		db := e.db
		must(t, db.AutoMigrate(&Wide{}))
		parents := make([]Wide, 40)
		for i := range parents {
			parents[i].Name = "w"
			must(t, db.Create(&parents[i]).Error)
		}
		wantRows := int64(0)
		if e.kind == my {
			wantRows = 40 * 1024
		}
		if rows := rawInt(t, db, "SELECT COUNT(*) FROM wide_likes_slots"); rows != wantRows {
			t.Fatalf("%d slot rows of likes pre-created, want %d", rows, wantRows)
		}
		// Every slot of every parent pending: 40 x 1024 rows holding 1 each.
		for _, p := range parents {
			values := make([]map[string]any, 1024)
			for s := range values {
				values[s] = map[string]any{"wide_id": p.ID, "slot": s, "n": 1}
			}
			must(t, db.Table("wide_views_slots").CreateInBatches(values, 256).Error)
		}
		must(t, gormcounter.Rollup(db, &Wide{}))
		// MySQL folds empty the slot rows (n = 0) and keep them.
		if pending := rawInt(t, db, "SELECT COUNT(*) FROM wide_views_slots WHERE n <> 0"); pending != 0 {
			t.Fatalf("%d slot rows still pending after a pass", pending)
		}
		var got []Wide
		must(t, db.Find(&got).Error)
		for _, w := range got {
			if w.Views != 1024 {
				t.Fatalf("wide %d: views %d, want 1024", w.ID, w.Views)
			}
		}
	})
}

// TestConcurrentUpdateColumnOnARollupCounter: the rewritten UpdateColumn
// form runs in GORM's default transaction, where hotcounter cannot retry.
// On MariaDB a rollup counter's slot rows are inserted by its increments
// (a pass removes them), which is where InnoDB deadlocks: inserting without
// updating first keeps the gap free, so these must end exact and without
// failures.
func TestConcurrentUpdateColumnOnARollupCounter(t *testing.T) {
	eachDB(t, func(t *testing.T, e *env) {
		db := e.db
		must(t, migrateAll(db))
		post := newPost(t, db, "p")
		writers, each := 32, 10
		if e.kind == lite {
			writers = 8
		}
		done := hammer(t, writers, each, func() error {
			return db.Model(&Post{ID: post.ID}).UpdateColumn("views", gorm.Expr("views + ?", 1)).Error
		})
		if got := exact(t, db, post.ID).Views; got != done || done != int64(writers*each) {
			t.Fatalf("views %d after %d of %d updates", got, done, writers*each)
		}
	})
}

// TestRollupIncrementsDoNotLockTheParent: once a rollup counter's slot row
// exists, incrementing it on MariaDB is an UPDATE of that row alone, even
// inside GORM's default transaction: a transaction that has updated the post
// (holding its row lock) does not hold it up. (An INSERT ... ON DUPLICATE
// KEY UPDATE would: its foreign key check locks the parent even when the
// row exists.)
func TestRollupIncrementsDoNotLockTheParent(t *testing.T) {
	e := open(t, my)
	db := e.db
	must(t, migrateAll(db))
	post := newPost(t, db, "p")
	// Give every slot row of views a value, so that any slot picked exists.
	for s := range 64 {
		must(t, db.Exec("INSERT INTO post_views_slots (post_id, slot, n) VALUES (?, ?, 0)", post.ID, s).Error)
	}
	holder := db.Begin()
	must(t, holder.Exec("UPDATE posts SET title = 'held' WHERE id = ?", post.ID).Error)
	defer holder.Rollback()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for range 20 {
		must(t, gormcounter.Increment(db.WithContext(ctx).Model(&Post{ID: post.ID}), "Views", 1).Error)
		must(t, db.WithContext(ctx).Model(&Post{ID: post.ID}).UpdateColumn("views", gorm.Expr("views + ?", 1)).Error)
	}
	must(t, holder.Rollback().Error)
	if got := exact(t, db, post.ID).Views; got != 40 {
		t.Fatalf("views = %d, want 40", got)
	}
}

// TestIncrementOfADeletedPostWithTranslateError: a post that is gone counts
// as no row, as GORM's UPDATE would count it, also when GORM translates the
// foreign key error of the slot row's insert.
func TestIncrementOfADeletedPostWithTranslateError(t *testing.T) {
	for _, k := range allKinds {
		t.Run(string(k), func(t *testing.T) {
			e := open(t, k, &gorm.Config{TranslateError: true})
			db := e.db
			must(t, migrateAll(db))
			post := newPost(t, db, "gone")
			must(t, db.Delete(&Post{ID: post.ID}).Error)
			for _, field := range []string{"Likes", "Views"} {
				tx := gormcounter.Increment(db.Model(&Post{ID: post.ID}), field, 1)
				if tx.Error != nil || tx.RowsAffected != 0 {
					t.Fatalf("%s of a deleted post: %v, %d rows", field, tx.Error, tx.RowsAffected)
				}
			}
		})
	}
}
