package gormcounter

import (
	"database/sql"
	"errors"
	"fmt"
	"github.com/hotcounter/hotcounter/internal/engine"
	"strconv"

	"github.com/go-sql-driver/mysql"

	"gorm.io/gorm"

	"github.com/hotcounter/hotcounter/internal/countersql"
	"github.com/hotcounter/hotcounter/internal/retry"
)

// The MySQL/MariaDB paths run several statements where PostgreSQL and SQLite
// run one (see the countersql functions they call for why). Each runs in the
// caller's transaction, or in one of its own that is retried on deadlock.

// incrementMySQL adds delta to slot `slot` of every parent the statement
// targets, and returns how many parents that was.
//
// An increment updates its slot row with an exact-match UPDATE, which locks
// that row only and never the parent. When the row is missing it must be
// inserted, and the insert's foreign key check takes a shared lock on the
// parent; so rows are inserted only when an UPDATE found none. An UPDATE
// that finds no row locks the gap where the row would go, and an INSERT
// after it deadlocks with every other writer doing the same (MySQL bug
// 52020). So the UPDATE either runs alone in autocommit, whose locks end
// with it, or inside a savepoint that is rolled back before the INSERT (on
// MariaDB that releases the gap lock; MySQL 8 is untested).
//
// Pre-created slot rows (the default for sum counters) always exist, so an
// increment of one parent named only by its primary key (Model(&post), no
// Where, no soft delete) is one UPDATE, with no read of the parent.
func (p *Plugin) incrementMySQL(db *gorm.DB, c *counter, t countersql.Table, slot int, delta int64, cond func(countersql.Writer)) (int64, error) {
	_, inTx := db.Statement.ConnPool.(gorm.TxCommitter)
	key, single := primaryKeyOnly(db.Statement)
	if single && delta != 0 && (!inTx || c.precreate) {
		res := execSQL(db, "", func(w countersql.Writer) { p.dialect.IncrementKeys(w, t, []any{key}, slot, delta) })
		if res.Error != nil || res.RowsAffected == 1 {
			return res.RowsAffected, res.Error
		}
		if !inTx {
			// The UPDATE has committed, gap lock and all: insert the row.
			var n int64
			err := p.ownStatement(db, func(db *gorm.DB) (err error) {
				n, err = p.upsertSlots(db, t, []any{key}, slot, delta)
				return err
			})
			return n, err
		}
	}
	var n int64
	err := p.ownTransaction(db, func(tx *gorm.DB) error {
		n = 0
		keys := []any{key}
		if !single {
			var err error
			if keys, err = queryKeys(tx, t.Parent, func(w countersql.Writer) { p.dialect.SelectKeys(w, t, cond) }); err != nil {
				return err
			}
		}
		if delta == 0 {
			n = int64(len(keys))
			return nil
		}
		chunks := func() error {
			for start := 0; start < len(keys); start += engine.FillChunk {
				done, err := p.updateSlots(tx, t, keys[start:min(start+engine.FillChunk, len(keys))], slot, delta)
				if err != nil {
					return err
				}
				n += done
			}
			return nil
		}
		if len(keys) <= engine.FillChunk || !inTx {
			return chunks()
		}
		// Several statements in the caller's transaction: all or none.
		return inSavepoint(tx, "hc_increment_all", chunks)
	})
	return n, err
}

// incrementFreeSlotMySQL is the skiplocked increment of one parent on MySQL
// and MariaDB: in one transaction it locks the first slot row of the parent
// from a random start, wrapping around, that no other transaction holds, and
// updates it. When every row is held, or there is none, it increments slot
// `slot` as incrementMySQL does. A transaction of its own runs at READ
// COMMITTED, where locking reads take no gap locks.
func (p *Plugin) incrementFreeSlotMySQL(db *gorm.DB, c *counter, t countersql.Table, slot int, delta int64, cond func(countersql.Writer)) (int64, error) {
	key, ok := primaryKeyOnly(db.Statement)
	if !ok {
		// A Where or soft delete decides whether the parent counts: take the
		// path that reads it.
		return p.incrementMySQL(db, c, t, slot, delta, cond)
	}
	var n int64
	pick := func(tx *gorm.DB) (int, bool, error) {
		for _, below := range []bool{false, true} {
			keys, err := queryKeys(tx, "", func(w countersql.Writer) { p.dialect.PickFreeSlot(w, t, key, slot, below) })
			if err != nil {
				return 0, false, err
			}
			if len(keys) > 0 {
				free, err := strconv.Atoi(fmt.Sprint(keys[0]))
				return free, err == nil, err
			}
		}
		return 0, false, nil
	}
	run := func(tx *gorm.DB) error {
		free, found, err := pick(tx)
		if err != nil {
			return err
		}
		if found {
			res := execSQL(tx, "", func(w countersql.Writer) { p.dialect.IncrementKeys(w, t, []any{key}, free, delta) })
			if res.Error != nil || res.RowsAffected == 1 {
				n = res.RowsAffected
				return res.Error
			}
		}
		n, err = p.incrementMySQL(tx, c, t, slot, delta, cond)
		return err
	}
	if _, inTx := db.Statement.ConnPool.(gorm.TxCommitter); inTx {
		return n, run(db)
	}
	err := retry.Do(db.Statement.Context, ownAttempts, func() error {
		return session(db, "").Transaction(run, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	})
	return n, err
}

// inSavepoint runs fn after a savepoint and rolls back to it if fn fails,
// so that a failure leaves the caller's transaction as it was.
func inSavepoint(tx *gorm.DB, name string, fn func() error) error {
	if err := session(tx, "").SavePoint(name).Error; err != nil {
		return err
	}
	if err := fn(); err != nil {
		return errors.Join(err, session(tx, "").RollbackTo(name).Error)
	}
	return nil
}

// updateSlots adds delta to the slot rows of keys with one exact-match
// UPDATE inside a savepoint. If some rows are missing, which ones cannot be
// read back safely (a plain SELECT reads the transaction's snapshot, which
// may still show a row a rollup has since deleted), so the UPDATE is rolled
// back to the savepoint, releasing the gap locks it took, and the keys are
// upserted instead.
func (p *Plugin) updateSlots(tx *gorm.DB, t countersql.Table, keys []any, slot int, delta int64) (int64, error) {
	const sp = "hc_increment"
	if err := session(tx, "").SavePoint(sp).Error; err != nil {
		return 0, err
	}
	res := execSQL(tx, "", func(w countersql.Writer) { p.dialect.IncrementKeys(w, t, keys, slot, delta) })
	if res.Error != nil || res.RowsAffected == int64(len(keys)) {
		return res.RowsAffected, res.Error
	}
	if err := session(tx, "").RollbackTo(sp).Error; err != nil {
		return 0, err
	}
	return p.upsertSlots(tx, t, keys, slot, delta)
}

// upsertSlots adds delta to slot `slot` of keys (sorted), inserting the rows
// that are missing, in one statement. A parent deleted since its key was
// read fails the foreign key check (1452); the keys are then upserted one by
// one and the gone ones skipped, as an UPDATE would skip them.
func (p *Plugin) upsertSlots(db *gorm.DB, t countersql.Table, keys []any, slot int, delta int64) (int64, error) {
	upsert := func(keys []any) error {
		return execSQL(db, "", func(w countersql.Writer) { p.dialect.InsertSlots(w, t, keys, slot, delta) }).Error
	}
	err := upsert(keys)
	if !parentGone(err) {
		if err != nil {
			return 0, err
		}
		return int64(len(keys)), nil
	}
	var n int64
	for _, k := range keys {
		switch err := upsert([]any{k}); {
		case parentGone(err):
		case err != nil:
			return n, err
		default:
			n++
		}
	}
	return n, nil
}

// parentGone reports a foreign key failure: the parent row does not exist
// (as the driver reports it, or as GORM's TranslateError does).
func parentGone(err error) bool {
	var my *mysql.MySQLError
	return errors.As(err, &my) && my.Number == 1452 || // ER_NO_REFERENCED_ROW_2
		errors.Is(err, gorm.ErrForeignKeyViolated)
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
		owner = engine.NormalizeKey(owner)
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
	// Two placeholders a row: chunks stay far below MySQL's 65,535.
	for start := 0; start < len(slotOwners); start += deleteChunk {
		end := min(start+deleteChunk, len(slotOwners))
		if err := execSQL(tx, "", func(w countersql.Writer) {
			p.dialect.DeleteSlots(w, t, slotOwners[start:end], slots[start:end])
		}).Error; err != nil {
			return err
		}
	}
	return nil
}

// deleteChunk bounds the slot rows of one DELETE of a fold.
const deleteChunk = 10000

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

// ownStatement runs fn, which sends one statement, once in db's transaction
// if it has one, else retried while it fails with a deadlock or lock wait
// timeout: an autocommit statement that failed changed nothing.
func (p *Plugin) ownStatement(db *gorm.DB, fn func(db *gorm.DB) error) error {
	if _, inTx := db.Statement.ConnPool.(gorm.TxCommitter); inTx {
		return fn(db)
	}
	return retry.Do(db.Statement.Context, ownAttempts, func() error { return fn(db) })
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
		keys = append(keys, engine.NormalizeKey(k))
	}
	return keys, rows.Err()
}
