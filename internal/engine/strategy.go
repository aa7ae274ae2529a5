package engine

import (
	"context"

	"github.com/hotcounter/hotcounter/internal/countersql"
	"github.com/hotcounter/hotcounter/internal/spec"
)

// strategy is how one database writes increments, folds them and takes
// from stock where the databases differ: each database's in one type,
// chosen once from the dialect (strategyOf), so that the sequences that
// use it ask no dialect what it can do.
type strategy interface {
	// increment writes in, its slot drawn, and returns how many parents it
	// incremented.
	increment(ctx context.Context, s Session, in Increment, slot int) (int64, error)
	// returnsTotal reports whether an increment of one parent can return
	// the parent's new total from the same statement (IncrementOne).
	returnsTotal(s Session, in Increment) bool
	// fold folds the slot rows of owners into their parents' column, in
	// tx; foldDeltas folds the delta rows with ids in (after, upTo].
	fold(ctx context.Context, tx Conn, t countersql.Table, owners []any) error
	foldDeltas(ctx context.Context, tx Conn, t countersql.Table, after, upTo int64) error
	// firstTake is a take's first try inside the caller's transaction,
	// where no row it reads may stay locked out of slot order: it takes
	// amount from one row and reports true, or finds none and reports
	// false (Take then gathers across the rows).
	firstTake(ctx context.Context, s Session, t countersql.Table, slots int, key any, amount int64) (bool, error)
}

// strategyOf returns the strategy of d's database.
func strategyOf(d countersql.Dialect) strategy {
	switch {
	case d.MySQL():
		return mysqlWrites{d}
	case d.LocksRows():
		return postgresWrites{statementFolds{d}}
	}
	return sqliteWrites{statementFolds{d}}
}

// statementFolds folds with the dialect's fold statements, run in order
// (PostgreSQL, SQLite).
type statementFolds struct{ d countersql.Dialect }

func (f statementFolds) fold(ctx context.Context, tx Conn, t countersql.Table, owners []any) error {
	return runSteps(ctx, tx, f.d.Fold(t, owners))
}

func (f statementFolds) foldDeltas(ctx context.Context, tx Conn, t countersql.Table, after, upTo int64) error {
	return runSteps(ctx, tx, f.d.FoldDeltas(t, after, upTo))
}

// runSteps runs statements in order, stopping at the first that fails.
func runSteps(ctx context.Context, tx Conn, steps []func(countersql.Writer)) error {
	for _, step := range steps {
		if _, err := tx.Exec(ctx, step); err != nil {
			return err
		}
	}
	return nil
}

// skipsLocked reports whether in, declared skip-locked, increments one
// parent, the only increment that takes a free slot row.
func (in Increment) skipsLocked() bool {
	_, one := in.one()
	return in.SkipLocked && one
}

// postgresWrites: one statement per increment. Inside the caller's
// transaction a slot row stays locked until the caller commits, so there
// the increment writes the transaction's own row (IncrementOwnSlot), and
// a skip-locked counter takes a row no other transaction holds
// (IncrementFreeSlot): neither ever waits for a row lock, so transactions
// that increment parents in any order cannot deadlock through counters.
// Outside a transaction a statement holds its row for itself alone, and
// random slots with combining are faster.
type postgresWrites struct{ statementFolds }

func (w postgresWrites) increment(ctx context.Context, s Session, in Increment, slot int) (int64, error) {
	d, t := w.d, in.Table
	switch {
	case in.Mode == spec.Append:
		return statements(ctx, s, d, in, func(x countersql.Writer, cond func(countersql.Writer)) { d.AppendWhere(x, t, in.Delta, cond) })
	case s.InTx():
		// The transaction's own slot rows, in key order, for one parent or
		// many.
		return statements(ctx, s, d, in, func(x countersql.Writer, cond func(countersql.Writer)) {
			d.IncrementOwnSlot(x, t, in.Slots, slot, in.Delta, cond)
		})
	case in.skipsLocked():
		var n int64
		// Its two statements commit alone, and the first changes nothing
		// when it finds no free row: retrying the pair cannot count twice.
		err := ownStatement(ctx, s, func() (err error) {
			n, err = IncrementFreeSlot(ctx, s, d, t, in.Slots, slot, in.Delta, in.cond(d))
			return err
		})
		return n, err
	}
	return statements(ctx, s, d, in, func(x countersql.Writer, cond func(countersql.Writer)) { d.IncrementWhere(x, t, slot, in.Delta, cond) })
}

// returnsTotal: a random slot of a sum counter that is not guarded; not a
// skip-locked counter's free row, nor inside a transaction (its own row).
func (postgresWrites) returnsTotal(s Session, in Increment) bool {
	return in.Mode == spec.Sum && !in.Guarded && !in.SkipLocked && !s.InTx()
}

// firstTake: one try that never waits and keeps no stray lock, a SKIP
// LOCKED take in a savepoint rolled back when it finds nothing (see
// tryInSavepoint).
func (w postgresWrites) firstTake(ctx context.Context, s Session, t countersql.Table, _ int, key any, amount int64) (bool, error) {
	return tryInSavepoint(ctx, s, w.d, t, key, amount)
}

// mysqlWrites: several statements per increment (see IncrementMySQL).
// Inside the caller's transaction the session's own slot rows, which no
// other transaction writes, so it never waits.
type mysqlWrites struct{ d countersql.Dialect }

func (w mysqlWrites) increment(ctx context.Context, s Session, in Increment, slot int) (int64, error) {
	my := MySQLIncrement{Table: in.Table, Slot: slot, Delta: in.Delta}
	switch {
	case in.Key != nil:
		my.Key = in.Key
	case in.Keys != nil:
		my.Keys = in.Keys
	default:
		my.Cond = in.Cond
	}
	switch {
	case in.Mode == spec.Append:
		my.Slot = 0
		return AppendMySQL(ctx, s, w.d, my)
	case s.InTx() && in.Delta != 0:
		return IncrementOwnSlotMySQL(ctx, s, w.d, my, in.Slots)
	case in.skipsLocked():
		return IncrementFreeSlotMySQL(ctx, s, w.d, my)
	}
	return IncrementMySQL(ctx, s, w.d, my)
}

func (mysqlWrites) returnsTotal(Session, Increment) bool { return false }

func (w mysqlWrites) fold(ctx context.Context, tx Conn, t countersql.Table, owners []any) error {
	return foldMySQL(ctx, tx, w.d, t, owners)
}

func (w mysqlWrites) foldDeltas(ctx context.Context, tx Conn, t countersql.Table, after, upTo int64) error {
	return foldDeltasMySQL(ctx, tx, w.d, t, after, upTo)
}

// firstTake: none. InnoDB keeps the row locks taken after a savepoint that
// is rolled back, so any try would leave a stray lock: the take locks
// every row in slot order at once (a test of 16 buyers taking in ent
// transactions deadlocked when a try came first).
func (mysqlWrites) firstTake(context.Context, Session, countersql.Table, int, any, int64) (bool, error) {
	return false, nil
}

// sqliteWrites: one upsert per increment. SQLite has one writer at a time:
// no row is ever held by another transaction, so there is no own or free
// slot row to take.
type sqliteWrites struct{ statementFolds }

func (w sqliteWrites) increment(ctx context.Context, s Session, in Increment, slot int) (int64, error) {
	d, t := w.d, in.Table
	if in.Mode == spec.Append {
		return statements(ctx, s, d, in, func(x countersql.Writer, cond func(countersql.Writer)) { d.AppendWhere(x, t, in.Delta, cond) })
	}
	return statements(ctx, s, d, in, func(x countersql.Writer, cond func(countersql.Writer)) { d.IncrementWhere(x, t, slot, in.Delta, cond) })
}

func (sqliteWrites) returnsTotal(Session, Increment) bool { return false }

// firstTake: one writer at a time, nothing held by another: the rows in
// slot order.
func (w sqliteWrites) firstTake(ctx context.Context, s Session, t countersql.Table, slots int, key any, amount int64) (bool, error) {
	return takeOne(ctx, s, w.d, t, slots, key, amount, true)
}
