package gormcounter

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"

	"github.com/hotcounter/hotcounter/internal/engine"
	"github.com/hotcounter/hotcounter/internal/spec"
)

// Rollup runs one rollup pass over every counter of the given models, a
// batch of parents per transaction, and returns when it has walked each
// slot table once.
//
//	err := gormcounter.Rollup(db.WithContext(ctx), &Post{})
//
// For rollup and append counters it folds the pending slot values (or delta
// rows) into the parent columns and removes what it folded. It compacts sum
// counters: it moves each parent's slot values into one of its slot rows
// and deletes the others (sets them to 0 where slots are pre-created), so
// that a load sums one row per parent plus whatever arrived since. Totals
// do not change.
//
// It never waits on a row lock: on PostgreSQL and MySQL, slot rows and
// parents that another transaction holds are skipped and stay as they are
// until the next pass. Increments made during the pass are folded now or
// next time, never twice, never lost. Deadlocks and serialization failures
// of its own transactions are retried. Rollup must not run inside the
// caller's transaction.
func Rollup(db *gorm.DB, models ...any) error {
	p, counters, err := rollupCounters(db, models)
	if err != nil {
		return err
	}
	return p.rollup(db, counters, func() bool { return false })
}

// rollup folds every counter, checking stop between batches.
func (p *Plugin) rollup(db *gorm.DB, counters []*counter, stop func() bool) error {
	for _, c := range counters {
		if err := p.foldAll(db, c, stop); err != nil {
			return err
		}
	}
	return nil
}

// RollupLoop runs a Rollup pass at once and then every interval until ctx is
// done, and then returns nil. Cancelling ctx lets the batch in progress
// commit and stops before the next one, so no fold is left half done. A
// failed pass is logged through db's logger and the loop goes on; a model
// without counters or with a bad declaration is an error at the start. Run it in its own goroutine:
//
//	go gormcounter.RollupLoop(ctx, db, time.Second, &Post{})
func RollupLoop(ctx context.Context, db *gorm.DB, interval time.Duration, models ...any) error {
	if interval <= 0 {
		return fmt.Errorf("gormcounter: RollupLoop: interval must be positive, got %v", interval)
	}
	p, counters, err := rollupCounters(db, models)
	if err != nil {
		return err
	}
	db = db.WithContext(context.WithoutCancel(ctx))
	stop := func() bool { return ctx.Err() != nil }
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if err := p.rollup(db, counters, stop); err != nil {
			db.Logger.Error(ctx, "gormcounter: rollup pass failed (will retry): %v", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// rollupCounters returns db's plugin and the counters of models; a model
// without one is an error.
func rollupCounters(db *gorm.DB, models []any) (*Plugin, []*counter, error) {
	p, err := pluginOf(db)
	if err != nil {
		return nil, nil, err
	}
	if len(models) == 0 {
		return nil, nil, errors.New("gormcounter: Rollup: no model given")
	}
	var out []*counter
	for _, v := range models {
		m, err := p.modelOf(db, v)
		if err != nil {
			return nil, nil, err
		}
		if m == nil || len(m.counters) == 0 {
			return nil, nil, fmt.Errorf("gormcounter: Rollup: %T has no counter (tag one `gorm:\"counter\"`)", v)
		}
		out = append(out, m.counters...)
	}
	return p, out, nil
}

// foldAll walks c's slot table in key order, folding (or, for a sum
// counter, compacting) a batch of parents per transaction, until it has
// walked it all or stop says so.
func (p *Plugin) foldAll(db *gorm.DB, c *counter, stop func() bool) error {
	ctx := db.Statement.Context
	s := gormSession{gormConn{db: db}}
	inTx := func(ctx context.Context, fn func(engine.Conn) error) error {
		return s.Begin(ctx, false, func(tx engine.Session) error { return fn(tx) })
	}
	var err error
	if c.opts.Mode == spec.Sum {
		err = engine.Compact(ctx, s, p.dialect, c.table, c.precreate, p.cfg.RollupBatchSize, stop, inTx)
	} else {
		err = engine.Rollup(ctx, s, p.dialect, c.table, c.opts.Mode == spec.Append, p.cfg.RollupBatchSize, stop, inTx)
	}
	if err != nil {
		return fmt.Errorf("gormcounter: rollup %s: %w", c.name(), err)
	}
	return nil
}
