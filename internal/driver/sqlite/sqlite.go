// Package sqlite is hotcounter's SQLite driver: one writer at a time, so
// no slot row is ever held by another transaction, and every increment,
// fold and compaction is one statement. internal/driver.For hands it to
// the engine with the sqlite dialect.
package sqlite

import (
	"context"

	"github.com/hotcounter/hotcounter/internal/countersql"
	"github.com/hotcounter/hotcounter/internal/engine"
	"github.com/hotcounter/hotcounter/internal/spec"
)

// ReadCommitted: never; SQLite has one writer at a time and no isolation
// levels to choose.
func (driver) ReadCommitted(bool) bool { return false }

// New returns the driver of d, the SQLite dialect.
func New(d countersql.Dialect) engine.Driver {
	lite, _ := d.OnSQLite()
	return driver{engine.StatementFolds{D: lite.Upserts}}
}

// driver is SQLite's engine.Driver: one upsert per increment. SQLite has one writer at a time:
// no row is ever held by another transaction, so there is no own or free
// slot row to take.
type driver struct{ engine.StatementFolds }

func (w driver) Increment(ctx context.Context, s engine.Session, in engine.Increment, slot int) (int64, error) {
	d, t := w.D, in.Table
	if in.Mode == spec.Append {
		return engine.ExecIncrement(ctx, s, d.Dialect, in, func(x countersql.Writer, cond func(countersql.Writer)) { d.AppendWhere(x, t, in.Delta, cond) })
	}
	return engine.ExecIncrement(ctx, s, d.Dialect, in, func(x countersql.Writer, cond func(countersql.Writer)) { d.IncrementWhere(x, t, slot, in.Delta, cond) })
}

func (driver) IncrementShowing(context.Context, engine.Session, engine.Increment, func(context.Context) (countersql.Sources, error)) (int64, bool, bool, error) {
	return 0, false, false, nil
}

// FirstTake: one writer at a time, nothing held by another: the rows in
// slot order.
func (w driver) FirstTake(ctx context.Context, s engine.Session, t countersql.Table, slots int, key any, amount int64) (bool, error) {
	return engine.TakeOne(ctx, s, engine.NewDialect(w.D.Dialect, New), t, slots, key, amount, true)
}

// TakeFree: none; no row is ever held by another transaction.
func (driver) TakeFree(context.Context, engine.Conn, countersql.Table, any, int64) (bool, bool, error) {
	return false, false, nil
}

// LockForClear: nothing; no row is ever held by another transaction.
func (driver) LockForClear(context.Context, engine.Conn, countersql.Count, []any, bool) error {
	return nil
}

func (w driver) LockForSet(x countersql.Writer, t countersql.Table, keys []any) {
	w.D.SelectKeys(x, t, w.D.KeyIn(t, keys))
}

func (driver) Planless(_ context.Context, _ engine.Conn, fn func() error) error { return fn() }

func (driver) RecountIn(_ context.Context, s engine.Session, run func(engine.Session) error) error {
	return run(s)
}

func (driver) SlotBytes(context.Context, engine.Conn, string) (int64, error) { return 0, nil }
