package engine

import (
	"context"
	"math/rand/v2"

	"github.com/hotcounter/hotcounter/internal/countersql"
	"github.com/hotcounter/hotcounter/internal/spec"
)

// Increment is one increment of a counter of some parents, as either ORM
// asks for it.
type Increment struct {
	Table countersql.Table
	Mode  spec.Mode
	// Slots is the counter's slot count; each Apply draws one slot at
	// random for all its parents.
	Slots int
	// Widths, when set (slots=auto), draws the slot of an increment of one
	// parent instead, from the width the parent has learned; increments of
	// several parents write slot 0.
	Widths *Widths
	// SkipLocked takes a slot row of the one parent that no other
	// transaction holds (where the database can), instead of a random one.
	SkipLocked bool
	// Guarded: the counter is stock; IncrementOne spreads an increase of
	// one parent over its slots (Restock).
	Guarded bool
	// The parents: Key, when nothing but its primary key selects the one
	// parent; else Keys; else those that Cond selects.
	Key   any
	Keys  []any
	Cond  func(countersql.Writer)
	Delta int64
}

// Combines reports whether in may share a statement with concurrent
// increments of the same counter of the same rows (internal/combine), for
// both ORMs: not inside a transaction (each increment must roll back
// alone), not for an append counter (a delta row per increment), not a
// guarded counter's restock (spread over the slots), and not an increment
// of nothing. The ORMs add what is theirs alone (GORM: a dry run, a
// dedicated connection, a caller's own logger) and the group its setting
// (a negative InFlight combines nothing).
func (in Increment) Combines(inTx bool) bool {
	return !inTx && in.Mode != spec.Append && !(in.Guarded && in.Delta > 0) && in.Delta != 0
}

// Apply writes in through s, in s's transaction or, outside one, in
// autocommit statements that are retried while the database aborts them for
// a transient reason (a failed statement changed nothing), or in a
// transaction of its own when it takes several statements. It returns how
// many parents it incremented. The write, by mode (slots or delta rows) and
// slot choice (random, the transaction's own, skip-locked), is the
// database's (its Driver, internal/driver), for both ORMs.
func Apply(ctx context.Context, s Session, d Dialect, in Increment) (int64, error) {
	key, _ := in.One()
	slot, release := DrawSlot(in.Widths, in.Slots, key)
	defer release()
	return d.Driver.Increment(ctx, s, in, slot)
}

// IncrementOne writes in, an increment of the one parent in.Key, and
// returns how many parents it incremented (0 when there is none). It is the
// write both ORMs send for one parent; it chooses among:
//
//   - a guarded counter's increase, spread over the slots so that every
//     row holds stock for takes (Restock);
//   - where read is not nil (the caller shows the new total) and the
//     database returns it (PostgreSQL), for a sum counter that is not
//     guarded and takes a random slot: one statement that adds to the slot
//     and returns the parent's new total, summed from what read returns
//     (hasTotal);
//   - else Apply.
func IncrementOne(ctx context.Context, s Session, d Dialect, in Increment, read func(context.Context) (countersql.Sources, error)) (n, total int64, hasTotal bool, err error) {
	switch {
	case in.Guarded && in.Delta > 0:
		return 1, 0, false, Restock(ctx, s, d, in.Table, in.Slots, in.Key, in.Delta)
	case read != nil:
		total, found, wrote, err := d.Driver.IncrementShowing(ctx, s, in, read)
		if err != nil || (wrote && !found) {
			return 0, 0, false, err
		}
		if wrote {
			return 1, total, true, nil
		}
	}
	n, err = Apply(ctx, s, d, in)
	return n, 0, false, err
}

// DrawSlot chooses the slot of one increment statement: at random among
// slots, or with ws (slots=auto) from the width the parent with key key has
// learned (slot 0 when key is nil: several parents). Call release once the
// statement has finished.
func DrawSlot(ws *Widths, slots int, key any) (slot int, release func()) {
	switch {
	case ws == nil:
		return rand.IntN(max(slots, 1)), func() {}
	case key == nil:
		return 0, func() {}
	}
	return ws.Acquire(key)
}

// One returns the key of in's one parent, when in names one by its key.
func (in Increment) One() (any, bool) {
	switch {
	case in.Key != nil:
		return in.Key, true
	case len(in.Keys) == 1:
		return in.Keys[0], true
	}
	return nil, false
}

// Condition is the condition that selects in's parents.
func (in Increment) Condition(d countersql.Dialect) func(countersql.Writer) {
	switch {
	case in.Key != nil:
		return d.KeyIn(in.Table, []any{in.Key})
	case in.Keys != nil:
		return d.KeyIn(in.Table, in.Keys)
	}
	return in.Cond
}

// ExecIncrement runs stmt, one statement for in's parents (or one per chunk of
// FillChunk keys), and returns how many rows they wrote.
func ExecIncrement(ctx context.Context, s Session, d countersql.Dialect, in Increment, stmt func(w countersql.Writer, cond func(countersql.Writer))) (int64, error) {
	var n int64
	run := func(s Session) error {
		n = 0
		if in.Keys == nil || len(in.Keys) <= FillChunk {
			done, err := s.Exec(ctx, func(w countersql.Writer) { stmt(w, in.Condition(d)) })
			n = done
			return err
		}
		for start := 0; start < len(in.Keys); start += FillChunk {
			chunk := in.Keys[start:min(start+FillChunk, len(in.Keys))]
			done, err := s.Exec(ctx, func(w countersql.Writer) { stmt(w, d.KeyIn(in.Table, chunk)) })
			n += done
			if err != nil {
				return err
			}
		}
		return nil
	}
	var err error
	switch {
	case s.InTx():
		err = run(s)
	case in.Keys == nil || len(in.Keys) <= FillChunk: // one autocommit statement
		err = OwnStatement(ctx, s, func() error { return run(s) })
	default:
		err = OwnTransaction(ctx, s, run)
	}
	return n, err
}

// AddEach adds each of amounts to a slot of its parent in keys (sorted by
// SortKeys), in s's transaction: a batch of increments of different
// amounts, as the write-behind flush writes them, each the database's way
// (its Driver). A parent missing from its table is passed over.
func AddEach(ctx context.Context, s Session, d Dialect, t countersql.Table, slots int, keys []any, amounts []int64) error {
	return d.Driver.AddEach(ctx, s, t, slots, keys, amounts)
}

// SkippingGone runs write over the n items of a batch, at most FillChunk
// at a time, in s's transaction, each chunk in a savepoint: where it fails
// because a parent is gone (its foreign key), it writes each half apart,
// down to the items that fail alone, which it passes over: a few
// statements per deleted parent, not one per item.
func SkippingGone(ctx context.Context, s Session, n int, write func(from, to int) error) error {
	gone := func(err error) bool { return ForeignKeyViolation(err) || s.ParentGone(err) }
	var split func(from, to int) error
	split = func(from, to int) error {
		err := InSavepoint(ctx, s, "hc_flush", func() error { return write(from, to) })
		if !gone(err) || to-from == 1 {
			if gone(err) {
				return nil // its parent is gone: what it would write goes with it
			}
			return err
		}
		mid := from + (to-from)/2
		if err := split(from, mid); err != nil {
			return err
		}
		return split(mid, to)
	}
	for start := 0; start < n; start += FillChunk {
		if err := split(start, min(start+FillChunk, n)); err != nil {
			return err
		}
	}
	return nil
}
