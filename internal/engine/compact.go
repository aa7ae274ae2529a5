package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hotcounter/hotcounter"
	"github.com/hotcounter/hotcounter/internal/countersql"
	"github.com/hotcounter/hotcounter/internal/retry"
)

// leftBecause returns why a compaction pass leaves c alone, or "" when it
// compacts it.
func (c Counter) leftBecause() string {
	switch {
	case c.Options.Guarded:
		return "guarded: its stock stays spread over its slot rows, so that takes do not meet on one"
	case c.Precreate:
		return "pre-created slot rows: they stay whatever they hold, so a compaction would remove none"
	}
	return ""
}

// CompactPass runs one compaction pass over each of counters in turn
// (Compact), leaving alone, named in the result's Left, those whose rows
// it would not remove or must not gather, and stopping at the first that
// it postpones. It records each counter's pass.
func (st Store) CompactPass(ctx context.Context, s Session, counters []Counter) (hotcounter.Compacted, error) {
	var done hotcounter.Compacted
	if _, err := st.Dialect.Driver.Compaction(); err != nil {
		return done, fmt.Errorf("%s: CompactPass: %w", st.Pkg, err)
	}
	inTx := PassTransaction(s, st.Dialect)
	for _, c := range counters {
		if why := c.leftBecause(); why != "" {
			done.Left = append(done.Left, c.Name+": "+why)
			continue
		}
		start := time.Now()
		got, err := Compact(ctx, s, st.Dialect, c.Table, st.Settings.BatchSize, inTx)
		st.Observer.Pass(ctx, "compact", c.Table.Parent, c.Column, start, got.Parents, err)
		if got.Postponed != "" {
			got.Postponed = c.Name + ": " + got.Postponed
		}
		done.Add(got)
		if err != nil {
			return done, fmt.Errorf("%s: compact %s: %w", st.Pkg, c.Name, err)
		}
		if got.Postponed != "" {
			break
		}
	}
	return done, nil
}

// Compact runs one compaction pass over a sum counter: for every parent
// with more than one slot row holding a value, it moves the values into
// one of those rows and deletes the others, about a batch of parents per
// transaction (on PostgreSQL interleaved, see
// [countersql.Upserts.CompactSplit]). Totals never change, as any reader
// sees them. On PostgreSQL it locks with SKIP LOCKED and never waits: rows
// that others hold stay as they are until the next pass. Before each
// transaction but the first it waits, up to ReuseWait, until the rows the
// previous one removed can be reused; past that it stops, saying why in
// Postponed.
//
// MySQL and MariaDB are refused (internal/driver/mysql.ErrCompact): under their default
// REPEATABLE READ, a transaction that reads a counter, increments it and
// reads it again sees its own slot row as it is now and the others as of
// its snapshot, so values a pass moved in between would count twice or
// not at all.
func Compact(ctx context.Context, conn Conn, d Dialect, t countersql.Table, batch int,
	inTx func(ctx context.Context, fn func(Conn) error) error) (hotcounter.Compacted, error) {
	var done hotcounter.Compacted
	st := d.Driver
	u, err := st.Compaction()
	if err != nil {
		return done, err
	}
	bytes := func() (int64, error) { return st.SlotBytes(ctx, conn, t.Slots) }
	if done.BytesBefore, err = bytes(); err != nil {
		return done, err
	}
	// Each step lists split batches of owners and compacts them in as many
	// transactions of about a batch each, owners i, i+split, ...: between
	// two transactions that touch a page runs a whole batch's work, time
	// for the transactions open when the first committed to end, after
	// which the rows it removed are room for the second's.
	split := u.CompactSplit()
	owners := func(after any) ([]any, error) {
		return QueryKeys(ctx, conn, func(w countersql.Writer) { u.CrowdedOwners(w, t, after, batch*split) })
	}
	var last string // the id of the last transaction, while its rows may not be reusable yet
	_, err = walk(ctx, batch*split, func() bool { return false }, owners, func(owners []any) error {
		parts := split
		if len(owners) <= batch {
			parts = 1 // a pass of a batch or less is one transaction
		}
		for i := range parts {
			var part []any
			for j := i; j < len(owners); j += parts {
				part = append(part, owners[j])
			}
			if len(part) == 0 {
				continue
			}
			if last != "" {
				why, err := st.AwaitReuse(ctx, conn, last)
				if err != nil {
					return err
				}
				if why != "" {
					done.Postponed = why
					return errPostponed
				}
			}
			var got hotcounter.Compacted
			err := retry.Do(ctx, FoldAttempts, func() error {
				return inTx(ctx, func(tx Conn) error {
					var err error
					got, last, err = compactBatch(ctx, tx, u.Compact(t, part))
					return err
				})
			})
			if err != nil {
				return err
			}
			done.Add(got)
		}
		return nil
	})
	if errors.Is(err, errPostponed) {
		err = nil
	}
	if err != nil {
		return done, err
	}
	done.BytesAfter, err = bytes()
	return done, err
}

// errPostponed ends a compaction walk that must not go on now.
var errPostponed = errors.New("compaction postponed")

// ReuseWait is how long a compaction pass waits, before a transaction,
// for the rows its previous one removed to become reusable: for every
// transaction of another session that was open when it committed to end.
// Compacting on without that room would write each gathered row's new
// version on another page, growing the table and its indexes, so past the
// wait the pass stops and says why (hotcounter.Compacted.Postponed).
const ReuseWait = time.Second

// compactBatch runs a dialect's compaction of one batch in tx, and
// returns what it did and, where the dialect tells it, the transaction's
// id.
func compactBatch(ctx context.Context, tx Conn, c countersql.Compaction) (hotcounter.Compacted, string, error) {
	var got hotcounter.Compacted
	if c.Queries != nil {
		var xid string
		for _, query := range c.Queries {
			one, id, err := compactQuery(ctx, tx, query)
			if err != nil {
				return got, "", err
			}
			got.Add(one)
			xid = id
		}
		return got, xid, nil
	}
	var err error
	if got.Parents, err = tx.Exec(ctx, c.Gather); err != nil {
		return got, "", err
	}
	got.Removed, err = tx.Exec(ctx, c.Remove)
	return got, "", err
}

// compactQuery runs one query of a Compaction (countersql.Compaction.Queries).
func compactQuery(ctx context.Context, tx Conn, query func(countersql.Writer)) (hotcounter.Compacted, string, error) {
	var got hotcounter.Compacted
	rows, err := tx.Query(ctx, query)
	if err != nil {
		return got, "", err
	}
	defer rows.Close()
	var xid, setting string
	if rows.Next() {
		if err := rows.Scan(&got.Parents, &got.Removed, &xid, &setting); err != nil {
			return got, "", err
		}
	}
	return got, xid, rows.Err()
}
