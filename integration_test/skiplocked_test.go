package integration_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/hotcounter/hotcounter/gormcounter"
)

// Clip counts its plays on slot rows that no other transaction holds.
type Clip struct {
	ID    uint
	Title string
	Plays int64 `gorm:"counter:slots=4,precreate,skiplocked"`
	Saves int64 `gorm:"counter:slots=8,rollup,skiplocked"`
}

// TestSkipLockedLosesNothing: 32 x 500 skip-locked increments on one clip
// (8 x 100 on SQLite), in both modes, with a rollup loop folding the rollup
// counter meanwhile, end exact; so does a bulk increment of several clips.
func TestSkipLockedLosesNothing(t *testing.T) {
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
		// Bulk: every clip at once, from several writers; the clips other than
		// the first have no slot rows of saves yet, so part of each statement
		// takes a free slot row and part falls back to an upsert.
		for _, field := range []string{"Plays", "Saves"} {
			if done := hammer(t, 8, 20, func() error {
				tx := gormcounter.Increment(db.Model(&Clip{}).Where("id IN ?", []uint{clips[0].ID, clips[1].ID, clips[2].ID}), field, 1)
				if tx.Error == nil && tx.RowsAffected != 3 {
					return fmt.Errorf("a bulk increment of 3 clips reported %d rows", tx.RowsAffected)
				}
				return tx.Error
			}); done != 160 {
				t.Fatalf("bulk %s: %d of 160 increments succeeded", field, done)
			}
		}

		var got []Clip
		must(t, db.Clauses(gormcounter.Live).Order("id").Find(&got).Error)
		for i, c := range got {
			want := map[bool]int64{true: want + 160, false: 160}[i == 0]
			if c.Plays != want || c.Saves != want {
				t.Fatalf("clip %d after the load: plays %d, saves %d; want %d", i, c.Plays, c.Saves, want)
			}
		}
		if rows, _ := slotRows(t, db, "clip_plays_slots", "clip_id", id); rows != 4 {
			t.Fatalf("clip %d has %d slot rows of plays, want its 4 pre-created ones", id, rows)
		}
	})
}

// TestSkipLockedNeverWaitsWhileASlotIsFree: four transactions each hold an
// increment of the same clip open; with four slots, none of them waits for
// another (each runs under a lock timeout), and all four count.
func TestSkipLockedNeverWaitsWhileASlotIsFree(t *testing.T) {
	e := open(t, pg)
	db := e.db
	must(t, db.AutoMigrate(&Clip{}))
	clip := Clip{Title: "x"}
	must(t, db.Create(&clip).Error)

	const holders = 4 // = slots
	holding, release := make(chan struct{}), make(chan struct{})
	errs := make(chan error, holders)
	for range holders {
		go func() {
			errs <- db.Transaction(func(tx *gorm.DB) error {
				if err := tx.Exec("SET LOCAL lock_timeout = '2s'").Error; err != nil {
					return err
				}
				if err := gormcounter.Increment(tx.Model(&Clip{ID: clip.ID}), "Plays", 1).Error; err != nil {
					return err
				}
				holding <- struct{}{} // its slot row stays locked until release
				<-release
				return nil
			})
		}()
	}
	for i := range holders {
		select {
		case <-holding:
		case err := <-errs:
			t.Fatalf("increment %d while %d others held slot rows: %v", i+1, i, err)
		case <-time.After(10 * time.Second):
			t.Fatalf("increment %d did not complete while %d others held slot rows", i+1, i)
		}
	}
	close(release)
	for range holders {
		must(t, <-errs)
	}
	var c Clip
	must(t, db.First(&c, clip.ID).Error)
	if c.Plays != holders {
		t.Fatalf("plays = %d, want %d", c.Plays, holders)
	}
}
