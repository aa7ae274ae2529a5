package entcounter

import (
	"context"
	"fmt"
	"time"

	"github.com/hotcounter/hotcounter"
	"github.com/hotcounter/hotcounter/internal/countersql"
	"github.com/hotcounter/hotcounter/internal/engine"
	"github.com/hotcounter/hotcounter/internal/entrt"
	"github.com/hotcounter/hotcounter/internal/retry"
)

// PrecreateExisting inserts the missing slot rows (n = 0) of every parent
// of the client's counters that pre-create their slots (Precreate, or the
// MySQL/MariaDB default for sum counters). New parents get theirs when
// they are created; run this once after Schema.Create (or in a migration)
// for the parents that existed before a counter was declared, as
// gormcounter's AutoMigrate does. Rows already there are left alone. It
// must not run inside a transaction.
func PrecreateExisting(ctx context.Context, src Source) error {
	r, err := clientOnly(src, "PrecreateExisting")
	if err != nil {
		return err
	}
	dl, err := r.Dialect(ctx)
	if err != nil {
		return err
	}
	s := entrt.NewSession(r)
	for _, d := range r.Defs {
		if !d.PrecreateOn(dl) {
			continue
		}
		t := d.Tables()
		err := retry.Do(ctx, engine.OwnAttempts, func() error {
			_, err := s.Exec(ctx, func(w countersql.Writer) {
				dl.PrecreateSlots(w, t, d.Slots, func(w countersql.Writer) { w.WriteString("1=1") })
			})
			return err
		})
		if err != nil {
			return fmt.Errorf("entcounter: precreate %s: %w", d.Name(), err)
		}
	}
	return nil
}

// RollupPass runs one rollup pass over every rollup counter of the client's
// schema: it folds the pending slot values into the parent columns and
// removes the slot rows it folded, a batch of parents per transaction.
//
//	err := entcounter.RollupPass(ctx, client)
//
// On PostgreSQL it never waits on a row lock: parents and slot rows that
// another transaction holds are skipped and stay pending for the next pass.
// Increments made meanwhile are folded now or next time, never twice, never
// lost. Deadlocks and serialization failures are retried. It must not run
// inside a transaction (pass the client, not a Tx).
func RollupPass(ctx context.Context, src Source) error {
	return rollup(ctx, src.HotCounter(), func() bool { return false })
}

func rollup(ctx context.Context, r entrt.Runtime, stop func() bool) error {
	st, s, err := ownPass(ctx, r, "RollupPass")
	if err != nil {
		return err
	}
	return st.RollupPass(ctx, s, r.Counters(st.Dialect, func(d entrt.Def) bool { return d.Rollup }), stop)
}

// MoveToSlots moves the values that the client's sum counters hold in a
// parent column of their own name onto slot rows, so that the column can
// be dropped: a column that existed before the field became a counter (a
// plain field.Int64("likes") replaced by entcounter.Counter("likes")), or
// that a rollup counter left when it became a sum counter. Until then
// every load adds the column to the slots, and code that still writes the
// column (likes = likes + 1) keeps counting, before, during and after the
// move.
//
//	moved, err := entcounter.MoveToSlots(ctx, client)
//
// It walks the parents in key order, a batch per transaction; for each
// parent whose column is not 0 it adds the value to the parent's slot row
// -1 (a row increments never write) and sets the column to 0, in that
// transaction, so every value moves exactly once and a load sees it before
// the move or after it. It never waits on a row lock: parents another
// transaction holds (old code writing the column) are skipped and reported
// as Busy; run it again to move them. Running it again, or after an
// interrupted run, moves only what is left. A NULL column counts as 0 and
// becomes 0 (hotcounter.Moved.Nulls). It must not run inside a transaction.
//
// Dropping the column is yours to do once no code writes it: ent's
// migrations keep columns that the schema no longer declares unless
// migrate.WithDropColumn(true) is given; or ALTER TABLE posts DROP COLUMN
// likes. Loads notice the column is gone.
func MoveToSlots(ctx context.Context, src Source) (hotcounter.Moved, error) {
	r := src.HotCounter()
	st, s, err := ownPass(ctx, r, "MoveToSlots")
	if err != nil {
		return hotcounter.Moved{}, err
	}
	return st.MoveToSlots(ctx, s, r.Counters(st.Dialect, func(d entrt.Def) bool { return !d.Rollup && d.Count == nil }))
}

// CompactPass runs one compaction pass over every sum counter of the
// client's schema. Random slots spread any parent incremented a few dozen
// times over all of its slot rows, hot or not, and every load sums all of
// them. For each parent with more than one slot row holding a value, it
// moves the values into one of those rows and deletes the others, so that
// a load sums one row per parent plus whatever arrived since. Totals never
// change for a reader. It returns what it did: parents gathered, rows
// removed, counters left alone and why (pre-created slot rows, guarded
// stock), and on PostgreSQL the slot tables' size before and after.
//
//	done, err := entcounter.CompactPass(ctx, client)
//
// On PostgreSQL it leaves a slot table no larger than it found it (see
// gormcounter.CompactPass). Like [RollupPass] it never waits on a row lock
// and must not run inside a transaction. It reads each slot table's
// primary key from end to end to find the parents it compacts, so run it
// as often as the tables' size allows (every minute, every hour), not on
// the rollup interval. PostgreSQL and SQLite only: on MySQL and MariaDB it
// returns an error wrapping [errors.ErrUnsupported] (see
// gormcounter.CompactPass for why).
func CompactPass(ctx context.Context, src Source) (hotcounter.Compacted, error) {
	r := src.HotCounter()
	st, s, err := ownPass(ctx, r, "CompactPass")
	if err != nil {
		return hotcounter.Compacted{}, err
	}
	return st.CompactPass(ctx, s, r.Counters(st.Dialect, func(d entrt.Def) bool { return !d.Rollup }))
}

// ownPass prepares a pass named name that runs transactions of its own
// (RollupPass, CompactPass): it refuses a transaction's client, and returns
// the dialect, r's session, and a function that runs its argument in a
// transaction of its own, committed when it returns nil.
func ownPass(ctx context.Context, r entrt.Runtime, name string) (engine.Store, engine.Session, error) {
	if r.InTx() {
		return engine.Store{}, nil, notInTx(name)
	}
	st, err := r.Store(ctx)
	if err != nil {
		return st, nil, err
	}
	return st, entrt.NewSession(r), nil
}

// clientOnly returns src's runtime, or an error naming the operation
// (name) when src is a transaction's client: the operation runs
// transactions of its own.
func clientOnly(src Source, name string) (entrt.Runtime, error) {
	r := src.HotCounter()
	if r.InTx() {
		return r, notInTx(name)
	}
	return r, nil
}

// notInTx is the error of an operation (name) that runs transactions of
// its own, given a transaction's client.
func notInTx(name string) error {
	return fmt.Errorf("entcounter: %s must not run inside a transaction: pass the client", name)
}

// RollupLoop runs a [RollupPass] at once and then every interval until ctx
// is done, and then returns nil. Cancelling ctx lets the batch in progress
// commit and stops before the next one. A failed pass is retried at the next
// tick; [Config.OnError] hears of it. Run it in its own goroutine:
//
//	go entcounter.RollupLoop(ctx, client, time.Second)
func RollupLoop(ctx context.Context, src Source, interval time.Duration) error {
	r := src.HotCounter()
	st, s, err := ownPass(ctx, r, "RollupLoop")
	if err != nil {
		return err
	}
	session := func(context.Context) engine.Session { return s }
	return st.RollupLoop(ctx, interval, session, r.Counters(st.Dialect, func(d entrt.Def) bool { return d.Rollup }), r.OnError())
}
