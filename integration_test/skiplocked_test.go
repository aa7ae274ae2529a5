package integration_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hotcounter/hotcounter/gormcounter"
)

// TestSkipLockedLosesNothing: 32 x 25 skip-locked increments on one clip
// (8 x 25 on SQLite), in both modes, with a rollup loop folding the rollup
// counter meanwhile, end exact; so does a bulk increment of several clips.
func TestSkipLockedLosesNothing(t *testing.T) {
	parallel(t)
	eachDB(t, func(t *testing.T, e *env) {
		db := e.db
		must(t, db.AutoMigrate(&Clip{}))
		clips := []Clip{{Title: "a"}, {Title: "b"}, {Title: "c"}}
		must(t, db.Create(&clips).Error)
		id := clips[0].ID

		ctx, stop := context.WithCancel(context.Background())
		loopDone := make(chan error, 1)
		go func() { loopDone <- gormcounter.RollupLoop(ctx, db, 2*time.Millisecond, &Clip{}) }()
		writers, each := writersFor(e.kind)
		want := int64(writers * each)
		for _, field := range []string{"Plays", "Saves"} {
			if done := hammer(t, writers, each, func() error {
				return gormcounter.Increment(db.Model(&Clip{ID: id}), field, 1).Error
			}); done != want {
				t.Fatalf("%s: %d of %d increments succeeded", field, done, want)
			}
		}
		stop()
		must(t, <-loopDone)
		// Bulk: every clip at once, from more writers than slots. Increments
		// of several parents use the key-ordered upsert even when tagged
		// skiplocked: taking free slots for some parents and falling back
		// for others would lock in no common order and deadlock.
		bulkWriters, bulkEach := 16, 10
		if e.kind == pg {
			bulkWriters, bulkEach = 32, 50
		}
		bulk := int64(bulkWriters * bulkEach)
		for _, field := range []string{"Plays", "Saves", "Shares"} {
			if done := hammer(t, bulkWriters, bulkEach, func() error {
				tx := gormcounter.Increment(db.Model(&Clip{}).Where("id IN ?", []uint{clips[0].ID, clips[1].ID, clips[2].ID}), field, 1)
				if tx.Error == nil && tx.RowsAffected != 3 {
					return fmt.Errorf("a bulk increment of 3 clips reported %d rows", tx.RowsAffected)
				}
				return tx.Error
			}); done != bulk {
				t.Fatalf("bulk %s: %d of %d increments succeeded", field, done, bulk)
			}
		}

		var got []Clip
		must(t, db.Clauses(gormcounter.Live).Order("id").Find(&got).Error)
		for i, c := range got {
			want := map[bool]int64{true: want + bulk, false: bulk}[i == 0]
			if c.Plays != want || c.Saves != want || c.Shares != bulk {
				t.Fatalf("clip %d after the load: plays %d, saves %d, shares %d; want %d, %d, %d", i, c.Plays, c.Saves, c.Shares, want, want, bulk)
			}
		}
		if rows, _ := slotRows(t, db, "clip_plays_slots", "clip_id", id); rows != 4 {
			t.Fatalf("clip %d has %d slot rows of plays, want its 4 pre-created ones", id, rows)
		}
	}, pool(writersPool))
}

// Skip-locked slots (64, pre-created) lose nothing, in autocommit and in
// transactions, spread over the slots, and a bulk increment of several
// rows counts each once. Both ORMs.
func TestSkipLockedSlotsLoseNothingInEitherORM(t *testing.T) {
	eachORM(t, func(t *testing.T, o counterORM) {
		db := o.db()
		ids := []int64{o.create(t, modelSkipPost), o.create(t, modelSkipPost), o.create(t, modelSkipPost)}
		id := ids[0]
		if n := rawInt(t, db, "SELECT COUNT(*) FROM skip_post_likes_slots WHERE skip_post_id = ?", id); n != 64 {
			t.Fatalf("%d pre-created slot rows, want 64", n)
		}
		writers, each := writersFor(o.kind())
		done := hammer(t, writers, each, func() error { return o.increment(modelSkipPost, id, "likes", 1) })
		done += hammer(t, 4, 10, func() error {
			return o.inTx(func(tx counterORM) error { return tx.increment(modelSkipPost, id, "likes", 1) })
		})
		if got := exactly(t, o, modelSkipPost, id, "likes"); got != done || done != int64(writers*each+40) {
			t.Fatalf("likes=%d after %d acknowledged increments of %d", got, done, writers*each+40)
		}
		if used := rawInt(t, db, "SELECT COUNT(*) FROM skip_post_likes_slots WHERE skip_post_id = ? AND n > 0", id); o.kind() != lite && used < 2 {
			t.Fatalf("increments used %d slot rows, want them spread", used)
		}
		// Several rows in one statement: each counted once, without deadlocks.
		bulk := hammer(t, 16, 10, func() error {
			n, err := o.incrementMany(modelSkipPost, ids, "likes", 1)
			if err == nil && n != 3 {
				return fmt.Errorf("a bulk increment of 3 rows reported %d", n)
			}
			return err
		})
		for i, id := range ids {
			want := bulk
			if i == 0 {
				want += done
			}
			if got := exactly(t, o, modelSkipPost, id, "likes"); got != want || bulk != 160 {
				t.Fatalf("row %d: likes=%d after %d of 160 bulk increments, want %d", i, got, bulk, want)
			}
		}
	}, pool(writersPool))
}

// TestSkipLockedNeverWaitsWhileASlotIsFree: four transactions each hold an
// increment of the same row open; with free slots left, none of them waits
// for another, and all four count. Both ORMs.
func TestSkipLockedNeverWaitsWhileASlotIsFree(t *testing.T) {
	eachORM(t, func(t *testing.T, o counterORM) {
		id := o.create(t, modelSkipPost)
		const holders = 4
		holding, release := make(chan struct{}, holders), make(chan struct{})
		var releaseOnce sync.Once
		letGo := func() { releaseOnce.Do(func() { close(release) }) }
		defer letGo() // a failed test must not leave transactions holding slots
		errs := make(chan error, holders)
		for range holders {
			go func() {
				errs <- o.inTx(func(tx counterORM) error {
					if err := tx.increment(modelSkipPost, id, "likes", 1); err != nil {
						return err
					}
					holding <- struct{}{} // its slot row stays locked until release
					<-release
					return nil
				})
			}()
		}
		// An increment that waited on another's slot row would wait until
		// release, which comes only once all four hold theirs.
		for i := range holders {
			select {
			case <-holding:
			case err := <-errs:
				t.Fatalf("increment %d while %d others held slot rows: %v", i+1, i, err)
			case <-time.After(10 * time.Second):
				t.Fatalf("increment %d did not complete in 10 s while %d others held slot rows", i+1, i)
			}
		}
		letGo()
		for range holders {
			must(t, <-errs)
		}
		if got := o.cached(t, modelSkipPost, id, "likes"); got != holders {
			t.Fatalf("likes = %d, want %d", got, holders)
		}
	}, on(pg, my))
}

// TestSkipLockedBulkIsExactWithoutDeadlocks: 16 writers each increment three
// tallies at once, 200 times. Each statement must count each tally once
// (RowsAffected 3), none may deadlock, and the totals must be exact. (Taking
// free slots per parent in a bulk statement counted some parents twice and
// deadlocked against the fallback; bulk increments use the key-ordered
// upsert.)
func TestSkipLockedBulkIsExactWithoutDeadlocks(t *testing.T) {
	parallel(t)
	e := open(t, pg)
	db := e.db
	must(t, db.AutoMigrate(&Tally{}))
	tallies := []Tally{{Name: "a"}, {Name: "b"}, {Name: "c"}}
	must(t, db.Create(&tallies).Error)
	ids := []uint{tallies[0].ID, tallies[1].ID, tallies[2].ID}
	const writers, each = 16, 200
	done := hammer(t, writers, each, func() error {
		tx := gormcounter.Increment(db.Model(&Tally{}).Where("id IN ?", ids), "Count", 1)
		if tx.Error == nil && tx.RowsAffected != 3 {
			return fmt.Errorf("a bulk increment of 3 tallies reported %d rows", tx.RowsAffected)
		}
		return tx.Error
	})
	var got []Tally
	must(t, db.Order("id").Find(&got).Error)
	for _, g := range got {
		if g.Count != done || done != writers*each {
			t.Fatalf("tally %d = %d after %d of %d bulk increments", g.ID, g.Count, done, writers*each)
		}
	}
}
