package gormcounter

import (
	"fmt"

	"gorm.io/gorm"

	"github.com/hotcounter/hotcounter/internal/countersql"
	"github.com/hotcounter/hotcounter/internal/retry"
)

// The MySQL/MariaDB paths run several statements where PostgreSQL and SQLite
// run one (see the countersql functions they call for why). Each runs in the
// caller's transaction, or in one of its own that is retried on deadlock.

// incrementMySQL adds delta to slot `slot` of every parent the statement
// targets. An increment of one parent named only by its primary key
// (Model(&post), no Where, no soft delete) is one autocommit-able UPDATE of
// its slot row when the row exists, as pre-created rows do: no read of the
// parent, no transaction. Anything else takes incrementByKeys.
func (p *Plugin) incrementMySQL(db *gorm.DB, t countersql.Table, slot int, delta int64, cond func(countersql.Writer)) (int64, error) {
	if key, ok := primaryKeyOnly(db.Statement); ok && delta != 0 {
		res := execSQL(db, "", func(w countersql.Writer) { p.dialect.IncrementKeys(w, t, []any{key}, slot, delta) })
		if res.Error != nil || res.RowsAffected == 1 {
			return res.RowsAffected, res.Error
		}
	}
	return p.incrementByKeys(db, t, slot, delta, cond)
}

// primaryKeyOnly returns the key of the one parent an update targets when
// nothing but that key selects it: a model value with its primary key set,
// no Where clause, and no soft-delete condition.
func primaryKeyOnly(stmt *gorm.Statement) (any, bool) {
	if !singleTarget(stmt) || len(stmt.Schema.PrimaryFields) != 1 {
		return nil, false
	}
	if _, where := stmt.Clauses["WHERE"]; where {
		return nil, false
	}
	if len(stmt.Schema.QueryClauses) > 0 && !stmt.Unscoped {
		return nil, false
	}
	key, _ := stmt.Schema.PrimaryFields[0].ValueOf(stmt.Context, stmt.ReflectValue)
	return key, true
}

// incrementByKeys adds delta to slot `slot` of every parent matching cond: it
// reads their keys without locking them, updates the existing slot rows by
// exact key, and inserts the missing ones. It returns the number of parents
// incremented.
func (p *Plugin) incrementByKeys(db *gorm.DB, t countersql.Table, slot int, delta int64, cond func(countersql.Writer)) (int64, error) {
	var n int64
	err := p.ownTransaction(db, func(tx *gorm.DB) error {
		keys, err := queryKeys(tx, t.Parent, func(w countersql.Writer) { p.dialect.SelectKeys(w, t, cond) })
		n = int64(len(keys))
		if err != nil || len(keys) == 0 || delta == 0 {
			return err
		}
		for start := 0; start < len(keys); start += fillChunk {
			if err := p.incrementChunk(tx, t, keys[start:min(start+fillChunk, len(keys))], slot, delta); err != nil {
				return err
			}
		}
		return nil
	})
	return n, err
}

// incrementChunk adds delta to slot `slot` of each of keys. One UPDATE does
// it when every slot row exists (pre-created, or written before). When some
// are missing, which ones cannot be read back safely: a plain SELECT reads
// the transaction's snapshot, which may still show a row a rollup has since
// deleted, and a locking one takes the gap locks that make first inserts
// deadlock. So the UPDATE is undone to a savepoint and each key is done
// alone: UPDATE it, and INSERT ... ON DUPLICATE KEY UPDATE it if that found
// no row (a row that appeared meanwhile is then added to, not replaced).
func (p *Plugin) incrementChunk(tx *gorm.DB, t countersql.Table, keys []any, slot int, delta int64) error {
	update := func(keys []any) (int64, error) {
		res := execSQL(tx, "", func(w countersql.Writer) { p.dialect.IncrementKeys(w, t, keys, slot, delta) })
		return res.RowsAffected, res.Error
	}
	if len(keys) > 1 {
		const sp = "hc_increment"
		if err := tx.SavePoint(sp).Error; err != nil {
			return err
		}
		n, err := update(keys)
		if err != nil || n == int64(len(keys)) {
			return err
		}
		if err := tx.RollbackTo(sp).Error; err != nil {
			return err
		}
	}
	for _, k := range keys {
		n, err := update([]any{k})
		if err != nil {
			return err
		}
		if n == 1 {
			continue
		}
		if err := execSQL(tx, "", func(w countersql.Writer) { p.dialect.InsertSlots(w, t, []any{k}, slot, delta) }).Error; err != nil {
			return err
		}
	}
	return nil
}

// foldMySQL folds the pending slots of owners into their parents' column:
// it locks the parents and then their slot rows that no one else holds
// (SKIP LOCKED, so the fold never waits), adds the slot values to the
// columns, and deletes the slot rows it added. What it skips stays pending.
func (p *Plugin) foldMySQL(tx *gorm.DB, t countersql.Table, owners []any) error {
	parents, err := queryKeys(tx, "", func(w countersql.Writer) { p.dialect.LockParents(w, t, owners) })
	if err != nil || len(parents) == 0 {
		return err
	}
	rows, err := querySQL(tx, "", func(w countersql.Writer) { p.dialect.LockSlots(w, t, parents) }).Rows()
	if err != nil {
		return err
	}
	var (
		slotOwners []any
		slots      []int64
		keys       []any
		amounts    []int64
		index      = map[string]int{}
	)
	for rows.Next() {
		var owner any
		var slot, n int64
		if err := rows.Scan(&owner, &slot, &n); err != nil {
			rows.Close()
			return err
		}
		owner = normalizeKey(owner)
		slotOwners, slots = append(slotOwners, owner), append(slots, slot)
		k := fmt.Sprint(owner)
		i, seen := index[k]
		if !seen {
			i = len(keys)
			index[k] = i
			keys, amounts = append(keys, owner), append(amounts, 0)
		}
		amounts[i] += n
	}
	if err := rows.Close(); err != nil {
		return err
	}
	if err := rows.Err(); err != nil || len(slotOwners) == 0 {
		return err
	}
	if err := execSQL(tx, "", func(w countersql.Writer) { p.dialect.AddToColumns(w, t, keys, amounts) }).Error; err != nil {
		return err
	}
	return execSQL(tx, "", func(w countersql.Writer) { p.dialect.DeleteSlots(w, t, slotOwners, slots) }).Error
}

// ownTransaction runs fn in db's transaction if it has one, else in a new
// transaction that is retried while it fails with a deadlock or lock timeout.
// Deadlocks come from first inserts of a slot row (slots not pre-created):
// once the row exists the next attempt updates it, so a few attempts settle
// even a burst of 64 writers on a fresh parent.
func (p *Plugin) ownTransaction(db *gorm.DB, fn func(tx *gorm.DB) error) error {
	if _, inTx := db.Statement.ConnPool.(gorm.TxCommitter); inTx {
		return fn(db)
	}
	return retry.Do(db.Statement.Context, ownAttempts, func() error {
		return session(db, "").Transaction(fn)
	})
}

// ownAttempts bounds the attempts of a transaction hotcounter owns.
const ownAttempts = 12

// queryKeys runs a query written by countersql whose rows are one key each.
func queryKeys(db *gorm.DB, table string, build func(countersql.Writer)) ([]any, error) {
	rows, err := querySQL(db, table, build).Rows()
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var keys []any
	for rows.Next() {
		var k any
		if err := rows.Scan(&k); err != nil {
			return nil, err
		}
		keys = append(keys, normalizeKey(k))
	}
	return keys, rows.Err()
}

// normalizeKey turns a key the driver returned as bytes (MySQL's text
// protocol) into a string, so that it can be bound and compared again.
func normalizeKey(k any) any {
	if b, ok := k.([]byte); ok {
		return string(b)
	}
	return k
}
