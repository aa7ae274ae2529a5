package gormcounter

import (
	"errors"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/hotcounter/hotcounter/internal/countersql"
	"github.com/hotcounter/hotcounter/internal/dberr"
	"github.com/hotcounter/hotcounter/internal/engine"
)

// Guarded counters: stock that never goes below zero.
//
//	type Item struct {
//		ID    uint
//		Stock int64 `gorm:"counter:guarded"`
//	}
//	gormcounter.Increment(db.Model(&item), "Stock", 500)       // restock
//	err := gormcounter.Take(db.Model(&item), "Stock", 2).Error // takes 2, or hotcounter.ErrInsufficient
//
// The stock is split over the counter's slot rows, each never below zero
// (the escrow method): a take subtracts from one row that holds enough, so
// buyers of one item do not queue on one row.

// Take subtracts amount (> 0) from the guarded counter field of the one row
// db's model names by its primary key, in full, or not at all: when less
// than amount is left, Error wraps hotcounter.ErrInsufficient and nothing changed.
// It never takes the counter below zero, and refuses only when the total
// really is short at that moment: if no single slot row holds enough, it
// locks every row of the item and takes from several, fullest first.
//
//	err := gormcounter.Take(db.Model(&Item{ID: id}), "Stock", 2).Error
//	if errors.Is(err, hotcounter.ErrInsufficient) { ... sold out ... }
//
// It runs in db's transaction if it has one (a rollback returns the stock),
// else in one of its own. On PostgreSQL the first try takes a row no other
// transaction holds (FOR UPDATE SKIP LOCKED) and never waits. Outside a
// transaction, takes of one item that arrive while Config.InFlight others
// run go together as one take of their sum (one statement and commit for
// all); if that is refused, each runs alone, so a buyer is refused only
// when less than its own amount is left. RowsAffected is 1 after a take.
func Take(db *gorm.DB, field string, amount int64) *gorm.DB {
	if refused := unmodelled(db, "Take", field); refused != nil {
		return refused
	}
	return db.Session(&gorm.Session{SkipDefaultTransaction: true}).
		UpdateColumn(field, takeValue{field: field, amount: amount})
}

// takeValue is what Take assigns, as incrementValue for Increment.
type takeValue struct {
	field  string
	amount int64
}

func (v takeValue) Build(b clause.Builder) { _ = b.AddError(unwritten(b, "Take", v.field)) }

// guarded writes a take from, or a restock of, the guarded counter of the
// one row key: a restock spreads over the slots.
func (p *Plugin) guarded(db *gorm.DB, inc increment, t countersql.Table, key any, where clause.Where) (int64, error) {
	// Takes are combined (TakeTogether): s may be used after this call returns.
	s := gormSession{gormConn{db: detach(db), table: t.Parent}}
	ctx := db.Statement.Context
	if inc.take {
		// Outside a transaction, takes of one item that arrive while
		// others run go together as one take of their sum, as increments
		// do, where an increment would be combined (combineKey).
		k, ok := p.combineKey(db, inc.c, t.Parent, where)
		if !ok {
			k = "" // alone
		}
		if err := engine.TakeTogether(ctx, s, p.dialect, &p.takes, k, t, inc.c.opts.Slots, key, inc.delta); err != nil {
			return 0, err
		}
		return 1, nil
	}
	if inc.delta == 0 {
		return 0, nil
	}
	// A restock, spread over the slots so that every row holds stock.
	_, _, _, err := engine.IncrementOne(ctx, s, p.dialect, engine.Increment{Table: t, Mode: inc.c.opts.Mode,
		Slots: inc.c.opts.Slots, Guarded: true, Key: key, Delta: inc.delta}, nil)
	if dberr.ForeignKeyViolation(err) || s.ParentGone(err) {
		return 0, nil // no such row, as an UPDATE would find none
	}
	if err != nil {
		return 0, err
	}
	return 1, nil
}

// decrease writes a decrease of an unsigned counter (inc.floor) as a take
// of inc.delta from each row the update targets, so that none goes below
// zero: one row named by its key alone goes as Take goes (combined with
// others); any other update reads the keys its conditions select (a
// soft-delete condition, a Where) and takes from each in one transaction,
// all or nothing.
func (p *Plugin) decrease(db *gorm.DB, inc increment, t countersql.Table, where clause.Where) (int64, error) {
	if key, ok := primaryKeyOnly(db.Statement); ok {
		return p.guarded(db, inc, t, key, where)
	}
	s := gormSession{gormConn{db: detach(db), table: t.Parent}}
	ctx := db.Statement.Context
	var n int64
	err := engine.OwnTransaction(ctx, s, func(tx engine.Session) error {
		keys, err := engine.QueryKeys(ctx, tx, func(w countersql.Writer) { p.dialect.SelectKeys(w, t, whereCond(where)) })
		if err != nil {
			return err
		}
		takeAll := func() error {
			for _, key := range keys {
				if err := engine.Take(ctx, tx, p.dialect, t, inc.c.opts.Slots, key, inc.delta); err != nil && !errors.Is(err, engine.ErrNotFound) {
					return err
				}
			}
			return nil
		}
		if s.InTx() {
			err = engine.InSavepoint(ctx, tx, "hc_decrease", takeAll)
		} else {
			err = takeAll()
		}
		n = int64(len(keys))
		return err
	})
	return n, err
}
