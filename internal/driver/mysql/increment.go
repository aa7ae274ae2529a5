package mysql

import (
	"context"
	"fmt"
	"strconv"

	"github.com/hotcounter/hotcounter/internal/countersql"
	"github.com/hotcounter/hotcounter/internal/dberr"
	"github.com/hotcounter/hotcounter/internal/engine"
	"github.com/hotcounter/hotcounter/internal/retry"
)

// The MySQL/MariaDB write path runs several statements where PostgreSQL and
// SQLite run one (see the countersql functions it calls for why). Each runs
// in the caller's transaction, or in one of its own that is retried on
// deadlock.

// incr describes one increment on MySQL/MariaDB.
type incr struct {
	Table countersql.Table
	// Key is the one parent to increment, when nothing but its primary key
	// selects it; else Cond selects the parents (read without locks).
	Key  any
	Cond func(countersql.Writer)
	// Keys, when not nil, are the parents (Key and Cond are then unused).
	Keys  []any
	Slot  int
	Delta int64
}

// single reports whether the increment targets one parent by its key:
// Key, or Keys holding one key.
func (in incr) single() bool {
	return in.Cond == nil && (in.Keys == nil || len(in.Keys) == 1)
}

// key is the parent of a single increment.
func (in incr) key() any {
	if len(in.Keys) == 1 {
		return in.Keys[0]
	}
	return in.Key
}

// increment adds delta to slot `slot` of every parent the increment
// targets, and returns how many parents that was.
//
// An increment updates its slot row with an exact-match UPDATE, which locks
// that row only and never the parent. When the row is missing it must be
// inserted, and the insert's foreign key check takes a shared lock on the
// parent; so rows are inserted only when an UPDATE found none. An UPDATE
// that finds no row locks the gap where the row would go, and an INSERT
// after it deadlocks with every other writer doing the same (MySQL bug
// 52020). So the UPDATE runs alone in autocommit, whose locks end with it,
// or in a transaction of hotcounter's own at READ COMMITTED, where it
// locks no gap, or, in the caller's transaction, inside a savepoint that
// is rolled back before the INSERT. (That rollback does not always release
// the gap lock on MariaDB 10.11: own transactions at REPEATABLE READ
// deadlocked so, each holding the gap the other inserted into.)
//
// Pre-created slot rows (the default for sum counters) always exist, so an
// increment of one parent named only by its primary key is one UPDATE, with
// no read of the parent.
func increment(ctx context.Context, s engine.Session, d countersql.MySQL, in incr) (int64, error) {
	t, slot, delta := in.Table, in.Slot, in.Delta
	keys := in.Keys
	if in.single() {
		keys = []any{in.key()}
	}
	// Alone in autocommit only: inside a caller's transaction an UPDATE that
	// found no row (a parent without its pre-created rows) would keep its
	// gap lock, and the insert after it would deadlock; there the UPDATE
	// runs in a savepoint (updateSlots).
	if len(keys) == 1 && in.Cond == nil && delta != 0 && !s.InTx() {
		// Alone in autocommit, a statement that failed changed nothing: it is
		// retried. A fold can deadlock with it where the slot table's unique
		// key is a secondary index (ent's layout, beside its surrogate id):
		// the UPDATE locks the index entry and then the row, the fold the
		// row and then, deleting it, the index entry.
		var n int64
		err := engine.OwnStatement(ctx, s, func() (err error) {
			n, err = s.Exec(ctx, func(w countersql.Writer) { d.IncrementKeys(w, t, keys, slot, delta) })
			return err
		})
		if err != nil || n == 1 {
			return n, err
		}
		if !s.InTx() {
			// The UPDATE has committed, gap lock and all: insert the row.
			err := engine.OwnStatement(ctx, s, func() (err error) {
				n, err = upsertSlots(ctx, s, d, t, keys, slot, delta)
				return err
			})
			return n, err
		}
	}
	var n int64
	err := engine.OwnReadCommittedTransaction(ctx, s, func(tx engine.Session) error {
		n = 0
		keys := keys
		cond := in.Cond
		if keys != nil && delta == 0 {
			cond = d.KeyIn(t, keys) // count the parents that exist
		}
		if keys == nil || delta == 0 {
			var err error
			if keys, err = engine.QueryKeys(ctx, tx, func(w countersql.Writer) { d.SelectKeys(w, t, cond) }); err != nil {
				return err
			}
		} else {
			keys = engine.SortKeys(keys)
		}
		if delta == 0 {
			n = int64(len(keys))
			return nil
		}
		chunks := func() error {
			for start := 0; start < len(keys); start += engine.FillChunk {
				done, err := updateSlots(ctx, tx, d, t, keys[start:min(start+engine.FillChunk, len(keys))], slot, delta)
				if err != nil {
					return err
				}
				n += done
			}
			return nil
		}
		if len(keys) <= engine.FillChunk || !s.InTx() {
			return chunks()
		}
		// Several statements in the caller's transaction: all or none.
		return engine.InSavepoint(ctx, tx, "hc_increment_all", chunks)
	})
	return n, err
}

// incrementOwnSlot adds in.Delta to the session's own slot row of
// every parent the increment targets (addToOwnSlots), inside the caller's
// transaction: rows no other session writes, so transactions that
// increment parents in any order never wait for each other through
// counters and cannot deadlock through them. Parents named by a condition
// are read without locks first. A parent whose own row does not exist yet
// and which another transaction holds (its foreign key check would wait)
// is incremented as before own rows, at slot in.Slot (increment),
// whose pre-created rows need no foreign key check. slots is the counter's
// slot count.
func incrementOwnSlot(ctx context.Context, s engine.Session, d countersql.MySQL, in incr, slots int) (int64, error) {
	keys := in.Keys
	switch {
	case in.Keys == nil && in.Cond == nil:
		keys = []any{in.Key}
	case in.Keys == nil:
		var err error
		if keys, err = engine.QueryKeys(ctx, s, func(w countersql.Writer) { d.SelectKeys(w, in.Table, in.Cond) }); err != nil {
			return 0, err
		}
	}
	keys = distinctKeys(keys)
	amounts := make([]int64, len(keys))
	for i := range amounts {
		amounts[i] = in.Delta
	}
	var n int64
	add := func() error {
		done, missed, err := addToOwnSlots(ctx, s, d, in.Table, slots, keys, amounts, true)
		n = done
		if err != nil || len(missed) == 0 {
			return err
		}
		rest := incr{Table: in.Table, Slot: in.Slot, Delta: in.Delta, Keys: make([]any, len(missed))}
		for i, at := range missed {
			rest.Keys[i] = keys[at]
		}
		done, err = increment(ctx, s, d, rest)
		n += done
		return err
	}
	if len(keys) <= engine.FillChunk {
		return n, add()
	}
	// Several statements in the caller's transaction: all or none.
	return n, engine.InSavepoint(ctx, s, "hc_increment_all", add)
}

// distinctKeys returns keys sorted, each once: an increment names a parent
// once however often its key is listed, as UPDATE ... WHERE key IN does.
func distinctKeys(keys []any) []any {
	seen := map[string]bool{}
	out := make([]any, 0, len(keys))
	for _, k := range engine.SortKeys(keys) {
		if t := engine.KeyText(k); !seen[t] {
			seen[t] = true
			out = append(out, k)
		}
	}
	return out
}

// incrementFreeSlot is the skip-locked increment of one parent on
// MySQL and MariaDB: in one transaction it locks the first slot row of the
// parent from a random start, wrapping around, that no other transaction
// holds, and updates it. When every row is held, or there is none, it
// increments slot `slot` as increment does. A transaction of its own
// runs at READ COMMITTED, where locking reads take no gap locks.
func incrementFreeSlot(ctx context.Context, s engine.Session, d countersql.MySQL, in incr) (int64, error) {
	if !in.single() {
		// A condition decides whether the parent counts: take the path that
		// reads it.
		return increment(ctx, s, d, in)
	}
	t, key := in.Table, in.key()
	var n int64
	pick := func(tx engine.Session) (int, bool, error) {
		for _, below := range []bool{false, true} {
			keys, err := engine.QueryKeys(ctx, tx, func(w countersql.Writer) { d.PickFreeSlot(w, t, key, in.Slot, below) })
			if err != nil {
				return 0, false, err
			}
			if len(keys) > 0 {
				free, err := strconv.Atoi(fmt.Sprint(keys[0]))
				return free, err == nil, err
			}
		}
		return 0, false, nil
	}
	run := func(tx engine.Session) error {
		free, found, err := pick(tx)
		if err != nil {
			return err
		}
		if found {
			done, err := tx.Exec(ctx, func(w countersql.Writer) { d.IncrementKeys(w, t, []any{key}, free, in.Delta) })
			if err != nil || done == 1 {
				n = done
				return err
			}
		}
		n, err = increment(ctx, tx, d, in)
		return err
	}
	if s.InTx() {
		return n, run(s)
	}
	err := retry.Do(ctx, engine.OwnAttempts, func() error { return s.Begin(ctx, true, run) })
	return n, err
}

// updateSlots adds delta to the slot rows of keys with one exact-match
// UPDATE inside a savepoint. If some rows are missing, which ones cannot be
// read back safely (a plain SELECT reads the transaction's snapshot, which
// may still show a row a rollup has since deleted), so the UPDATE is rolled
// back to the savepoint, releasing the gap locks it took, and the keys are
// upserted instead.
func updateSlots(ctx context.Context, tx engine.Session, d countersql.MySQL, t countersql.Table, keys []any, slot int, delta int64) (int64, error) {
	const sp = "hc_increment"
	if err := engine.Savepoint(ctx, tx, countersql.Savepoint, sp); err != nil {
		return 0, err
	}
	n, err := tx.Exec(ctx, func(w countersql.Writer) { d.IncrementKeys(w, t, keys, slot, delta) })
	if err != nil || n == int64(len(keys)) {
		return n, err
	}
	if err := engine.Savepoint(ctx, tx, countersql.RollbackTo, sp); err != nil {
		return 0, err
	}
	return upsertSlots(ctx, tx, d, t, keys, slot, delta)
}

// upsertSlots adds delta to slot `slot` of keys (sorted), inserting the rows
// that are missing, in one statement. A parent deleted since its key was
// read fails the foreign key check (1452); the keys are then upserted one by
// one and the gone ones skipped, as an UPDATE would skip them.
func upsertSlots(ctx context.Context, s engine.Session, d countersql.MySQL, t countersql.Table, keys []any, slot int, delta int64) (int64, error) {
	return skippingGone(s, len(keys), func(from, to int) error {
		_, err := s.Exec(ctx, func(w countersql.Writer) { d.InsertSlots(w, t, keys[from:to], slot, delta) })
		return err
	})
}

// skippingGone runs write over parents [0, n) in one go and, when a parent
// is gone (an inserted row's foreign key check failed), once per parent,
// passing over the gone ones, as an UPDATE would find no row for them. It
// returns how many parents were written.
func skippingGone(c engine.Conn, n int, write func(from, to int) error) (int64, error) {
	gone := func(err error) bool {
		s, ok := c.(engine.Session)
		return dberr.ForeignKeyViolation(err) || ok && s.ParentGone(err)
	}
	err := write(0, n)
	if !gone(err) {
		if err != nil {
			return 0, err
		}
		return int64(n), nil
	}
	var done int64
	for i := range n {
		switch err := write(i, i+1); {
		case gone(err):
		case err != nil:
			return done, err
		default:
			done++
		}
	}
	return done, nil
}

// appendRow inserts a delta row of in.Delta for every parent the
// increment targets (append counters), and returns how many parents that
// was. The parent keys are read without locks (INSERT ... SELECT would
// take shared locks on the parent rows); a parent deleted since fails the
// foreign key check and is skipped, as an UPDATE would skip it.
func appendRow(ctx context.Context, s engine.Session, d countersql.MySQL, in incr) (int64, error) {
	t := in.Table
	insert := func(c engine.Session, keys []any) (int64, error) {
		amounts := make([]int64, len(keys))
		for i := range amounts {
			amounts[i] = in.Delta
		}
		return skippingGone(c, len(keys), func(from, to int) error {
			_, err := c.Exec(ctx, func(w countersql.Writer) { d.AppendRows(w, t, keys[from:to], amounts[from:to]) })
			return err
		})
	}
	if in.single() {
		var n int64
		err := engine.OwnStatement(ctx, s, func() (err error) { n, err = insert(s, []any{in.key()}); return err })
		return n, err
	}
	var n int64
	err := engine.OwnReadCommittedTransaction(ctx, s, func(tx engine.Session) error {
		n = 0
		keys := in.Keys
		if keys == nil {
			var err error
			if keys, err = engine.QueryKeys(ctx, tx, func(w countersql.Writer) { d.SelectKeys(w, t, in.Cond) }); err != nil {
				return err
			}
		} else {
			keys = engine.SortKeys(keys)
		}
		for start := 0; start < len(keys); start += engine.FillChunk {
			done, err := insert(tx, keys[start:min(start+engine.FillChunk, len(keys))])
			if err != nil {
				return err
			}
			n += done
		}
		return nil
	})
	return n, err
}
