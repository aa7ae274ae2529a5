package engine

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"

	"github.com/hotcounter/hotcounter/internal/countersql"
	"github.com/hotcounter/hotcounter/internal/dberr"
	"github.com/hotcounter/hotcounter/internal/spec"
)

// strategy is what one database does its own way, where the databases
// differ: how it writes increments (and a write-behind flush's), folds
// them, takes from stock, locks a parent's slot rows and the parents of a
// set, adds to counts, runs DDL and a pass's transaction, whether it
// compacts, and how it tells its server apart. Each database's is one
// type, chosen once from the dialect (strategyOf), so that the sequences
// that use it ask no dialect what it can do.
type strategy interface {
	// increment writes in, its slot drawn, and returns how many parents it
	// incremented.
	increment(ctx context.Context, s Session, in Increment, slot int) (int64, error)
	// incrementShowing writes in, an increment of one parent, and returns
	// the parent's new total, summed from what read returns, in the same
	// statement (IncrementOne), where the database can (wrote); else it
	// writes nothing. found is false when the parent does not exist.
	incrementShowing(ctx context.Context, s Session, in Increment, read func(context.Context) (countersql.Sources, error)) (total int64, found, wrote bool, err error)
	// fold folds the slot rows of owners into their parents' column, in
	// tx; foldDeltas folds the delta rows with ids in (after, upTo].
	fold(ctx context.Context, tx Conn, t countersql.Table, owners []any) error
	foldDeltas(ctx context.Context, tx Conn, t countersql.Table, after, upTo int64) error
	// firstTake is a take's first try inside the caller's transaction,
	// where no row it reads may stay locked out of slot order: it takes
	// amount from one row and reports true, or finds none and reports
	// false (Take then gathers across the rows).
	firstTake(ctx context.Context, s Session, t countersql.Table, slots int, key any, amount int64) (bool, error)
	// takeFree takes amount from one slot row holding enough that no
	// other transaction holds, never waiting; tried is false where the
	// database has no such statement.
	takeFree(ctx context.Context, c Conn, t countersql.Table, key any, amount int64) (ok, tried bool, err error)
	// lockAllSlots locks every slot row of the parent key in slot order,
	// reading each locked row through read.
	lockAllSlots(ctx context.Context, c Conn, t countersql.Table, key any, read func(func(countersql.Writer)) error) error
	// lockForSet writes the read of the parents among keys that exist,
	// locked where the database locks rows (Set).
	lockForSet(w countersql.Writer, t countersql.Table, keys []any)
	// addCounts adds amounts to the counts of keys (parents that exist),
	// never waiting for a slot row another transaction holds where the
	// database has such rows.
	addCounts(ctx context.Context, c Conn, count countersql.Count, keys []any, amounts []int64) error
	// addEach adds each of amounts to a slot of its parent in keys (sorted),
	// in the caller's transaction s, passing over the parents deleted
	// meanwhile: the write-behind flush.
	addEach(ctx context.Context, s Session, t countersql.Table, slots int, keys []any, amounts []int64) error
	// planless runs fn in the transaction tx with the planner's JIT
	// compilation off, and puts the setting back after it; where there is
	// no JIT, fn alone.
	planless(ctx context.Context, tx Conn, fn func() error) error
	// recountIn runs one batch of Recount: in a transaction of its own
	// without JIT (PostgreSQL), else in s as it is.
	recountIn(ctx context.Context, s Session, run func(Session) error) error
	// compaction returns the database's compaction statements, or why
	// compaction is refused on it.
	compaction() (countersql.Upserts, error)
	// awaitReuse waits until the slot rows the compaction transaction xid
	// removed can be reused, and returns "", or why it stopped waiting
	// (see the function awaitReuse); "" at once where the database tells
	// no transaction apart (xid "").
	awaitReuse(ctx context.Context, c Conn, xid string) (string, error)
	// slotBytes returns the bytes of table on disk, or 0 where the
	// database does not tell.
	slotBytes(ctx context.Context, c Conn, table string) (int64, error)
	// ddl runs the DDL statements steps, in a transaction of s's own or in
	// s's where the database's DDL is transactional.
	ddl(ctx context.Context, s Session, steps []func(countersql.Writer)) error
	// countTriggers returns the statements that (re)create the triggers
	// keeping count.
	countTriggers(ctx context.Context, c Conn, count countersql.Count) ([]func(countersql.Writer), error)
	// serverVersion returns the server's version where it tells the
	// database apart (MariaDB from MySQL), else "".
	serverVersion(ctx context.Context, c Conn) string
}

// strategyOf returns the strategy of d's database.
func strategyOf(d countersql.Dialect) strategy {
	if my, ok := d.OnMySQL(); ok {
		return mysqlWrites{my}
	}
	if pg, ok := d.OnPostgres(); ok {
		return postgresWrites{statementFolds{pg.Upserts}, pg}
	}
	lite, _ := d.OnSQLite()
	return sqliteWrites{statementFolds{lite.Upserts}}
}

// statementFolds folds with the dialect's fold statements, run in order
// (PostgreSQL, SQLite), and holds what those two do alike.
type statementFolds struct{ d countersql.Upserts }

func (f statementFolds) compaction() (countersql.Upserts, error) { return f.d, nil }

func (statementFolds) awaitReuse(context.Context, Conn, string) (string, error) { return "", nil }

// ddl: PostgreSQL's and SQLite's DDL is transactional: all or none.
func (statementFolds) ddl(ctx context.Context, s Session, steps []func(countersql.Writer)) error {
	return OwnTransaction(ctx, s, func(tx Session) error { return runSteps(ctx, tx, steps) })
}

func (statementFolds) serverVersion(context.Context, Conn) string { return "" }

// countTriggers: the join's own triggers see a foreign key cascade.
func (f statementFolds) countTriggers(_ context.Context, _ Conn, count countersql.Count) ([]func(countersql.Writer), error) {
	return f.d.InstallCountTriggers(count), nil
}

// addCounts: one statement per chunk of keys.
func (f statementFolds) addCounts(ctx context.Context, c Conn, count countersql.Count, keys []any, amounts []int64) error {
	for start := 0; start < len(keys); start += FillChunk {
		end := min(start+FillChunk, len(keys))
		if _, err := c.Exec(ctx, func(w countersql.Writer) { f.d.AddCounts(w, count, keys[start:end], amounts[start:end]) }); err != nil {
			return err
		}
	}
	return nil
}

// addEach: one upsert per chunk of parents, a random slot per parent; a
// chunk that names a parent deleted meanwhile fails on its foreign key and
// is written again without it (SkippingGone).
func (f statementFolds) addEach(ctx context.Context, s Session, t countersql.Table, slots int, keys []any, amounts []int64) error {
	picked := make([]int, len(keys))
	for i := range picked {
		picked[i] = rand.IntN(max(slots, 1))
	}
	return SkippingGone(ctx, s, len(keys), func(from, to int) error {
		_, err := s.Exec(ctx, func(w countersql.Writer) { f.d.AddToSlots(w, t, keys[from:to], picked[from:to], amounts[from:to]) })
		return err
	})
}

// lockAllSlots: one statement.
func (f statementFolds) lockAllSlots(_ context.Context, _ Conn, t countersql.Table, key any, read func(func(countersql.Writer)) error) error {
	return read(func(w countersql.Writer) { f.d.LockAllSlots(w, t, key) })
}

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
type postgresWrites struct {
	statementFolds
	pg countersql.Postgres
}

func (w postgresWrites) increment(ctx context.Context, s Session, in Increment, slot int) (int64, error) {
	d, t := w.pg, in.Table
	switch {
	case in.Mode == spec.Append:
		return statements(ctx, s, d.Dialect, in, func(x countersql.Writer, cond func(countersql.Writer)) { d.AppendWhere(x, t, in.Delta, cond) })
	case s.InTx():
		// The transaction's own slot rows, in key order, for one parent or
		// many.
		return statements(ctx, s, d.Dialect, in, func(x countersql.Writer, cond func(countersql.Writer)) {
			d.IncrementOwnSlot(x, t, in.Slots, slot, in.Delta, cond)
		})
	case in.skipsLocked():
		var n int64
		// Its two statements commit alone, and the first changes nothing
		// when it finds no free row: retrying the pair cannot count twice.
		err := ownStatement(ctx, s, func() (err error) {
			n, err = IncrementFreeSlot(ctx, s, d, t, in.Slots, slot, in.Delta, in.cond(d.Dialect))
			return err
		})
		return n, err
	}
	return statements(ctx, s, d.Dialect, in, func(x countersql.Writer, cond func(countersql.Writer)) { d.IncrementWhere(x, t, slot, in.Delta, cond) })
}

// incrementShowing: a random slot of a sum counter that is not guarded;
// not a skip-locked counter's free row, nor inside a transaction (its own
// row).
func (w postgresWrites) incrementShowing(ctx context.Context, s Session, in Increment, read func(context.Context) (countersql.Sources, error)) (int64, bool, bool, error) {
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

// firstTake: one try that never waits and keeps no stray lock, a SKIP
// LOCKED take in a savepoint rolled back when it finds nothing (see
// tryInSavepoint).
func (w postgresWrites) firstTake(ctx context.Context, s Session, t countersql.Table, _ int, key any, amount int64) (bool, error) {
	return tryInSavepoint(ctx, s, w.pg, t, key, amount)
}

// takeFree: FOR UPDATE SKIP LOCKED.
func (w postgresWrites) takeFree(ctx context.Context, c Conn, t countersql.Table, key any, amount int64) (bool, bool, error) {
	ok, err := tryFreeSlot(ctx, c, w.pg, t, key, amount)
	return ok, true, err
}

func (w postgresWrites) lockForSet(x countersql.Writer, t countersql.Table, keys []any) {
	w.pg.LockParentsForSet(x, t, keys)
}

// planless: the planner's estimates on tables never analysed run into the
// millions, and JIT then compiled every batch (see Recount).
func (w postgresWrites) planless(ctx context.Context, tx Conn, fn func() error) error {
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

func (w postgresWrites) recountIn(ctx context.Context, s Session, run func(Session) error) error {
	return OwnTransaction(ctx, s, func(tx Session) error { return w.planless(ctx, tx, func() error { return run(tx) }) })
}

func (w postgresWrites) awaitReuse(ctx context.Context, c Conn, xid string) (string, error) {
	return awaitReuse(ctx, c, w.pg, xid)
}

func (w postgresWrites) slotBytes(ctx context.Context, c Conn, table string) (int64, error) {
	return QueryInt(ctx, c, func(x countersql.Writer) { w.pg.TableSize(x, table) })
}

// mysqlWrites: several statements per increment (see incrementMySQL).
// Inside the caller's transaction the session's own slot rows, which no
// other transaction writes, so it never waits.
type mysqlWrites struct{ d countersql.MySQL }

func (w mysqlWrites) increment(ctx context.Context, s Session, in Increment, slot int) (int64, error) {
	my := mysqlIncrement{Table: in.Table, Slot: slot, Delta: in.Delta}
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
		return appendMySQL(ctx, s, w.d, my)
	case s.InTx() && in.Delta != 0:
		return incrementOwnSlotMySQL(ctx, s, w.d, my, in.Slots)
	case in.skipsLocked():
		return incrementFreeSlotMySQL(ctx, s, w.d, my)
	}
	return incrementMySQL(ctx, s, w.d, my)
}

func (mysqlWrites) incrementShowing(context.Context, Session, Increment, func(context.Context) (countersql.Sources, error)) (int64, bool, bool, error) {
	return 0, false, false, nil
}

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

// takeFree: none; a take tries a random slot first.
func (mysqlWrites) takeFree(context.Context, Conn, countersql.Table, any, int64) (bool, bool, error) {
	return false, false, nil
}

// lockAllSlots: where the slot table has a surrogate key (ent's), a locking
// read through the unique (owner, slot) index would lock the gap below the
// rows too, making a neighbour's first insert wait: the rows are locked one
// by one by their slot, in slot order.
func (w mysqlWrites) lockAllSlots(ctx context.Context, c Conn, t countersql.Table, key any, read func(func(countersql.Writer)) error) error {
	if t.RowID == "" {
		return read(func(x countersql.Writer) { w.d.LockAllSlots(x, t, key) })
	}
	slots, err := QueryKeys(ctx, c, func(x countersql.Writer) { w.d.SlotNumbers(x, t, key) })
	if err != nil {
		return err
	}
	for _, slot := range slots {
		if err := read(func(x countersql.Writer) { w.d.LockSlot(x, t, key, slot) }); err != nil {
			return err
		}
	}
	return nil
}

func (w mysqlWrites) lockForSet(x countersql.Writer, t countersql.Table, keys []any) {
	w.d.LockParentsForSet(x, t, keys)
}

// addCounts: the session's own slot rows, never waiting (see AddToOwnSlot).
func (w mysqlWrites) addCounts(ctx context.Context, c Conn, count countersql.Count, keys []any, amounts []int64) error {
	_, _, err := AddToOwnSlot(ctx, c, w.d, count.Table, count.SlotCount, keys, amounts, false)
	return err
}

// addEach: through the increment path (exact-match UPDATEs of existing
// slot rows in a savepoint, an upsert for the missing ones, parents
// deleted meanwhile passed over), one slot for the whole flush, one
// increment per distinct amount: a multi-row upsert
// with per-row values would need VALUES(), which MySQL deprecates, and
// would insert (and lock the parent for its foreign key check) where an
// UPDATE suffices.
func (w mysqlWrites) addEach(ctx context.Context, s Session, t countersql.Table, slots int, keys []any, amounts []int64) error {
	slot := rand.IntN(max(slots, 1))
	groups := map[int64][]any{}
	var distinct []int64
	for i, k := range keys {
		a := amounts[i]
		if _, ok := groups[a]; !ok {
			distinct = append(distinct, a)
		}
		groups[a] = append(groups[a], k)
	}
	slices.Sort(distinct)
	for _, a := range distinct {
		if _, err := incrementMySQL(ctx, s, w.d, mysqlIncrement{Table: t, Keys: groups[a], Slot: slot, Delta: a}); err != nil {
			return err
		}
	}
	return nil
}

// ddl: each DDL statement commits the transaction it runs in: one by one.
// countTriggers: MySQL and MariaDB fire no trigger for the rows a foreign
// key cascade deletes, so a count through a join table whose key to the
// other side cascades also gets a trigger on the other side's table.
func (w mysqlWrites) countTriggers(ctx context.Context, c Conn, count countersql.Count) ([]func(countersql.Writer), error) {
	steps := w.d.InstallCountTriggers(count)
	if count.Across == nil {
		return steps, nil
	}
	var keys []any
	var err error
	for range 3 { // a read of the catalog: sent again when its connection broke (see countTriggers)
		if keys, err = QueryKeys(ctx, c, func(wr countersql.Writer) { w.d.DeleteCascades(wr, count) }); !dberr.ConnectionBroken(err) {
			break
		}
	}
	if err != nil || len(keys) == 0 {
		return steps, err
	}
	return append(steps, w.d.CascadeTrigger(count)), nil
}

// ddl: statement by statement, each committing on its own. Outside a
// transaction of the caller's, a sequence cut by a broken connection is run
// again from its start (each begins by dropping what it creates, IF
// EXISTS): in the suite, MariaDB answered a migration's trigger DDL with
// "invalid connection" once in a run, the server up and its log quiet, as
// it had its catalog reads (countTriggers).
func (mysqlWrites) ddl(ctx context.Context, s Session, steps []func(countersql.Writer)) error {
	err := runSteps(ctx, s, steps)
	for try := 1; try < 3 && !s.InTx() && dberr.ConnectionBroken(err); try++ {
		err = runSteps(ctx, s, steps)
	}
	return err
}

func (mysqlWrites) planless(_ context.Context, _ Conn, fn func() error) error { return fn() }

func (mysqlWrites) recountIn(_ context.Context, s Session, run func(Session) error) error {
	return run(s)
}

func (mysqlWrites) compaction() (countersql.Upserts, error) {
	return countersql.Upserts{}, ErrCompactMySQL
}

func (mysqlWrites) awaitReuse(context.Context, Conn, string) (string, error) { return "", nil }

func (mysqlWrites) slotBytes(context.Context, Conn, string) (int64, error) { return 0, nil }

// serverVersion: MariaDB says so in its version.
func (w mysqlWrites) serverVersion(ctx context.Context, c Conn) string {
	var version string
	if rows, err := c.Query(ctx, w.d.ServerVersion); err == nil {
		if rows.Next() {
			_ = rows.Scan(&version)
		}
		_ = rows.Close()
	}
	return version
}

// sqliteWrites: one upsert per increment. SQLite has one writer at a time:
// no row is ever held by another transaction, so there is no own or free
// slot row to take.
type sqliteWrites struct{ statementFolds }

func (w sqliteWrites) increment(ctx context.Context, s Session, in Increment, slot int) (int64, error) {
	d, t := w.d, in.Table
	if in.Mode == spec.Append {
		return statements(ctx, s, d.Dialect, in, func(x countersql.Writer, cond func(countersql.Writer)) { d.AppendWhere(x, t, in.Delta, cond) })
	}
	return statements(ctx, s, d.Dialect, in, func(x countersql.Writer, cond func(countersql.Writer)) { d.IncrementWhere(x, t, slot, in.Delta, cond) })
}

func (sqliteWrites) incrementShowing(context.Context, Session, Increment, func(context.Context) (countersql.Sources, error)) (int64, bool, bool, error) {
	return 0, false, false, nil
}

// firstTake: one writer at a time, nothing held by another: the rows in
// slot order.
func (w sqliteWrites) firstTake(ctx context.Context, s Session, t countersql.Table, slots int, key any, amount int64) (bool, error) {
	return takeOne(ctx, s, w.d.Dialect, t, slots, key, amount, true)
}

// takeFree: none; no row is ever held by another transaction.
func (sqliteWrites) takeFree(context.Context, Conn, countersql.Table, any, int64) (bool, bool, error) {
	return false, false, nil
}

func (w sqliteWrites) lockForSet(x countersql.Writer, t countersql.Table, keys []any) {
	w.d.SelectKeys(x, t, w.d.KeyIn(t, keys))
}

func (sqliteWrites) planless(_ context.Context, _ Conn, fn func() error) error { return fn() }

func (sqliteWrites) recountIn(_ context.Context, s Session, run func(Session) error) error {
	return run(s)
}

func (sqliteWrites) slotBytes(context.Context, Conn, string) (int64, error) { return 0, nil }
