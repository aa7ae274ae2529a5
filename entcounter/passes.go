package entcounter

import (
	"context"
	"fmt"
	"log"
	"time"

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
	dl, err := r.Dialect()
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
	dl, s, inTx, err := ownPass(r, "RollupPass")
	if err != nil {
		return err
	}
	for _, d := range r.Defs {
		if !d.Rollup {
			continue
		}
		t := d.Tables()
		start := time.Now()
		parents, err := engine.RollupCounted(ctx, s, dl, t, d.Append, r.Settings().BatchSize, stop, inTx)
		r.Observer().Pass(ctx, "rollup", d.Table, d.Field, start, parents, err)
		if err != nil {
			return fmt.Errorf("entcounter: rollup %s: %w", d.Name(), err)
		}
		// The table of the other kind, if a change of mode left one.
		st, err := r.Storages().Get(ctx, s, dl, t)
		if err != nil {
			return fmt.Errorf("entcounter: rollup %s: %w", d.Name(), err)
		}
		if st.Other(t) {
			other := t
			other.Slots = t.Other
			if err := engine.Rollup(ctx, s, dl, other, !d.Append, r.Settings().BatchSize, stop, inTx); err != nil {
				return fmt.Errorf("entcounter: rollup %s: fold %s: %w", d.Name(), other.Slots, err)
			}
		}
	}
	return nil
}

// Moved is what [MoveToSlots] did; see its fields.
type Moved = engine.Moved

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
// becomes 0 (Moved.Nulls). It must not run inside a transaction.
//
// Dropping the column is yours to do once no code writes it: ent's
// migrations keep columns that the schema no longer declares unless
// migrate.WithDropColumn(true) is given; or ALTER TABLE posts DROP COLUMN
// likes. Loads notice the column is gone.
func MoveToSlots(ctx context.Context, src Source) (Moved, error) {
	r := src.HotCounter()
	dl, s, inTx, err := ownPass(r, "MoveToSlots")
	if err != nil {
		return Moved{}, err
	}
	var total Moved
	for _, d := range r.Defs {
		if d.Rollup || d.Count != nil {
			continue
		}
		t := d.Tables()
		r.Storages().Forget(t)
		st, err := r.Storages().Get(ctx, s, dl, t)
		if err != nil {
			return total, fmt.Errorf("entcounter: MoveToSlots %s: %w", d.Name(), err)
		}
		if !st.Column {
			continue
		}
		if !st.Integer() {
			return total, fmt.Errorf("entcounter: MoveToSlots %s: %w: %s.%s is %s", d.Name(), engine.ErrColumnType, t.Parent, t.Column, st.Type)
		}
		if st.Other(t) {
			deltas := t
			deltas.Slots = t.Other
			if err := engine.Rollup(ctx, s, dl, deltas, true, r.Settings().BatchSize, func() bool { return false }, inTx); err != nil {
				return total, fmt.Errorf("entcounter: MoveToSlots %s: fold %s: %w", d.Name(), deltas.Slots, err)
			}
		}
		m, err := engine.MoveColumns(ctx, s, dl, t, r.Settings().BatchSize, inTx)
		total.Add(m)
		if err != nil {
			return total, fmt.Errorf("entcounter: MoveToSlots %s: %w", d.Name(), err)
		}
	}
	return total, nil
}

// Compacted is what [CompactPass] did; see its fields.
type Compacted = engine.Compacted

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
func CompactPass(ctx context.Context, src Source) (Compacted, error) {
	r := src.HotCounter()
	dl, s, inTx, err := ownPass(r, "CompactPass")
	if err != nil {
		return Compacted{}, err
	}
	var targets []engine.Compactable
	for _, d := range r.Defs {
		if !d.Rollup {
			targets = append(targets, engine.Compactable{Name: d.Name(), Field: d.Field, Options: d.Options(), Precreate: d.PrecreateOn(dl), Table: d.Tables()})
		}
	}
	return engine.CompactPass(ctx, s, dl, targets, r.Settings().BatchSize, inTx, r.Observer(), "entcounter")
}

// ownPass prepares a pass named name that runs transactions of its own
// (RollupPass, CompactPass): it refuses a transaction's client, and returns
// the dialect, r's session, and a function that runs its argument in a
// transaction of its own, committed when it returns nil.
func ownPass(r entrt.Runtime, name string) (countersql.Dialect, engine.Conn, func(ctx context.Context, fn func(engine.Conn) error) error, error) {
	if r.InTx() {
		return countersql.Dialect{}, nil, nil, notInTx(name)
	}
	dl, err := r.Dialect()
	if err != nil {
		return countersql.Dialect{}, nil, nil, err
	}
	s := entrt.NewSession(r)
	return dl, s, engine.PassTransaction(s, dl), nil
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
// tick; onError hears of it, or, when nil, the standard logger (ent's
// default). Run it in its own goroutine:
//
//	go entcounter.RollupLoop(ctx, client, time.Second, nil)
func RollupLoop(ctx context.Context, src Source, interval time.Duration, onError func(error)) error {
	if interval <= 0 {
		return fmt.Errorf("entcounter: RollupLoop: interval must be positive, got %v", interval)
	}
	r, err := clientOnly(src, "RollupLoop")
	if err != nil {
		return err
	}
	work := context.WithoutCancel(ctx)
	stop := func() bool { return ctx.Err() != nil }
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if err := rollup(work, r, stop); err != nil {
			if onError != nil {
				onError(err)
			} else {
				log.Printf("entcounter: rollup pass failed (will retry): %v", err)
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
