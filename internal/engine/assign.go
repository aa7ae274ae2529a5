package engine

import (
	"context"
	"fmt"

	"github.com/hotcounter/hotcounter"
	"github.com/hotcounter/hotcounter/internal/countersql"
	"github.com/hotcounter/hotcounter/internal/spec"
)

// What a write of a value means, the same in both ORMs: a new row's
// counter value is its starting total (Start); an explicit assignment of
// a value sets the total (Set). Both are written here, once, for GORM's
// callbacks and ent's hooks.

// Target is a counter as the writes of a value see it.
type Target struct {
	Table  countersql.Table
	Mode   spec.Mode
	Slots  int
	Widths *Widths // slots=auto, or nil
	// Guarded: the value is stock, spread over the slots as a restock is,
	// so that takes find it in every row.
	Guarded bool
	// Precreate: a new parent gets every slot row at once (sum counters
	// that pre-create their slots).
	Precreate bool
	// Read is what adds up to the value in this database (its tables, and
	// a column it was adopted over): Set clears all of it.
	Read countersql.Sources
}

// Start writes the starting values of parents just created in s's
// transaction (or committed by a statement of their own): their
// pre-created slot rows, and values[i], where not zero, as the starting
// total of keys[i]. A counter with a column (rollup, append) took its
// value with the row: only its pre-created rows are written, if any.
func Start(ctx context.Context, s Session, d Dialect, t Target, keys []any, values []int64) error {
	if t.Guarded {
		for _, v := range values {
			if v < 0 {
				return fmt.Errorf("%w: it cannot start at %d", hotcounter.ErrNegativeGuarded, v)
			}
		}
	}
	start := func(tx Session) error {
		if t.Precreate {
			if err := eachChunk(keys, func(k []any) error {
				_, err := tx.Exec(ctx, func(w countersql.Writer) { d.PrecreateSlots(w, t.Table, t.Slots, d.KeyIn(t.Table, k)) })
				return err
			}); err != nil {
				return err
			}
		}
		if t.Mode.HasColumn() {
			return nil
		}
		for v, ks := range byValue(keys, values) {
			if err := t.add(ctx, tx, d, ks, v); err != nil {
				return err
			}
		}
		return nil
	}
	if !t.Precreate && !t.Mode.HasColumn() && len(byValue(keys, values)) <= 1 {
		return start(s) // one statement at most (or a restock, which owns its own)
	}
	return OwnTransaction(ctx, s, start)
}

// Set makes total the value of the counter of each parent in keys that
// exists, exactly, and returns how many it set. The parents are locked
// first (FOR NO KEY UPDATE, which no increment waits for), so that two
// assignments run one after the other; every slot row (and delta row, and
// a column the counter was adopted over) goes, and the total takes their
// place: in the column of a rollup counter, else in one slot row (a
// guarded counter's spread over its slots). An increment that commits
// after the assignment adds to the total. It runs in s's transaction, or
// in one of its own.
func Set(ctx context.Context, s Session, d Dialect, t Target, keys []any, total int64) (int64, error) {
	if len(keys) == 0 {
		return 0, nil
	}
	if t.Guarded && total < 0 {
		return 0, fmt.Errorf("%w: it cannot be set to %d", hotcounter.ErrNegativeGuarded, total)
	}
	tt := t.Table
	var found []any
	err := OwnTransaction(ctx, s, func(tx Session) error {
		found = found[:0]
		// The parents that exist, locked where the database locks rows.
		if err := eachChunk(keys, func(k []any) error {
			got, err := QueryKeys(ctx, tx, func(w countersql.Writer) { d.Driver.LockForSet(w, tt, k) })
			found = append(found, got...)
			return err
		}); err != nil || len(found) == 0 {
			return err
		}
		exec := func(stmt func(w countersql.Writer, keys []any)) error {
			return eachChunk(found, func(k []any) error {
				_, err := tx.Exec(ctx, func(w countersql.Writer) { stmt(w, k) })
				return err
			})
		}
		if err := exec(func(w countersql.Writer, k []any) { d.DeleteOwners(w, tt, k) }); err != nil {
			return err
		}
		for _, other := range t.Read.Tables[min(1, len(t.Read.Tables)):] {
			o := tt
			o.Slots = other
			if err := exec(func(w countersql.Writer, k []any) { d.DeleteOwners(w, o, k) }); err != nil {
				return err
			}
		}
		if t.Mode == spec.Rollup {
			return exec(func(w countersql.Writer, k []any) { d.SetColumn(w, tt, k, total) })
		}
		if t.Read.Column {
			// An append counter's folded column, or the column a sum
			// counter was adopted over.
			if err := exec(func(w countersql.Writer, k []any) { d.SetColumn(w, tt, k, 0) }); err != nil {
				return err
			}
		}
		if t.Precreate {
			if err := exec(func(w countersql.Writer, k []any) { d.PrecreateSlots(w, tt, t.Slots, d.KeyIn(tt, k)) }); err != nil {
				return err
			}
		}
		if total == 0 {
			return nil
		}
		return t.add(ctx, tx, d, found, total)
	})
	return int64(len(found)), err
}

// add adds v to the counter of keys: spread over the slots of each parent
// for a guarded counter, else one increment of them all.
func (t Target) add(ctx context.Context, s Session, d Dialect, keys []any, v int64) error {
	if t.Guarded && v > 0 {
		for _, k := range keys {
			if err := Restock(ctx, s, d, t.Table, t.Slots, k, v); err != nil {
				return err
			}
		}
		return nil
	}
	_, err := Apply(ctx, s, d, Increment{Table: t.Table, Mode: t.Mode, Slots: t.Slots, Widths: t.Widths, Keys: keys, Delta: v})
	return err
}

// byValue groups keys by their non-zero value.
func byValue(keys []any, values []int64) map[int64][]any {
	out := map[int64][]any{}
	for i, k := range keys {
		if values[i] != 0 {
			out[values[i]] = append(out[values[i]], k)
		}
	}
	return out
}

// eachChunk calls fn with keys, FillChunk at a time.
func eachChunk(keys []any, fn func(keys []any) error) error {
	for start := 0; start < len(keys); start += FillChunk {
		if err := fn(keys[start:min(start+FillChunk, len(keys))]); err != nil {
			return err
		}
	}
	return nil
}
