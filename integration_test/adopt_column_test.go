package integration_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/hotcounter/hotcounter"
	"github.com/hotcounter/hotcounter/gormcounter"
)

// oldShows creates the table as the old application had it, with the
// given likes per show (nil: NULL), and returns the shows' ids.
func oldShows(t testing.TB, db *gorm.DB, likes ...*int64) []uint {
	t.Helper()
	must(t, db.AutoMigrate(&OldShow{}))
	ids := make([]uint, len(likes))
	for i, l := range likes {
		s := OldShow{Title: fmt.Sprint("show ", i)}
		must(t, db.Create(&s).Error)
		if l == nil {
			must(t, db.Exec("UPDATE shows SET likes = NULL WHERE id = ?", s.ID).Error)
		} else {
			must(t, db.Exec("UPDATE shows SET likes = ? WHERE id = ?", *l, s.ID).Error)
		}
		ids[i] = s.ID
	}
	return ids
}

// showLikes loads the shows' likes through model M, plainly or Live.
func showLikes[M any](t *testing.T, db *gorm.DB, live bool, ids []uint, get func(*M) (uint, int64)) []int64 {
	t.Helper()
	var rows []M
	q := db
	if live {
		q = db.Clauses(gormcounter.Live)
	}
	must(t, q.Order("id").Find(&rows, ids).Error)
	got := make([]int64, len(ids))
	for i := range rows {
		id, v := get(&rows[i])
		for j, want := range ids {
			if want == id {
				got[j] = v
			}
		}
	}
	return got
}

func sumLikes(t *testing.T, db *gorm.DB, ids []uint) []int64 {
	return showLikes(t, db, false, ids, func(s *SumShow) (uint, int64) { return s.ID, s.Likes })
}

// oldIncrement is old code's increment of the column.
func oldIncrement(db *gorm.DB, id uint, n int64) error {
	return db.Model(&OldShow{ID: id}).UpdateColumn("likes", gorm.Expr("likes + ?", n)).Error
}

func TestTaggingAnExistingColumnHidesNothing(t *testing.T) {
	parallel(t)
	eachDB(t, func(t *testing.T, e *env) {
		db := e.db
		ids := oldShows(t, db, i64(1234), i64(0), nil)
		must(t, db.AutoMigrate(&SumShow{}))
		assert.Equal(t, []int64{1234, 0, 0}, sumLikes(t, db, ids), "after AutoMigrate, loads show what the column held (NULL as 0)")

		var one SumShow
		must(t, db.First(&one, ids[0]).Error)
		assert.EqualValues(t, 1234, one.Likes, "First")

		for _, id := range ids {
			must(t, gormcounter.Increment(db.Model(&SumShow{ID: id}), "Likes", 2).Error)
			must(t, oldIncrement(db, id, 1)) // old code, still running
		}
		assert.Equal(t, []int64{1237, 3, 2}, sumLikes(t, db, ids), "new and old increments both count (old code's NULL + 1 stays NULL)")
		assert.Equal(t, []int64{1237, 3, 2}, showLikes(t, db, true, ids, func(s *SumShow) (uint, int64) { return s.ID, s.Likes }), "Live")

		// A show created by new code starts at 0 in the column, so old
		// code's increments of it count.
		fresh := SumShow{Title: "new"}
		must(t, db.Create(&fresh).Error)
		must(t, oldIncrement(db, fresh.ID, 5))
		must(t, gormcounter.Increment(db.Model(&fresh), "Likes", 1).Error)
		assert.Equal(t, []int64{6}, sumLikes(t, db, []uint{fresh.ID}))

		// Another process that never migrated finds the column too.
		other := withPlugin(t, e, gormcounter.Config{})
		assert.Equal(t, []int64{1237, 3, 2}, sumLikes(t, other, ids), "a process that did not run AutoMigrate")
	})
}

func TestTaggingANotNullColumnWithoutDefault(t *testing.T) {
	parallel(t)
	eachDB(t, func(t *testing.T, e *env) {
		db := e.db
		must(t, db.AutoMigrate(&OldNotNullShow{}))
		old := OldNotNullShow{Title: "old", Likes: 40}
		must(t, db.Create(&old).Error)
		must(t, db.AutoMigrate(&SumShow{}))
		fresh := SumShow{Title: "created by new code"}
		must(t, db.Create(&fresh).Error) // the column gets the default 0
		must(t, gormcounter.Increment(db.Model(&fresh), "Likes", 1).Error)
		assert.Equal(t, []int64{40, 1}, sumLikes(t, db, []uint{old.ID, fresh.ID}))
	})
}

func TestMoveToSlotsMovesEachValueOnce(t *testing.T) {
	parallel(t)
	eachDB(t, func(t *testing.T, e *env) {
		db := e.db
		ids := oldShows(t, db, i64(1234), i64(0), nil, i64(-5))
		must(t, db.AutoMigrate(&SumShow{}))
		must(t, gormcounter.Increment(db.Model(&SumShow{ID: ids[0]}), "Likes", 1).Error)

		moved, err := gormcounter.MoveToSlots(db, &SumShow{})
		must(t, err)
		assert.Equal(t, hotcounter.Moved{Parents: 3, Amount: 1229, Nulls: 1}, moved)
		assert.Equal(t, []int64{1235, 0, 0, -5}, sumLikes(t, db, ids), "a move changes no total")
		assert.EqualValues(t, 0, rawInt(t, db, "SELECT COUNT(*) FROM shows WHERE likes <> 0 OR likes IS NULL"), "every column is 0")

		again, err := gormcounter.MoveToSlots(db, &SumShow{})
		must(t, err)
		assert.Equal(t, hotcounter.Moved{}, again, "a second run moves nothing")
		assert.Equal(t, []int64{1235, 0, 0, -5}, sumLikes(t, db, ids))

		// Old code keeps writing the column after the move: still counted,
		// and the next move takes it.
		must(t, oldIncrement(db, ids[1], 7))
		assert.Equal(t, []int64{1235, 7, 0, -5}, sumLikes(t, db, ids))
		moved, err = gormcounter.MoveToSlots(db, &SumShow{})
		must(t, err)
		assert.Equal(t, hotcounter.Moved{Parents: 1, Amount: 7}, moved)

		// The user drops the column: loads notice.
		must(t, db.Migrator().DropColumn(&OldShow{}, "likes"))
		if e.kind == pg {
			// pgx caches prepared statements per connection: the first
			// SELECT * after a column is dropped fails once (0A000), for
			// every query of the application, counters or not.
			db = withPlugin(t, e, gormcounter.Config{})
		}
		assert.Equal(t, []int64{1235, 7, 0, -5}, sumLikes(t, db, ids), "after the column is dropped")
		must(t, gormcounter.Increment(db.Model(&SumShow{ID: ids[2]}), "Likes", 1).Error)
		assert.Equal(t, []int64{1235, 7, 1, -5}, sumLikes(t, db, ids))
		moved, err = gormcounter.MoveToSlots(db, &SumShow{})
		must(t, err)
		assert.Equal(t, hotcounter.Moved{}, moved, "nothing to move without the column")
	})
}

// A counter declared over an existing column that is not an integer fails
// the migration with ErrInvalidCounter, naming the counter and what it
// needs. GORM and ent.
func TestAdoptingABadColumnIsAnError(t *testing.T) {
	eachORM(t, func(t *testing.T, o counterORM) {
		must(t, o.db().Exec("DROP TABLE post_likes_slots").Error)
		must(t, o.db().Exec("ALTER TABLE posts ADD COLUMN likes VARCHAR(20)").Error)
		err := o.migrate()
		require.Error(t, err)
		assert.ErrorIs(t, err, hotcounter.ErrInvalidCounter)
		assert.Contains(t, err.Error(), o.name(modelPost, "likes"))
		assert.Contains(t, err.Error(), "integer")
	})
}

// A move interrupted after its first batch committed leaves every total
// exact, and the next run moves the rest.
func TestMoveToSlotsAfterAnInterruptedRun(t *testing.T) {
	parallel(t)
	eachDB(t, func(t *testing.T, e *env) {
		likes := make([]*int64, 10)
		for i := range likes {
			likes[i] = i64(int64(i + 1))
		}
		ids := oldShows(t, e.db, likes...)
		db := withPlugin(t, e, gormcounter.Config{RollupBatchSize: 3})
		must(t, db.AutoMigrate(&SumShow{}))
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		// Cancel the run when it looks for its second batch: the first has
		// committed.
		var walks atomic.Int64
		must(t, db.Callback().Row().After("gorm:row").Register("test:interrupt", func(tx *gorm.DB) {
			if sql := tx.Statement.SQL.String(); strings.Contains(sql, "shows") && strings.Contains(sql, "IS NULL") && strings.Contains(sql, "LIMIT") {
				if walks.Add(1) == 2 {
					cancel()
				}
			}
		}))
		_, err := gormcounter.MoveToSlots(db.WithContext(ctx), &SumShow{})
		require.Error(t, err, "the run was interrupted")
		left := rawInt(t, db, "SELECT COUNT(*) FROM shows WHERE likes <> 0")
		assert.True(t, left > 0 && left < 10, "an interrupted run moved some, not all: %d left", left)
		want := []int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
		assert.Equal(t, want, sumLikes(t, db, ids))
		must(t, db.Callback().Row().Remove("test:interrupt"))
		moved, err := gormcounter.MoveToSlots(db, &SumShow{})
		must(t, err)
		assert.EqualValues(t, left, moved.Parents, "the next run moves what was left")
		assert.Equal(t, want, sumLikes(t, db, ids))
	})
}
