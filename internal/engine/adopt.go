package engine

import (
	"context"
	"database/sql"
	"errors"

	"github.com/hotcounter/hotcounter"
	"github.com/hotcounter/hotcounter/internal/countersql"
	"github.com/hotcounter/hotcounter/internal/retry"
)

// MoveColumns walks t's parents in key order, a batch per transaction, and
// for each parent whose column holds a value other than 0 (or NULL) adds
// that value to its slot row [countersql.ColumnSlot] and sets the column
// to 0, in the same transaction: exactly once, and a reader, who reads
// column and slots in one statement, sees the value before the move or
// after it. Parents that another transaction holds are skipped without
// waiting (SKIP LOCKED) and counted as busy; the row of moved values is
// one that increments never write, so a move waits for no increment. A run
// after an interrupted one, or a second run, moves only what is left.
// inTx runs a function in a transaction of its own.
func MoveColumns(ctx context.Context, conn Conn, d Dialect, t countersql.Table, batch int,
	inTx func(ctx context.Context, fn func(Conn) error) error) (hotcounter.Moved, error) {
	var total hotcounter.Moved
	var after any
	for {
		owners, err := QueryKeys(ctx, conn, func(w countersql.Writer) { d.ColumnOwners(w, t, after, batch) })
		if err != nil || len(owners) == 0 {
			return total, err
		}
		var done hotcounter.Moved
		err = retry.Do(ctx, FoldAttempts, func() error {
			done = hotcounter.Moved{}
			return inTx(ctx, func(tx Conn) error {
				var err error
				done, err = moveBatch(ctx, tx, d, t, owners)
				return err
			})
		})
		if err != nil {
			return total, err
		}
		total.Add(done)
		if len(owners) < batch {
			return total, nil
		}
		after = owners[len(owners)-1]
	}
}

// moveBatch moves the column values of the given parents that it can lock.
// On Citus each parent's column is locked by a statement of its own, which
// Citus runs on the parent's node (it refuses a locking read of several
// shards).
func moveBatch(ctx context.Context, tx Conn, d Dialect, t countersql.Table, owners []any) (hotcounter.Moved, error) {
	var (
		m       hotcounter.Moved
		locked  []any
		keys    []any
		amounts []int64
	)
	lock := func(owners []any) error {
		rows, err := tx.Query(ctx, func(w countersql.Writer) { d.LockColumns(w, t, owners) })
		if err != nil {
			return err
		}
		kr := NewKeyReader(rows, 0)
		for rows.Next() {
			var k any
			var v sql.NullInt64
			if err := rows.Scan(&k, &v); err != nil {
				rows.Close()
				return err
			}
			k = kr.Key(k)
			locked = append(locked, k)
			m.Parents++
			if !v.Valid {
				m.Nulls++
				continue
			}
			m.Amount += v.Int64
			keys, amounts = append(keys, k), append(amounts, v.Int64)
		}
		return errors.Join(rows.Err(), rows.Close())
	}
	parts := [][]any{owners}
	if d.Citus() {
		parts = parts[:0]
		for _, k := range owners {
			parts = append(parts, []any{k})
		}
	}
	for _, part := range parts {
		if err := lock(part); err != nil {
			return hotcounter.Moved{}, err
		}
	}
	m.Busy = int64(len(owners) - len(locked))
	if len(locked) == 0 {
		return m, nil
	}
	if len(keys) > 0 {
		slots := make([]int, len(keys))
		for i := range slots {
			slots[i] = countersql.ColumnSlot
		}
		if _, err := tx.Exec(ctx, func(w countersql.Writer) { d.AddToSlots(w, t, keys, slots, amounts) }); err != nil {
			return hotcounter.Moved{}, err
		}
	}
	if _, err := tx.Exec(ctx, func(w countersql.Writer) { d.SetColumn(w, t, locked, 0) }); err != nil {
		return hotcounter.Moved{}, err
	}
	return m, nil
}

// ZeroNulls sets t's parent column to 0 where it is NULL, a batch of
// parents per statement, and returns how many it set. A migration runs it
// before the column becomes NOT NULL (rollup and append counters), so that
// a NULL, which a reader counts as 0, stays 0 rather than failing the
// migration.
func ZeroNulls(ctx context.Context, conn Conn, d Dialect, t countersql.Table, batch int) (int64, error) {
	var n int64
	var after any
	for {
		owners, err := QueryKeys(ctx, conn, func(w countersql.Writer) { d.NullOwners(w, t, after, batch) })
		if err != nil || len(owners) == 0 {
			return n, err
		}
		var done int64
		err = retry.Do(ctx, FoldAttempts, func() (err error) {
			done, err = conn.Exec(ctx, func(w countersql.Writer) { d.ZeroNullColumns(w, t, owners) })
			return err
		})
		if err != nil {
			return n, err
		}
		n += done
		if len(owners) < batch {
			return n, nil
		}
		after = owners[len(owners)-1]
	}
}

// KeyUnique reports whether table's column key is its primary key or
// alone in a unique index, as a slot table's foreign key needs.
func KeyUnique(ctx context.Context, c Conn, d Dialect, table, key string) (bool, error) {
	rows, err := c.Query(ctx, func(w countersql.Writer) { d.KeyUnique(w, table, key) })
	if err != nil {
		return false, err
	}
	defer rows.Close()
	var n any
	for rows.Next() {
		if err := rows.Scan(&n); err != nil {
			return false, err
		}
	}
	return truth(n), rows.Err()
}
