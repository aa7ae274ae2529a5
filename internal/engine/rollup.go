package engine

import (
	"context"
	"database/sql"
	"math"

	"github.com/hotcounter/hotcounter/internal/countersql"
	"github.com/hotcounter/hotcounter/internal/retry"
)

// The rollup pass folds a counter's slot rows (or an append counter's
// delta rows) into the parent column, a batch of parents per transaction.

// PendingOwners returns up to limit owners with slot rows in t, in key
// order, after the key `after` (nil: from the start).
func PendingOwners(ctx context.Context, conn Conn, d Dialect, t countersql.Table, after any, limit int) ([]any, error) {
	rows, err := conn.Query(ctx, func(w countersql.Writer) { d.PendingOwners(w, t, after, limit) })
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var owners []any
	kr := NewKeyReader(rows, 0)
	for rows.Next() {
		var v any
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		owners = append(owners, kr.Key(v))
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
func Rollup(ctx context.Context, conn Conn, d Dialect, t countersql.Table, deltas bool, batch int, stop func() bool,
	inTx func(ctx context.Context, fn func(Conn) error) error) error {
	_, err := RollupCounted(ctx, conn, d, t, deltas, batch, stop, inTx)
	return err
}

// RollupCounted is Rollup that also returns how many parents' slot rows it
// folded (batches committed; 0 for delta rows, which it folds by id).
func RollupCounted(ctx context.Context, conn Conn, d Dialect, t countersql.Table, deltas bool, batch int, stop func() bool,
	inTx func(ctx context.Context, fn func(Conn) error) error) (int64, error) {
	if u, ok := d.OnUpserts(); ok && deltas && d.Citus() {
		// Citus: one statement per parent, routed to its node.
		owners := func(after any) ([]any, error) { return PendingOwners(ctx, conn, d, t, after, batch) }
		_, err := walk(ctx, batch, stop, owners, func(owners []any) error {
			return retry.Do(ctx, FoldAttempts, func() error {
				return inTx(ctx, func(tx Conn) error { return RunSteps(ctx, tx, u.CitusFoldDeltas(t, owners)) })
			})
		})
		return 0, err
	}
	if deltas {
		return 0, foldDeltas(ctx, conn, d, t, batch, stop, inTx)
	}
	return foldAll(ctx, conn, d, t, batch, stop, inTx)
}

// foldAll walks t's slot table in key order, folding up to batch parents
// per transaction (the database's fold: its Driver), until it has walked it all or stop
// says so.
func foldAll(ctx context.Context, conn Conn, d Dialect, t countersql.Table, batch int, stop func() bool,
	inTx func(ctx context.Context, fn func(Conn) error) error) (int64, error) {
	foldBatch := d.Driver.Fold
	owners := func(after any) ([]any, error) { return PendingOwners(ctx, conn, d, t, after, batch) }
	return walk(ctx, batch, stop, owners, func(owners []any) error {
		return retry.Do(ctx, FoldAttempts, func() error {
			return inTx(ctx, func(tx Conn) error { return foldBatch(ctx, tx, t, owners) })
		})
	})
}

// walk runs apply on the owners that list returns, a batch at a time,
// until list returns a short batch or stop says so. It returns how many
// owners the batches that apply finished held. A list read that the
// database aborted is read again (readAgain).
func walk(ctx context.Context, batch int, stop func() bool, list func(after any) ([]any, error), apply func(owners []any) error) (int64, error) {
	var after any
	var done int64
	for !stop() {
		var owners []any
		err := readAgain(ctx, func() (err error) {
			owners, err = list(after)
			return err
		})
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
func foldDeltas(ctx context.Context, c Conn, d Dialect, t countersql.Table, batch int, stop func() bool,
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
			return inTx(ctx, func(tx Conn) error { return d.Driver.FoldDeltas(ctx, tx, t, after, end) })
		})
		if err != nil {
			return err
		}
		after = end
	}
	return nil
}

func deltaBatchEnd(ctx context.Context, c Conn, d Dialect, t countersql.Table, after int64, limit int) (int64, bool, error) {
	var end sql.NullInt64
	err := readAgain(ctx, func() error {
		end = sql.NullInt64{}
		rows, err := c.Query(ctx, func(w countersql.Writer) { d.DeltaBatchEnd(w, t, after, limit) })
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			if err := rows.Scan(&end); err != nil {
				return err
			}
		}
		return rows.Err()
	})
	return end.Int64, end.Valid, err
}

// DeleteChunk bounds the rows of one DELETE of an append fold.
const DeleteChunk = 10000

// readAgain runs read, a pass's read of the rows it will work on outside
// its transactions, again while the database aborts it for a reason that
// another attempt clears. Under SERIALIZABLE, PostgreSQL cancels even a
// read-only statement when a transaction whose rows it read committed
// while it ran, after reading what a third had since changed ("conflict
// out to old pivot"): a pass beside writers in transactions meets it.
// The read changes nothing, so reading again is safe.
func readAgain(ctx context.Context, read func() error) error {
	return retry.Do(ctx, FoldAttempts, read)
}
