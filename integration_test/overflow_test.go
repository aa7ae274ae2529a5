package integration_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/hotcounter/hotcounter"
	"github.com/hotcounter/hotcounter/gormcounter"
)

// Ballot has counters narrower than int64: an int32 and a uint.
type Ballot struct {
	ID       uint
	Votes    int32 `gorm:"counter"`
	Credit   uint  `gorm:"counter"`
	Seen     int32 `gorm:"counter:rollup"`
	Given    uint  `gorm:"counter:rollup"`
	Comments []BallotNote
}

// BallotNote is a child, whose preload of its ballot is a load too.
type BallotNote struct {
	ID       uint
	BallotID uint
	Ballot   *Ballot
}

// TestCountersBeyondTheirFieldAreNamed: an increment whose delta an int32
// counter cannot hold (Increment, gorm.Expr, a write-behind buffer's) is
// refused before anything is written, naming model
// and field (ErrOverflow); a value beyond the field that other code wrote
// (above math.MaxInt32, a uint below zero) fails every load of the row
// with an error naming model and field instead of the driver's scan
// error (or, before, a value wrapped around), a preload and a live load
// included. GORM, every database.
func TestCountersBeyondTheirFieldAreNamed(t *testing.T) {
	eachDB(t, func(t *testing.T, e *env) {
		must(t, e.db.AutoMigrate(&Ballot{}, &BallotNote{}))
		b := Ballot{}
		must(t, e.db.Create(&b).Error)
		must(t, gormcounter.Increment(e.db.Model(&b), "Votes", 7).Error)
		err := gormcounter.Increment(e.db.Model(&b), "Votes", math.MaxInt32+1).Error
		if !errors.Is(err, hotcounter.ErrOverflow) || !strings.Contains(err.Error(), "Ballot.Votes") {
			t.Fatalf("an increment of an int32 counter by MaxInt32+1: %v, want ErrOverflow naming Ballot.Votes", err)
		}
		err = e.db.Model(&b).UpdateColumn("votes", gorm.Expr("votes + ?", int64(math.MaxInt32)+1)).Error
		if !errors.Is(err, hotcounter.ErrOverflow) {
			t.Fatalf("gorm.Expr adding MaxInt32+1 to an int32 counter: %v, want ErrOverflow", err)
		}
		buf, err := gormcounter.NewBuffer(context.Background(), e.db, hotcounter.BufferConfig{Interval: time.Hour})
		must(t, err)
		if err := buf.Increment(context.Background(), &Ballot{ID: b.ID}, "Votes", math.MaxInt32+1); !errors.Is(err, hotcounter.ErrOverflow) {
			t.Fatalf("a buffered increment of an int32 counter by MaxInt32+1: %v, want ErrOverflow", err)
		}
		must(t, buf.Close(context.Background()))
		var got Ballot
		must(t, e.db.First(&got, b.ID).Error)
		if got.Votes != 7 {
			t.Fatalf("votes %d after the refused increments, want 7 (nothing written)", got.Votes)
		}
		must(t, e.db.Create(&BallotNote{BallotID: b.ID}).Error)

		// Other code writes what the fields cannot hold.
		must(t, e.db.Exec("UPDATE ballot_votes_slots SET n = ? WHERE ballot_id = ?", int64(math.MaxInt32), b.ID).Error)
		must(t, gormcounter.Increment(e.db.Model(&b), "Votes", 1).Error) // concurrent increments near the bound are not refused
		for name, load := range map[string]func() error{
			"First":   func() error { var x Ballot; return e.db.First(&x, b.ID).Error },
			"Find":    func() error { var x []Ballot; return e.db.Find(&x).Error },
			"Preload": func() error { var x []BallotNote; return e.db.Preload("Ballot").Find(&x).Error },
		} {
			if err := load(); !errors.Is(err, hotcounter.ErrOverflow) || !strings.Contains(err.Error(), "Ballot.Votes") {
				t.Errorf("%s of a ballot with 2^31 votes: %v, want ErrOverflow naming Ballot.Votes", name, err)
			}
		}
		must(t, e.db.Exec("DELETE FROM ballot_votes_slots WHERE ballot_id = ?", b.ID).Error)
		// A rollup counter's live value is read in the load's own
		// statement: column + slots beyond an int32.
		must(t, gormcounter.Increment(e.db.Model(&b), "Seen", math.MaxInt32).Error)
		must(t, gormcounter.RollupPass(e.db, &Ballot{}))
		must(t, gormcounter.Increment(e.db.Model(&b), "Seen", 1).Error)
		if err := e.db.WithContext(gormcounter.WithLive(context.Background())).First(&Ballot{}, b.ID).Error; !errors.Is(err, hotcounter.ErrOverflow) || !strings.Contains(err.Error(), "Ballot.Seen") {
			t.Errorf("a live load of a rollup int32 counter at 2^31: %v, want ErrOverflow naming Ballot.Seen", err)
		}
		must(t, e.db.Exec("DELETE FROM ballot_seen_slots WHERE ballot_id = ?", b.ID).Error)
		if e.kind == lite {
			// SQLite's integer column holds what an int32 cannot, and GORM
			// scans the rollup column itself.
			must(t, e.db.Exec("UPDATE ballots SET seen = ? WHERE id = ?", int64(math.MaxInt32)+1, b.ID).Error)
			if err := e.db.First(&Ballot{}, b.ID).Error; !errors.Is(err, hotcounter.ErrOverflow) || !strings.Contains(err.Error(), "Ballot.Seen") {
				t.Errorf("a load of a rollup int32 column at 2^31: %v, want ErrOverflow naming Ballot.Seen", err)
			}
			must(t, e.db.Exec("UPDATE ballots SET seen = 0 WHERE id = ?", b.ID).Error)
		}
		must(t, e.db.Exec("DELETE FROM ballot_credit_slots WHERE ballot_id = ?", b.ID).Error) // MariaDB pre-creates them
		must(t, e.db.Exec("INSERT INTO ballot_credit_slots (ballot_id, slot, n) VALUES (?, 0, -4)", b.ID).Error)
		if err := e.db.First(&Ballot{}, b.ID).Error; !errors.Is(err, hotcounter.ErrOverflow) || !strings.Contains(err.Error(), "Ballot.Credit") {
			t.Errorf("a load of a uint counter at -4: %v, want ErrOverflow naming Ballot.Credit", err)
		}
	})
}

// TestAnUnsignedCounterNeverGoesBelowZero: a decrease of a uint counter
// is refused when less is left, naming model and field, with nothing
// written: Increment, gorm.Expr, a Where update, and 16 writers racing for
// the last 10 units (exactly 10 win). A buffer refuses any decrease of it
// (it acknowledges before it could check), and so does a rollup uint
// counter, whose column a decrease cannot check as it writes. GORM, every
// database (ent's counters are int64).
func TestAnUnsignedCounterNeverGoesBelowZero(t *testing.T) {
	eachDB(t, func(t *testing.T, e *env) {
		must(t, e.db.AutoMigrate(&Ballot{}, &BallotNote{}))
		b := Ballot{}
		must(t, e.db.Create(&b).Error)
		credit := func() uint {
			t.Helper()
			var got Ballot
			must(t, e.db.First(&got, b.ID).Error)
			return got.Credit
		}
		refused := func(what string, err error) {
			t.Helper()
			if !errors.Is(err, hotcounter.ErrOverflow) || !strings.Contains(err.Error(), "Ballot.Credit") {
				t.Fatalf("%s: %v, want ErrOverflow naming Ballot.Credit", what, err)
			}
		}
		must(t, gormcounter.Increment(e.db.Model(&b), "Credit", 3).Error)
		refused("a decrease of 4 from 3", gormcounter.Increment(e.db.Model(&b), "Credit", -4).Error)
		refused("gorm.Expr taking 4 from 3", e.db.Model(&b).UpdateColumn("credit", gorm.Expr("credit - ?", 4)).Error)
		refused("a Where update taking 4 from 3", e.db.Model(&Ballot{}).Where("id = ?", b.ID).UpdateColumn("credit", gorm.Expr("credit - ?", 4)).Error)
		if got := credit(); got != 3 {
			t.Fatalf("credit %d after refused decreases, want 3 (nothing written)", got)
		}
		must(t, e.db.Model(&Ballot{}).Where("id = ?", b.ID).UpdateColumn("credit", gorm.Expr("credit - ?", 1)).Error)
		must(t, gormcounter.Increment(e.db.Model(&b), "Credit", -2).Error)
		if got := credit(); got != 0 {
			t.Fatalf("credit %d after taking 3 from 3, want 0", got)
		}

		must(t, gormcounter.Increment(e.db.Model(&b), "Credit", 10).Error)
		var won, lost atomic.Int64
		var wg sync.WaitGroup
		for range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				err := gormcounter.Increment(e.db.Model(&Ballot{ID: b.ID}), "Credit", -1).Error
				switch {
				case err == nil:
					won.Add(1)
				case errors.Is(err, hotcounter.ErrOverflow):
					lost.Add(1)
				default:
					t.Errorf("a racing decrease: %v", err)
				}
			}()
		}
		wg.Wait()
		if got := credit(); won.Load() != 10 || lost.Load() != 6 || got != 0 {
			t.Fatalf("16 decreases of 1 from 10: %d took, %d refused, credit %d; want 10, 6, 0", won.Load(), lost.Load(), got)
		}

		buf, err := gormcounter.NewBuffer(context.Background(), e.db, hotcounter.BufferConfig{Interval: time.Hour})
		must(t, err)
		refused("a buffered decrease", buf.Increment(context.Background(), &Ballot{ID: b.ID}, "Credit", -1))
		must(t, buf.Close(context.Background()))
		must(t, gormcounter.Increment(e.db.Model(&b), "Given", 5).Error)
		err = gormcounter.Increment(e.db.Model(&b), "Given", -1).Error
		if !errors.Is(err, hotcounter.ErrOverflow) || !strings.Contains(err.Error(), "Ballot.Given") {
			t.Fatalf("a decrease of a rollup uint counter: %v, want ErrOverflow naming Ballot.Given", err)
		}
		var got Ballot
		must(t, e.db.WithContext(gormcounter.WithLive(context.Background())).First(&got, b.ID).Error)
		if got.Given != 5 || got.Credit != 0 {
			t.Fatalf("given %d, credit %d after refused decreases, want 5 and 0", got.Given, got.Credit)
		}
	})
}
