package engine

import (
	"context"
	"database/sql"
	"errors"
	"math"

	"github.com/hotcounter/hotcounter/internal/countersql"
	"github.com/hotcounter/hotcounter/internal/retry"
)

// The rollup pass folds a counter's slot rows (or an append counter's
// delta rows) into the parent column, a batch of parents per transaction.

// PendingOwners returns up to limit owners with slot rows in t, in key
// order, after the key `after` (nil: from the start).
func PendingOwners(ctx context.Context, conn Conn, d countersql.Dialect, t countersql.Table, after any, limit int) ([]any, error) {
	rows, err := conn.Query(ctx, func(w countersql.Writer) { d.PendingOwners(w, t, after, limit) })
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var owners []any
	kr := newKeyReader(rows, 0)
	for rows.Next() {
		var v any
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		owners = append(owners, kr.key(v))
	}
	return owners, rows.Err()
}

// FoldAttempts is how many times a fold batch is tried when the database
// aborts its transaction for a transient reason.
const FoldAttempts = 5

// Rollup runs one rollup pass over one counter: it folds an append
// counter's delta rows (deltas) or a counter's slot rows into the parent
// column. inTx runs a function in a new
// transaction that it commits when the function returns nil.
func Rollup(ctx context.Context, conn Conn, d countersql.Dialect, t countersql.Table, deltas bool, batch int, stop func() bool,
	inTx func(ctx context.Context, fn func(Conn) error) error) error {
	_, err := RollupCounted(ctx, conn, d, t, deltas, batch, stop, inTx)
	return err
}

// RollupCounted is Rollup that also returns how many parents' slot rows it
// folded (batches committed; 0 for delta rows, which it folds by id).
func RollupCounted(ctx context.Context, conn Conn, d countersql.Dialect, t countersql.Table, deltas bool, batch int, stop func() bool,
	inTx func(ctx context.Context, fn func(Conn) error) error) (int64, error) {
	if deltas {
		return 0, foldDeltas(ctx, conn, d, t, batch, stop, inTx)
	}
	return foldAll(ctx, conn, d, t, batch, stop, inTx)
}

// foldAll walks t's slot table in key order, folding up to batch parents
// per transaction (the database's fold: strategy.go), until it has walked it all or stop
// says so.
func foldAll(ctx context.Context, conn Conn, d countersql.Dialect, t countersql.Table, batch int, stop func() bool,
	inTx func(ctx context.Context, fn func(Conn) error) error) (int64, error) {
	foldBatch := strategyOf(d).fold
	owners := func(after any) ([]any, error) { return PendingOwners(ctx, conn, d, t, after, batch) }
	return walk(batch, stop, owners, func(owners []any) error {
		return retry.Do(ctx, FoldAttempts, func() error {
			return inTx(ctx, func(tx Conn) error { return foldBatch(ctx, tx, t, owners) })
		})
	})
}

// walk runs apply on the owners that list returns, a batch at a time,
// until list returns a short batch or stop says so. It returns how many
// owners the batches that apply finished held.
func walk(batch int, stop func() bool, list func(after any) ([]any, error), apply func(owners []any) error) (int64, error) {
	var after any
	var done int64
	for !stop() {
		owners, err := list(after)
		if err != nil {
			return done, err
		}
		if len(owners) == 0 {
			return done, nil
		}
		if err := apply(owners); err != nil {
			return done, err
		}
		done += int64(len(owners))
		if len(owners) < batch {
			return done, nil
		}
		after = owners[len(owners)-1]
	}
	return done, nil
}

// foldDeltas walks an append counter's delta table by id, folding batches
// of at most batch rows into the parent column, each in a transaction of
// its own (inTx), until it reaches the last row that existed when it
// started, or stop says so. Rows inserted meanwhile are left for the next
// pass, so a pass ends even while writers keep appending.
func foldDeltas(ctx context.Context, c Conn, d countersql.Dialect, t countersql.Table, batch int, stop func() bool,
	inTx func(ctx context.Context, fn func(Conn) error) error) error {
	ceiling, ok, err := deltaBatchEnd(ctx, c, d, t, 0, math.MaxInt32)
	if err != nil || !ok {
		return err
	}
	var after int64
	for after < ceiling && !stop() {
		end, ok, err := deltaBatchEnd(ctx, c, d, t, after, batch)
		if err != nil || !ok {
			return err
		}
		end = min(end, ceiling)
		err = retry.Do(ctx, FoldAttempts, func() error {
			return inTx(ctx, func(tx Conn) error { return strategyOf(d).foldDeltas(ctx, tx, t, after, end) })
		})
		if err != nil {
			return err
		}
		after = end
	}
	return nil
}

func deltaBatchEnd(ctx context.Context, c Conn, d countersql.Dialect, t countersql.Table, after int64, limit int) (int64, bool, error) {
	rows, err := c.Query(ctx, func(w countersql.Writer) { d.DeltaBatchEnd(w, t, after, limit) })
	if err != nil {
		return 0, false, err
	}
	defer rows.Close()
	var end sql.NullInt64
	for rows.Next() {
		if err := rows.Scan(&end); err != nil {
			return 0, false, err
		}
	}
	return end.Int64, end.Valid, rows.Err()
}

// foldDeltasMySQL folds the delta rows in (after, upTo] of the parents that
// no one holds: it reads their owners without locks, locks those parents
// (SKIP LOCKED), locks their delta rows, adds exactly the values it read to
// the columns and deletes exactly those rows. An increment holding its
// parent's shared lock (its foreign key check) is skipped, never waited
// for, so the two cannot deadlock; what is skipped stays for the next pass.
func foldDeltasMySQL(ctx context.Context, tx Conn, d countersql.MySQL, t countersql.Table, after, upTo int64) error {
	owners, err := QueryKeys(ctx, tx, func(w countersql.Writer) { d.DeltaOwners(w, t, after, upTo) })
	if err != nil || len(owners) == 0 {
		return err
	}
	for start := 0; start < len(owners); start += FillChunk {
		chunk := owners[start:min(start+FillChunk, len(owners))]
		locked, err := QueryKeys(ctx, tx, func(w countersql.Writer) { d.LockParents(w, t, chunk) })
		if err != nil {
			return err
		}
		if len(locked) == 0 {
			continue
		}
		rows, err := tx.Query(ctx, func(w countersql.Writer) { d.LockDeltas(w, t, after, upTo, locked) })
		if err != nil {
			return err
		}
		var (
			ids     []any
			keys    []any
			amounts []int64
			index   = map[string]int{}
			kr      = newKeyReader(rows, 1)
		)
		for rows.Next() {
			var id, n int64
			var owner any
			if err := rows.Scan(&id, &owner, &n); err != nil {
				rows.Close()
				return err
			}
			owner = kr.key(owner)
			ids = append(ids, id)
			k := KeyText(owner)
			i, seen := index[k]
			if !seen {
				i = len(keys)
				index[k] = i
				keys, amounts = append(keys, owner), append(amounts, 0)
			}
			amounts[i] += n
		}
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			return err
		}
		if len(ids) == 0 {
			continue
		}
		if _, err := tx.Exec(ctx, func(w countersql.Writer) { d.AddToColumns(w, t, keys, amounts) }); err != nil {
			return err
		}
		for s := 0; s < len(ids); s += deleteChunk {
			part := ids[s:min(s+deleteChunk, len(ids))]
			if _, err := tx.Exec(ctx, func(w countersql.Writer) { d.DeleteDeltas(w, t, part) }); err != nil {
				return err
			}
		}
	}
	return nil
}

// foldMySQL folds the pending slots of owners into their parents' column:
// it locks the parents and then their slot rows that no one else holds
// (SKIP LOCKED, so the fold never waits), adds the slot values to the
// columns, and empties the slot rows it added (n = 0: they stay, see
// countersql.MySQL.ZeroSlot). What it skips stays pending.
func foldMySQL(ctx context.Context, tx Conn, d countersql.MySQL, t countersql.Table, owners []any) error {
	parents, err := QueryKeys(ctx, tx, func(w countersql.Writer) { d.LockParents(w, t, owners) })
	if err != nil || len(parents) == 0 {
		return err
	}
	var (
		keys    []any
		amounts []int64
	)
	for _, owner := range parents {
		slots, sum, err := lockSlots(ctx, tx, d, t, owner)
		if err != nil {
			return err
		}
		if len(slots) == 0 {
			continue
		}
		for _, slot := range slots {
			if _, err := tx.Exec(ctx, func(w countersql.Writer) { d.ZeroSlot(w, t, owner, slot) }); err != nil {
				return err
			}
		}
		keys, amounts = append(keys, owner), append(amounts, sum)
	}
	if len(keys) == 0 {
		return nil
	}
	_, err = tx.Exec(ctx, func(w countersql.Writer) { d.AddToColumns(w, t, keys, amounts) })
	return err
}

// lockSlots locks the slot rows of owner that hold a value and no one else
// holds, and returns their slots and the sum of their values.
func lockSlots(ctx context.Context, tx Conn, d countersql.MySQL, t countersql.Table, owner any) (slots []int64, sum int64, err error) {
	rows, err := tx.Query(ctx, func(w countersql.Writer) { d.LockSlots(w, t, owner) })
	if err != nil {
		return nil, 0, err
	}
	for rows.Next() {
		var slot, n int64
		if err := rows.Scan(&slot, &n); err != nil {
			rows.Close()
			return nil, 0, err
		}
		slots, sum = append(slots, slot), sum+n
	}
	return slots, sum, errors.Join(rows.Err(), rows.Close())
}

// deleteChunk bounds the rows of one DELETE of an append fold.
const deleteChunk = 10000
