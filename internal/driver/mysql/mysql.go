// Package mysql is hotcounter's MySQL and MariaDB driver: how the
// engine's sequences write, fold, take and lock on InnoDB, where an
// increment or a fold is several statements (the slot rows' keys read
// first, exact-match updates, the session's own slot row claimed with a
// named lock), so that no statement locks a gap another writer needs.
// internal/driver.For hands it to the engine with the mysql dialect.
package mysql

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/hotcounter/hotcounter/internal/countersql"
	"github.com/hotcounter/hotcounter/internal/dberr"
	"github.com/hotcounter/hotcounter/internal/engine"
	"github.com/hotcounter/hotcounter/internal/spec"
)

// ReadCommitted: when asked (an UPDATE that finds no row locks no gap
// there); else the session's default, REPEATABLE READ.
func (driver) ReadCommitted(asked bool) bool { return asked }

// New returns the driver of d, a MySQL dialect (countersql.For("mysql")).
func New(d countersql.Dialect) engine.Driver {
	my, _ := d.OnMySQL()
	return driver{engine.RowLocking{L: my.RowLocks}, my}
}

// driver is MySQL's and MariaDB's engine.Driver: several statements per
// increment (see increment). Inside the caller's transaction the
// session's own slot rows, which no other transaction writes, so it never
// waits.
type driver struct {
	engine.RowLocking
	d countersql.MySQL
}

func (w driver) Increment(ctx context.Context, s engine.Session, in engine.Increment, slot int) (int64, error) {
	my := incr{Table: in.Table, Slot: slot, Delta: in.Delta}
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
		return appendRow(ctx, s, w.d, my)
	case s.InTx() && in.Delta != 0:
		return incrementOwnSlot(ctx, s, w.d, my, in.Slots)
	case in.SkipsLocked():
		return incrementFreeSlot(ctx, s, w.d, my)
	}
	return increment(ctx, s, w.d, my)
}

func (driver) IncrementShowing(context.Context, engine.Session, engine.Increment, func(context.Context) (countersql.Sources, error)) (int64, bool, bool, error) {
	return 0, false, false, nil
}

func (w driver) Fold(ctx context.Context, tx engine.Conn, t countersql.Table, owners []any) error {
	return fold(ctx, tx, w.d, t, owners)
}

func (w driver) FoldDeltas(ctx context.Context, tx engine.Conn, t countersql.Table, after, upTo int64) error {
	return foldDeltas(ctx, tx, w.d, t, after, upTo)
}

// FirstTake: none. InnoDB keeps the row locks taken after a savepoint that
// is rolled back, so any try would leave a stray lock: the take locks
// every row in slot order at once (a test of 16 buyers taking in ent
// transactions deadlocked when a try came first).
func (driver) FirstTake(context.Context, engine.Session, countersql.Table, int, any, int64) (bool, error) {
	return false, nil
}

// TakeFree: none; a take tries a random slot first.
func (driver) TakeFree(context.Context, engine.Conn, countersql.Table, any, int64) (bool, bool, error) {
	return false, false, nil
}

// LockAllSlots: where the slot table has a surrogate key (ent's), a locking
// read through the unique (owner, slot) index would lock the gap below the
// rows too, making a neighbour's first insert wait: the rows are locked one
// by one by their slot, in slot order.
func (w driver) LockAllSlots(ctx context.Context, c engine.Conn, t countersql.Table, key any, read func(func(countersql.Writer)) error) error {
	if t.RowID == "" {
		return read(func(x countersql.Writer) { w.d.LockAllSlots(x, t, key) })
	}
	slots, err := engine.QueryKeys(ctx, c, func(x countersql.Writer) { w.d.SlotNumbers(x, t, key) })
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

// AddCounts: the session's own slot rows, never waiting (see addToOwnSlots).
func (w driver) AddCounts(ctx context.Context, c engine.Conn, count countersql.Count, keys []any, amounts []int64) error {
	_, _, err := addToOwnSlots(ctx, c, w.d, count.Table, count.SlotCount, keys, amounts, false)
	return err
}

// AddEach: through the increment path (exact-match UPDATEs of existing
// slot rows in a savepoint, an upsert for the missing ones, parents
// deleted meanwhile passed over), one slot for the whole flush, one
// increment per distinct amount: a multi-row upsert
// with per-row values would need VALUES(), which MySQL deprecates, and
// would insert (and lock the parent for its foreign key check) where an
// UPDATE suffices.
func (w driver) AddEach(ctx context.Context, s engine.Session, t countersql.Table, slots int, keys []any, amounts []int64) error {
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
		if _, err := increment(ctx, s, w.d, incr{Table: t, Keys: groups[a], Slot: slot, Delta: a}); err != nil {
			return err
		}
	}
	return nil
}

// CountTriggers: MySQL and MariaDB fire no trigger for the rows a foreign
// key cascade deletes, so a count through a join table whose key to the
// other side cascades also gets a trigger on the other side's table.
func (w driver) CountTriggers(ctx context.Context, c engine.Conn, count countersql.Count) ([]func(countersql.Writer), error) {
	steps := w.d.InstallCountTriggers(count)
	if count.Across == nil {
		return steps, nil
	}
	var keys []any
	var err error
	for range 3 { // a read of the catalog: sent again when its connection broke (see the engine's countTriggers)
		if keys, err = engine.QueryKeys(ctx, c, func(wr countersql.Writer) { w.d.DeleteCascades(wr, count) }); !dberr.ConnectionBroken(err) {
			break
		}
	}
	if err != nil || len(keys) == 0 {
		return steps, err
	}
	return append(steps, w.d.CascadeTrigger(count)), nil
}

// ReplaceTriggers: on MariaDB, triggers are replaced in place (CREATE OR
// REPLACE TRIGGER), so that no write between a DROP and its CREATE goes
// uncounted; MySQL has no such statement, and drops and creates them.
func (w driver) ReplaceTriggers(ctx context.Context, c engine.Conn, steps []func(countersql.Writer)) ([]func(countersql.Writer), error) {
	if !strings.Contains(w.ServerVersion(ctx, c), "MariaDB") {
		return steps, nil
	}
	return w.d.OrReplace(steps)
}

// DDL: statement by statement, each committing on its own. Outside a
// transaction of the caller's, a sequence cut by a broken connection is run
// again from its start (each begins by dropping what it creates, IF
// EXISTS): in the suite, MariaDB answered a migration's trigger DDL with
// "invalid connection" once in a run, the server up and its log quiet, as
// it had its catalog reads (countTriggers).
func (driver) DDL(ctx context.Context, s engine.Session, steps []func(countersql.Writer)) error {
	err := engine.RunSteps(ctx, s, steps)
	for try := 1; try < 3 && !s.InTx() && dberr.ConnectionBroken(err); try++ {
		err = engine.RunSteps(ctx, s, steps)
	}
	return err
}

func (driver) Planless(_ context.Context, _ engine.Conn, fn func() error) error { return fn() }

func (driver) RecountIn(_ context.Context, s engine.Session, run func(engine.Session) error) error {
	return run(s)
}

func (driver) Compaction() (countersql.Upserts, error) {
	return countersql.Upserts{}, ErrCompact
}

func (driver) AwaitReuse(context.Context, engine.Conn, string) (string, error) { return "", nil }

func (driver) SlotBytes(context.Context, engine.Conn, string) (int64, error) { return 0, nil }

// ServerVersion: MariaDB says so in its version.
func (w driver) ServerVersion(ctx context.Context, c engine.Conn) string {
	var version string
	if rows, err := c.Query(ctx, w.d.ServerVersion); err == nil {
		if rows.Next() {
			_ = rows.Scan(&version)
		}
		_ = rows.Close()
	}
	return version
}

// ErrCompact is Compact's error on MySQL and MariaDB. It wraps
// errors.ErrUnsupported.
var ErrCompact = fmt.Errorf("%w on MySQL/MariaDB: under REPEATABLE READ a transaction that reads a counter, "+
	"increments it and reads it again would see the values a pass moved meanwhile twice or not at all", errors.ErrUnsupported)
