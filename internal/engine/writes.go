package engine

import (
	"context"

	"github.com/hotcounter/hotcounter/internal/countersql"
	"github.com/hotcounter/hotcounter/internal/spec"
)

// writes is how one database writes increments: each database's strategy
// in one place, chosen once from the dialect (writesOf), so that Apply and
// IncrementOne ask no dialect what it can do.
type writes interface {
	// increment writes in, its slot drawn, and returns how many parents it
	// incremented.
	increment(ctx context.Context, s Session, in Increment, slot int) (int64, error)
	// returnsTotal reports whether an increment of one parent can return
	// the parent's new total from the same statement (IncrementOne).
	returnsTotal(s Session, in Increment) bool
}

// writesOf returns the writes of d's database.
func writesOf(d countersql.Dialect) writes {
	switch {
	case d.MySQL():
		return mysqlWrites{d}
	case d.LocksRows():
		return postgresWrites{d}
	}
	return sqliteWrites{d}
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
type postgresWrites struct{ d countersql.Dialect }

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

// sqliteWrites: one upsert per increment. SQLite has one writer at a time:
// no row is ever held by another transaction, so there is no own or free
// slot row to take.
type sqliteWrites struct{ d countersql.Dialect }

func (w sqliteWrites) increment(ctx context.Context, s Session, in Increment, slot int) (int64, error) {
	d, t := w.d, in.Table
	if in.Mode == spec.Append {
		return statements(ctx, s, d, in, func(x countersql.Writer, cond func(countersql.Writer)) { d.AppendWhere(x, t, in.Delta, cond) })
	}
	return statements(ctx, s, d, in, func(x countersql.Writer, cond func(countersql.Writer)) { d.IncrementWhere(x, t, slot, in.Delta, cond) })
}

func (sqliteWrites) returnsTotal(Session, Increment) bool { return false }
