package gormcounter

import (
	"context"
	"fmt"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/hotcounter/hotcounter"
	"github.com/hotcounter/hotcounter/internal/engine"
	"github.com/hotcounter/hotcounter/internal/spec"
)

// RollupPass runs one rollup pass over every rollup counter of the given models:
// it folds the pending slot values into the parent columns and removes the
// slot rows it folded, a batch of parents per transaction, and returns when
// it has walked each slot table once.
//
//	err := gormcounter.RollupPass(db.WithContext(ctx), &Post{})
//
// It never waits on a row lock: on PostgreSQL slot rows and parents that
// another transaction holds are skipped and stay pending for the next pass.
// Increments made during the pass are folded now or next time, never twice,
// never lost. Deadlocks and serialization failures of its own transactions
// are retried. Given a *gorm.DB inside a transaction it returns an error:
// it runs transactions of its own. Models without rollup counters are
// passed over, so the application's whole list of models can be given;
// when none has one, it is an error naming them.
func RollupPass(db *gorm.DB, models ...any) error {
	p, counters, err := rollupCounters(db, models, "RollupPass")
	if err != nil {
		return err
	}
	return p.rollup(db, counters, func() bool { return false })
}

// rollup folds every counter, checking stop between batches.
func (p *Plugin) rollup(db *gorm.DB, counters []*counter, stop func() bool) error {
	return p.store().RollupPass(db.Statement.Context, passSession(db), engineCounters(counters), stop)
}

// RollupLoop runs a [RollupPass] at once and then every interval until ctx is
// done, and then returns nil. Cancelling ctx lets the batch in progress
// commit and stops before the next one, so no fold is left half done. A
// failed pass is retried at the next tick; [Config.OnError] hears of it.
// Models without rollup counters are passed over (an error at the start
// when none has one), and a bad declaration is an error at the start. Run
// it in its own goroutine:
//
//	go gormcounter.RollupLoop(ctx, db, time.Second, &Post{})
func RollupLoop(ctx context.Context, db *gorm.DB, interval time.Duration, models ...any) error {
	p, counters, err := rollupCounters(db, models, "RollupLoop")
	if err != nil {
		return err
	}
	session := func(work context.Context) engine.Session { return passSession(db.WithContext(work)) }
	return p.store().RollupLoop(ctx, interval, session, engineCounters(counters), p.onError(db))
}

// rollupCounters returns db's plugin and the rollup counters of models; a
// model without one is an error.
func rollupCounters(db *gorm.DB, models []any, name string) (*Plugin, []*counter, error) {
	return passCounters(db, models, name, "rollup counter (tag one `gorm:\"counter:rollup\"`)",
		func(c *counter) bool { return c.opts.Mode.HasColumn() })
}

// passCounters returns db's plugin and the counters of models that a pass
// named name works on (want). Models without one are passed over, so that
// the application's whole list of models can be given; when none of them
// has one, the error names them and says they have no `what`.
func passCounters(db *gorm.DB, models []any, name, what string, want func(*counter) bool) (*Plugin, []*counter, error) {
	p, err := ownPassPlugin(db, name)
	if err != nil {
		return nil, nil, err
	}
	if len(models) == 0 {
		return nil, nil, fmt.Errorf("gormcounter: %s: no model given", name)
	}
	var out []*counter
	var without []string
	for _, v := range models {
		m, err := p.modelOf(db, v)
		if err != nil {
			return nil, nil, err
		}
		n := len(out)
		if m != nil {
			for _, c := range m.counters {
				if want(c) {
					out = append(out, c)
				}
			}
		}
		if len(out) == n {
			without = append(without, fmt.Sprintf("%T", v))
		}
	}
	if len(out) == 0 {
		verb := "has"
		if len(without) > 1 {
			verb = "have"
		}
		return nil, nil, fmt.Errorf("gormcounter: %s: %s %s no %s", name, strings.Join(without, ", "), verb, what)
	}
	return p, out, nil
}

// CompactPass runs one compaction pass over every sum counter of the given
// models. Random slots spread any parent incremented a few dozen times over
// all of its slot rows, hot or not, and every load sums all of them. For
// each parent with more than one slot row holding a value, CompactPass
// moves the values into one of those rows and deletes the others, so that
// a load sums one row per parent plus whatever arrived since. Totals never
// change: a load reads the slots in one statement and sees a parent's
// values before the move or after it. It returns what it did: parents
// gathered, rows removed, counters left alone and why (pre-created slot
// rows, guarded stock), and on PostgreSQL the slot tables' size before and
// after.
//
//	done, err := gormcounter.CompactPass(db.WithContext(ctx), &Post{})
//
// On PostgreSQL it leaves a slot table no larger than it found it: it cuts
// each batch of parents across several transactions, so that the rows the
// first ones remove make room on their pages for the rows the next ones
// rewrite (see docs/rollup-and-compaction.md).
//
// Like [RollupPass] it never waits on a row lock (on PostgreSQL a row that
// another transaction holds stays apart until the next pass), retries
// deadlocks and serialization failures, and refuses to run inside the
// caller's transaction. A pass reads the slot table's primary key from end
// to end to find the parents it compacts, so run it as often as the table's
// size allows (every minute, every hour), not on the rollup interval.
// Models without sum counters are passed over; when none has one, it is an
// error.
//
// PostgreSQL and SQLite only: on MySQL and MariaDB it returns an error
// wrapping [errors.ErrUnsupported] and changes nothing. Under their default
// REPEATABLE READ, a transaction that reads a counter, increments it and
// reads it again sees its own slot row as it is now and the others as of
// its snapshot, so values a pass moved in between would count twice or not
// at all.
func CompactPass(db *gorm.DB, models ...any) (hotcounter.Compacted, error) {
	p, counters, err := passCounters(db, models, "CompactPass", "sum counter (tag one `gorm:\"counter\"`)",
		func(c *counter) bool { return c.opts.Mode == spec.Sum })
	if err != nil {
		return hotcounter.Compacted{}, err
	}
	return p.store().CompactPass(db.Statement.Context, passSession(db), engineCounters(counters))
}

// passSession returns db as the engine session of a pass.
func passSession(db *gorm.DB) engine.Session { return gormSession{gormConn{db: db}} }

// ownPassPlugin returns db's plugin for a pass that runs transactions of its
// own (Rollup, Compact), and refuses db inside the caller's transaction:
// there every batch's row locks would last until the caller commits.
func ownPassPlugin(db *gorm.DB, name string) (*Plugin, error) {
	p, err := pluginOf(db)
	if err != nil {
		return nil, err
	}
	if _, inTx := db.Statement.ConnPool.(gorm.TxCommitter); inTx {
		return nil, fmt.Errorf("gormcounter: %s must not run inside a transaction: pass the *gorm.DB, not a transaction", name)
	}
	return p, nil
}
