package engine

import (
	"context"
	"math/rand/v2"

	"github.com/hotcounter/hotcounter/internal/countersql"
)

// Driver is what one database does its own way, where the databases
// differ: how it writes increments (and a write-behind flush's), folds
// them, takes from stock, locks a parent's slot rows and the parents of a
// set, adds to counts, runs DDL and a pass's transaction, whether it
// compacts, and how it tells its server apart. Each database's is one
// package of internal/driver (postgres, mysql, sqlite), which makes it a
// value of Dialect beside its statements, so that the sequences here ask
// no dialect what it can do.
type Driver interface {
	// Increment writes in, its slot drawn, and returns how many parents it
	// incremented.
	Increment(ctx context.Context, s Session, in Increment, slot int) (int64, error)
	// IncrementShowing writes in, an increment of one parent, and returns
	// the parent's new total, summed from what read returns, in the same
	// statement (IncrementOne), where the database can (wrote); else it
	// writes nothing. found is false when the parent does not exist.
	IncrementShowing(ctx context.Context, s Session, in Increment, read func(context.Context) (countersql.Sources, error)) (total int64, found, wrote bool, err error)
	// Fold folds the slot rows of owners into their parents' column, in
	// tx; FoldDeltas folds the delta rows with ids in (after, upTo].
	Fold(ctx context.Context, tx Conn, t countersql.Table, owners []any) error
	FoldDeltas(ctx context.Context, tx Conn, t countersql.Table, after, upTo int64) error
	// FirstTake is a take's first try inside the caller's transaction,
	// where no row it reads may stay locked out of slot order: it takes
	// amount from one row and reports true, or finds none and reports
	// false (Take then gathers across the rows).
	FirstTake(ctx context.Context, s Session, t countersql.Table, slots int, key any, amount int64) (bool, error)
	// TakeFree takes amount from one slot row holding enough that no
	// other transaction holds, never waiting; tried is false where the
	// database has no such statement.
	TakeFree(ctx context.Context, c Conn, t countersql.Table, key any, amount int64) (ok, tried bool, err error)
	// LockAllSlots locks every slot row of the parent key in slot order,
	// reading each locked row through read.
	LockAllSlots(ctx context.Context, c Conn, t countersql.Table, key any, read func(func(countersql.Writer)) error) error
	// LockForSet writes the read of the parents among keys that exist,
	// locked where the database locks rows (Set).
	LockForSet(w countersql.Writer, t countersql.Table, keys []any)
	// LockForClear locks, where the database locks rows, the parents keys
	// (sorted) of count before their children are detached in bulk, or
	// with across the rows of the other side of a count through a join
	// table before their join rows go (see countersql's
	// LockParentsForClear).
	LockForClear(ctx context.Context, c Conn, count countersql.Count, keys []any, across bool) error
	// AddCounts adds amounts to the counts of keys (parents that exist),
	// never waiting for a slot row another transaction holds where the
	// database has such rows.
	AddCounts(ctx context.Context, c Conn, count countersql.Count, keys []any, amounts []int64) error
	// AddEach adds each of amounts to a slot of its parent in keys (sorted),
	// in the caller's transaction s, passing over the parents deleted
	// meanwhile: the write-behind flush.
	AddEach(ctx context.Context, s Session, t countersql.Table, slots int, keys []any, amounts []int64) error
	// Planless runs fn in the transaction tx with the planner's JIT
	// compilation off, and puts the setting back after it; where there is
	// no JIT, fn alone.
	Planless(ctx context.Context, tx Conn, fn func() error) error
	// RecountIn runs one batch of Recount: in a transaction of its own
	// without JIT (PostgreSQL), else in s as it is.
	RecountIn(ctx context.Context, s Session, run func(Session) error) error
	// Compaction returns the database's compaction statements, or why
	// Compaction is refused on it.
	Compaction() (countersql.Upserts, error)
	// AwaitReuse waits until the slot rows the compaction transaction xid
	// removed can be reused, and returns "", or why it stopped waiting
	// (see the PostgreSQL driver's awaitReuse); "" at once where the database tells
	// no transaction apart (xid "").
	AwaitReuse(ctx context.Context, c Conn, xid string) (string, error)
	// SlotBytes returns the bytes of table on disk, or 0 where the
	// database does not tell.
	SlotBytes(ctx context.Context, c Conn, table string) (int64, error)
	// DDL runs the DDL statements steps, in a transaction of s's own or in
	// s's where the database's DDL is transactional.
	DDL(ctx context.Context, s Session, steps []func(countersql.Writer)) error
	// CountTriggers returns the statements that (re)create the triggers
	// keeping count.
	CountTriggers(ctx context.Context, c Conn, count countersql.Count) ([]func(countersql.Writer), error)
	// ServerVersion returns the server's version where it tells the
	// database apart (MariaDB from MySQL), else "".
	ServerVersion(ctx context.Context, c Conn) string
	// ReadCommitted reports whether a transaction the library owns
	// begins at READ COMMITTED (Session.Begin), given whether its caller
	// asked for it: whatever the session's default isolation where the
	// statements are written for it, else as asked.
	ReadCommitted(asked bool) bool
}

// Dialect is one database as the engine runs on it: the SQL it speaks
// (countersql.Dialect, embedded) and what it does its own way (Driver).
// internal/driver.For makes one for an ORM's dialect name; the front ends
// hold it and hand it to every call, as River passes its driver, so that
// nothing is registered and nothing is looked up.
type Dialect struct {
	countersql.Dialect
	Driver Driver
	// driverOf makes the driver of a variant of the dialect (OnCitus,
	// WithoutCitus): the same database's package.
	driverOf func(countersql.Dialect) Driver
}

// NewDialect returns the dialect d with its driver, which driverOf makes
// (the database's package: postgres.New, mysql.New, sqlite.New).
func NewDialect(d countersql.Dialect, driverOf func(countersql.Dialect) Driver) Dialect {
	return Dialect{Dialect: d, Driver: driverOf(d), driverOf: driverOf}
}

// OnCitus returns the dialect of the same database with the Citus
// extension, its statements and its driver (d itself elsewhere than on
// PostgreSQL).
func (d Dialect) OnCitus() Dialect { return NewDialect(d.Dialect.OnCitus(), d.driverOf) }

// WithoutCitus returns the dialect of the same database without Citus.
func (d Dialect) WithoutCitus() Dialect { return NewDialect(d.Dialect.WithoutCitus(), d.driverOf) }

// StatementFolds is the part of a Driver that PostgreSQL and SQLite have
// alike: they fold, compact, add to counts and add a flush's amounts with
// single statements (countersql.Upserts), their DDL is transactional, and
// a join's own triggers see a foreign key cascade. Their drivers embed it.
type StatementFolds struct{ D countersql.Upserts }

func (f StatementFolds) Compaction() (countersql.Upserts, error) { return f.D, nil }

func (StatementFolds) AwaitReuse(context.Context, Conn, string) (string, error) { return "", nil }

// DDL: PostgreSQL's and SQLite's DDL is transactional: all or none.
func (StatementFolds) DDL(ctx context.Context, s Session, steps []func(countersql.Writer)) error {
	return OwnTransaction(ctx, s, func(tx Session) error { return RunSteps(ctx, tx, steps) })
}

func (StatementFolds) ServerVersion(context.Context, Conn) string { return "" }

// CountTriggers: the join's own triggers see a foreign key cascade.
func (f StatementFolds) CountTriggers(_ context.Context, _ Conn, count countersql.Count) ([]func(countersql.Writer), error) {
	return f.D.InstallCountTriggers(count), nil
}

// AddCounts: one statement per chunk of keys.
// On Citus the slot is read first, and written as a value.
func (f StatementFolds) AddCounts(ctx context.Context, c Conn, count countersql.Count, keys []any, amounts []int64) error {
	add := func(w countersql.Writer, keys []any, amounts []int64) { f.D.AddCounts(w, count, keys, amounts) }
	if f.D.Citus() {
		slot, err := QueryInt(ctx, c, func(w countersql.Writer) { f.D.SessionSlot(w, count.SlotCount) })
		if err != nil {
			return err
		}
		add = func(w countersql.Writer, keys []any, amounts []int64) { f.D.AddCountsAt(w, count, slot, keys, amounts) }
	}
	for start := 0; start < len(keys); start += FillChunk {
		end := min(start+FillChunk, len(keys))
		if _, err := c.Exec(ctx, func(w countersql.Writer) { add(w, keys[start:end], amounts[start:end]) }); err != nil {
			return err
		}
	}
	return nil
}

// AddEach: one upsert per chunk of parents, a random slot per parent; a
// chunk that names a parent deleted meanwhile fails on its foreign key and
// is written again without it (SkippingGone).
func (f StatementFolds) AddEach(ctx context.Context, s Session, t countersql.Table, slots int, keys []any, amounts []int64) error {
	picked := make([]int, len(keys))
	for i := range picked {
		picked[i] = rand.IntN(max(slots, 1))
	}
	return SkippingGone(ctx, s, len(keys), func(from, to int) error {
		_, err := s.Exec(ctx, func(w countersql.Writer) { f.D.AddToSlots(w, t, keys[from:to], picked[from:to], amounts[from:to]) })
		return err
	})
}

// LockAllSlots: one statement.
func (f StatementFolds) LockAllSlots(_ context.Context, _ Conn, t countersql.Table, key any, read func(func(countersql.Writer)) error) error {
	return read(func(w countersql.Writer) { f.D.LockAllSlots(w, t, key) })
}

func (f StatementFolds) Fold(ctx context.Context, tx Conn, t countersql.Table, owners []any) error {
	return RunSteps(ctx, tx, f.D.Fold(t, owners))
}

func (f StatementFolds) FoldDeltas(ctx context.Context, tx Conn, t countersql.Table, after, upTo int64) error {
	return RunSteps(ctx, tx, f.D.FoldDeltas(t, after, upTo))
}

// RowLocking is the part of a Driver that PostgreSQL and MySQL have
// alike: they lock rows that other transactions may hold, so a set locks
// the parents it writes and a bulk clear of children locks their parents
// first (countersql.RowLocks). Their drivers embed it.
type RowLocking struct{ L countersql.RowLocks }

// LockForSet: the parents among keys, FOR UPDATE.
func (r RowLocking) LockForSet(w countersql.Writer, t countersql.Table, keys []any) {
	r.L.LockParentsForSet(w, t, keys)
}

// LockForClear: the parents, or the other side's rows, FOR UPDATE in key
// order.
func (r RowLocking) LockForClear(ctx context.Context, c Conn, count countersql.Count, keys []any, across bool) error {
	if len(keys) == 0 {
		return nil
	}
	_, err := QueryKeys(ctx, c, func(w countersql.Writer) {
		if across {
			r.L.LockAcrossForUpdate(w, count, keys)
		} else {
			r.L.LockParentsForClear(w, count, keys)
		}
	})
	return err
}

// LockForClear locks, where d's database locks rows, the parents keys
// (sorted) of count before their children are detached in bulk, or with
// across the other side's rows of a count through a join table (its
// Driver's LockForClear).
func LockForClear(ctx context.Context, c Conn, d Dialect, count countersql.Count, keys []any, across bool) error {
	return d.Driver.LockForClear(ctx, c, count, keys, across)
}

// RunSteps runs statements in order, stopping at the first that fails.
func RunSteps(ctx context.Context, tx Conn, steps []func(countersql.Writer)) error {
	for _, step := range steps {
		if _, err := tx.Exec(ctx, step); err != nil {
			return err
		}
	}
	return nil
}

// SkipsLocked reports whether in, declared skip-locked, increments one
// parent, the only increment that takes a free slot row.
func (in Increment) SkipsLocked() bool {
	_, one := in.One()
	return in.SkipLocked && one
}
