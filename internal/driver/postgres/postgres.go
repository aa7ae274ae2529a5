// Package postgres is hotcounter's PostgreSQL driver: how the engine's
// sequences write, fold, take and lock on PostgreSQL (increments of one
// statement, the transaction's own or a free slot row, a take's first try
// in a savepoint, compaction that waits for its removed rows to be
// reusable, passes without JIT). internal/driver.For hands it to the
// engine with the postgres dialect.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hotcounter/hotcounter/internal/countersql"
	"github.com/hotcounter/hotcounter/internal/engine"
	"github.com/hotcounter/hotcounter/internal/spec"
)

// ReadCommitted: always. The statements are written for READ COMMITTED;
// under a default of SERIALIZABLE (a role's, a database's) a compaction
// batch over a hot parent's slots failed with 40001 at each attempt, its
// snapshot seeing rows that writers had updated since.
func (driver) ReadCommitted(bool) bool { return true }

// New returns the driver of d, a PostgreSQL dialect, or PostgreSQL with
// Citus, whose statements differ where its distributed tables need
// another form.
func New(d countersql.Dialect) engine.Driver {
	pg, _ := d.OnPostgres()
	return driver{engine.StatementFolds{D: pg.Upserts}, engine.RowLocking{L: pg.RowLocks}, pg}
}

// driver is PostgreSQL's engine.Driver: one statement per increment. Inside the caller's
// transaction a slot row stays locked until the caller commits, so there
// the increment writes the transaction's own row (IncrementOwnSlot), and
// a skip-locked counter takes a row no other transaction holds
// (IncrementFreeSlot): neither ever waits for a row lock, so transactions
// that increment parents in any order cannot deadlock through counters.
// Outside a transaction a statement holds its row for itself alone, and
// random slots with combining are faster.
type driver struct {
	engine.StatementFolds
	engine.RowLocking
	pg countersql.Postgres
}

func (w driver) Increment(ctx context.Context, s engine.Session, in engine.Increment, slot int) (int64, error) {
	d, t := w.pg, in.Table
	switch {
	case in.Mode == spec.Append:
		return engine.ExecIncrement(ctx, s, d.Dialect, in, func(x countersql.Writer, cond func(countersql.Writer)) { d.AppendWhere(x, t, in.Delta, cond) })
	case s.InTx():
		// The transaction's own slot rows, in key order, for one parent or
		// many.
		return engine.ExecIncrement(ctx, s, d.Dialect, in, func(x countersql.Writer, cond func(countersql.Writer)) {
			d.IncrementOwnSlot(x, t, in.Slots, slot, in.Delta, cond)
		})
	case in.SkipsLocked():
		var n int64
		// Its two statements commit alone, and the first changes nothing
		// when it finds no free row: retrying the pair cannot count twice.
		err := engine.OwnStatement(ctx, s, func() (err error) {
			n, err = incrementFreeSlot(ctx, s, d, t, in.Slots, slot, in.Delta, in.Key, in.Condition(d.Dialect))
			return err
		})
		return n, err
	}
	return engine.ExecIncrement(ctx, s, d.Dialect, in, func(x countersql.Writer, cond func(countersql.Writer)) { d.IncrementWhere(x, t, slot, in.Delta, cond) })
}

// IncrementShowing: a random slot of a sum counter that is not guarded;
// not a skip-locked counter's free row, nor inside a transaction (its own
// row).
func (w driver) IncrementShowing(ctx context.Context, s engine.Session, in engine.Increment, read func(context.Context) (countersql.Sources, error)) (int64, bool, bool, error) {
	if in.Mode != spec.Sum || in.Guarded || in.SkipLocked || s.InTx() {
		return 0, false, false, nil
	}
	sources, err := read(ctx)
	if err != nil {
		return 0, false, false, err
	}
	total, found, err := incrementReturningTotal(ctx, s, w.pg, in, sources)
	return total, found, true, err
}

// FirstTake: one try that never waits and keeps no stray lock, a SKIP
// LOCKED take in a savepoint rolled back when it finds nothing (see
// tryInSavepoint).
func (w driver) FirstTake(ctx context.Context, s engine.Session, t countersql.Table, _ int, key any, amount int64) (bool, error) {
	return tryInSavepoint(ctx, s, w.pg, t, key, amount)
}

// TakeFree: FOR UPDATE SKIP LOCKED.
func (w driver) TakeFree(ctx context.Context, c engine.Conn, t countersql.Table, key any, amount int64) (bool, bool, error) {
	ok, err := tryFreeSlot(ctx, c, w.pg, t, key, amount)
	return ok, true, err
}

// Planless: the planner's estimates on tables never analysed run into the
// millions, and JIT then compiled every batch (see Recount).
func (w driver) Planless(ctx context.Context, tx engine.Conn, fn func() error) error {
	rows, err := tx.Query(ctx, w.pg.JITOff)
	if err != nil {
		return err
	}
	var old, ignored string
	for rows.Next() {
		if err := rows.Scan(&old, &ignored); err != nil {
			rows.Close()
			return err
		}
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return err
	}
	if err := fn(); err != nil {
		return err
	}
	_, err = tx.Exec(ctx, func(x countersql.Writer) { w.pg.SetJIT(x, old) })
	return err
}

func (w driver) RecountIn(ctx context.Context, s engine.Session, run func(engine.Session) error) error {
	return engine.OwnTransaction(ctx, s, func(tx engine.Session) error { return w.Planless(ctx, tx, func() error { return run(tx) }) })
}

func (w driver) AwaitReuse(ctx context.Context, c engine.Conn, xid string) (string, error) {
	return awaitReuse(ctx, c, w.pg, xid)
}

func (w driver) SlotBytes(ctx context.Context, c engine.Conn, table string) (int64, error) {
	return engine.QueryInt(ctx, c, func(x countersql.Writer) { w.pg.TableSize(x, table) })
}

// incrementFreeSlot adds delta to a slot row of the one parent matching
// cond that no other transaction holds (PostgreSQL, a counter declared
// skip-locked): the first from slot `slot` on (the lowest if slot is
// negative), found with FOR UPDATE SKIP LOCKED, so that pre-created rows
// are used before any is inserted; when every slot row of the parent is
// held (or it has none) it writes the transaction's own row
// (countersql's IncrementOwnSlot) in a second statement, which never waits
// for a row lock either. key is the parent's key where only it selects the
// parent (nil otherwise). The first statement changes nothing when it finds
// no free row, so the pair never applies an increment twice. It returns
// the number of parents incremented: 0 when no parent matches cond.
func incrementFreeSlot(ctx context.Context, c engine.Conn, d countersql.Postgres, t countersql.Table, slots, slot int, delta int64, key any, cond func(countersql.Writer)) (int64, error) {
	pick := func(w countersql.Writer) { d.IncrementFreeSlot(w, t, slot, delta, cond) }
	if d.Citus() {
		// Citus: a statement routed to the parent's node by its key, read
		// first (from every shard) where a condition other than the key
		// selects the parent.
		parents := []any{key}
		if key == nil {
			var err error
			if parents, err = engine.QueryKeys(ctx, c, func(w countersql.Writer) { d.KeysWhere(w, t.Parent, t.ParentKey, cond, false) }); err != nil {
				return 0, err
			}
		}
		switch {
		case len(parents) == 0:
			return 0, nil
		case len(parents) > 1:
			return 0, fmt.Errorf("a skip-locked increment of one parent found %d", len(parents))
		}
		pick = func(w countersql.Writer) { d.CitusIncrementFreeSlot(w, t, slot, delta, parents[0]) }
		cond = d.KeyIn(t, parents)
	}
	keys, err := engine.QueryKeys(ctx, c, pick)
	switch {
	case err != nil:
		return 0, err
	case len(keys) > 1:
		return 0, fmt.Errorf("a skip-locked increment of one parent wrote %d slot rows", len(keys))
	case len(keys) == 1:
		return 1, nil
	}
	// (Never slot -1, which holds moved column values: see MoveToSlots.)
	return c.Exec(ctx, func(w countersql.Writer) { d.IncrementOwnSlot(w, t, slots, max(slot, 0), delta, cond) })
}

// incrementReturningTotal adds in.Delta to a slot of the parent in.Key and
// reads its new total, in one statement (PostgreSQL); found is false when
// the parent does not exist.
func incrementReturningTotal(ctx context.Context, s engine.Session, d countersql.Postgres, in engine.Increment, read countersql.Sources) (total int64, found bool, err error) {
	slot, release := engine.DrawSlot(in.Widths, in.Slots, in.Key)
	defer release()
	err = engine.OwnStatement(ctx, s, func() error {
		found = false
		rows, err := s.Query(ctx, func(w countersql.Writer) {
			d.IncrementReturningTotals(w, in.Table, slot, in.Delta, d.KeyIn(in.Table, []any{in.Key}), read)
		})
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var k string
			if err := rows.Scan(&k, &total); err != nil {
				return err
			}
			found = true
		}
		return rows.Err()
	})
	return total, found, err
}

// tryInSavepoint makes the one try of a take inside the caller's
// transaction (PostgreSQL): it takes from a slot row holding enough that no
// other transaction holds, never waiting, inside a savepoint rolled back
// when it finds none, which releases every row the try locked on its way:
// PostgreSQL keeps the lock of a row that FOR UPDATE locked and then found
// changed and no longer matching (a test of 16 buyers taking in ent
// transactions deadlocked on such a stray lock once takeAcross waited).
func tryInSavepoint(ctx context.Context, c engine.Session, d countersql.Postgres, t countersql.Table, key any, amount int64) (bool, error) {
	const sp = "hc_take_try"
	if err := engine.Savepoint(ctx, c, countersql.Savepoint, sp); err != nil {
		return false, err
	}
	ok, err := tryFreeSlot(ctx, c, d, t, key, amount)
	switch {
	case err != nil:
		return false, err
	case !ok:
		return false, errors.Join(engine.Savepoint(ctx, c, countersql.RollbackTo, sp), engine.Savepoint(ctx, c, countersql.Release, sp))
	}
	return true, engine.Savepoint(ctx, c, countersql.Release, sp)
}

// tryFreeSlot takes amount from a slot row of the parent that holds enough
// and that no other transaction holds, in one statement (PostgreSQL).
func tryFreeSlot(ctx context.Context, c engine.Conn, d countersql.Postgres, t countersql.Table, key any, amount int64) (bool, error) {
	got, err := engine.QueryKeys(ctx, c, func(w countersql.Writer) { d.TakeFromFreeSlot(w, t, key, amount) })
	return len(got) == 1, err
}

// awaitReuse waits up to engine.ReuseWait until no other session holds a
// snapshot from before the transaction xid committed, and returns "" then,
// or why it stopped waiting.
func awaitReuse(ctx context.Context, conn engine.Conn, d countersql.Postgres, xid string) (string, error) {
	deadline := time.Now().Add(engine.ReuseWait)
	for {
		rows, err := conn.Query(ctx, func(w countersql.Writer) { d.OldestHolder(w, xid) })
		if err != nil {
			return "", err
		}
		var pid int64
		var open float64
		held := rows.Next()
		if held {
			err = rows.Scan(&pid, &open)
		}
		rows.Close()
		if err != nil {
			return "", err
		}
		if !held {
			return "", nil
		}
		if time.Now().After(deadline) {
			return fmt.Sprintf("the transaction of session %d, open for %.1f s, keeps the slot rows the pass removed from being reused; "+
				"compacting more now would grow the table: run the pass again once it has ended", pid, open), nil
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(2 * time.Millisecond):
		}
	}
}
