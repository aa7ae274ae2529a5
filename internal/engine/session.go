package engine

import (
	"context"
	"errors"

	"github.com/hotcounter/hotcounter/internal/countersql"
	"github.com/hotcounter/hotcounter/internal/dberr"
	"github.com/hotcounter/hotcounter/internal/retry"
)

// A Session runs statements in the caller's transaction or in transactions
// of hotcounter's own, retried while the database aborts them for a
// transient reason (a deadlock, a lock timeout).

// Session is a Conn that knows whether it is a caller's transaction and can
// open transactions of its own.
type Session interface {
	Conn
	// InTx reports whether statements run in a transaction the caller owns.
	InTx() bool
	// Begin runs fn in a new transaction, at READ COMMITTED if asked, and
	// commits it when fn returns nil (rolls it back otherwise). On
	// PostgreSQL it is always READ COMMITTED, the isolation the library's
	// statements are written for, whatever the session's default (a role
	// or database set to SERIALIZABLE would abort its passes over hot
	// rows with 40001 at every attempt).
	Begin(ctx context.Context, readCommitted bool, fn func(tx Session) error) error
	// ParentGone reports a foreign key failure of an inserted slot row: its
	// parent does not exist (as the ORM reports it).
	ParentGone(err error) bool
}

// OwnAttempts bounds the attempts of a transaction hotcounter owns.
// Deadlocks come from first inserts of a slot row (slots not pre-created):
// once the row exists the next attempt updates it, so a few attempts settle
// even a burst of 64 writers on a fresh parent.
const OwnAttempts = 12

// OwnTransaction runs fn in s's transaction if it has one, else in a new
// transaction that is retried while it fails with a deadlock or lock timeout.
func OwnTransaction(ctx context.Context, s Session, fn func(tx Session) error) error {
	return ownTransaction(ctx, s, false, fn)
}

// OwnReadCommittedTransaction is OwnTransaction whose own transaction
// runs at READ COMMITTED, where an UPDATE that finds no row locks no gap
// (MySQL and MariaDB lock the gap at REPEATABLE READ, and two writers
// that each hold the gap where the other inserts deadlock). In s's
// transaction fn runs at the caller's isolation.
func OwnReadCommittedTransaction(ctx context.Context, s Session, fn func(tx Session) error) error {
	return ownTransaction(ctx, s, true, fn)
}

func ownTransaction(ctx context.Context, s Session, readCommitted bool, fn func(tx Session) error) error {
	if s.InTx() {
		return fn(s)
	}
	return retry.Do(ctx, OwnAttempts, func() error { return s.Begin(ctx, readCommitted, fn) })
}

// OwnStatement runs fn, which sends one statement, once in s's transaction
// if it has one, else retried while it fails with a deadlock or lock wait
// timeout: an autocommit statement that failed changed nothing.
func OwnStatement(ctx context.Context, s Session, fn func() error) error {
	if s.InTx() {
		return fn()
	}
	return retry.Do(ctx, OwnAttempts, fn)
}

// InSavepoint runs fn after a savepoint and rolls back to it if fn fails,
// so that a failure leaves the transaction as it was (PostgreSQL aborts a
// transaction at its first error otherwise).
func InSavepoint(ctx context.Context, tx Session, name string, fn func() error) error {
	if err := Savepoint(ctx, tx, countersql.Savepoint, name); err != nil {
		return err
	}
	if err := fn(); err != nil {
		return errors.Join(err, Savepoint(ctx, tx, countersql.RollbackTo, name), Savepoint(ctx, tx, countersql.Release, name))
	}
	// Released, so that a transaction that takes many does not keep them all
	// (PostgreSQL slows down past 64 open subtransactions).
	return Savepoint(ctx, tx, countersql.Release, name)
}

// Savepoint runs one of countersql's savepoint statements on name.
func Savepoint(ctx context.Context, tx Session, stmt func(countersql.Writer, string), name string) error {
	_, err := tx.Exec(ctx, func(w countersql.Writer) { stmt(w, name) })
	return err
}

// ForeignKeyViolation reports the driver's error for a row whose parent
// does not exist: PostgreSQL 23503, MySQL 1452, SQLite's constraint code
// 787.
func ForeignKeyViolation(err error) bool { return dberr.ForeignKeyViolation(err) }

// TxSession is a Session over a Conn that already runs in a transaction
// its caller owns (a migration's): InTx is true, and Begin runs fn in that
// transaction.
type TxSession struct{ Conn }

// InTx reports true: the Conn is a transaction.
func (s TxSession) InTx() bool { return true }

// Begin runs fn in the transaction s already is.
func (s TxSession) Begin(_ context.Context, _ bool, fn func(tx Session) error) error { return fn(s) }

// ParentGone reports the driver's foreign key failure.
func (s TxSession) ParentGone(err error) bool { return ForeignKeyViolation(err) }

// PassTransaction returns a function that runs its argument in a
// transaction of s's own, committed when it returns nil: how the rollup,
// compaction and move walks run a batch. On PostgreSQL the transaction
// compiles no plan (JIT off, as in Recount: on tables never analysed the
// planner's estimates of a batch run into the millions, and the first
// batches of a pass spent 150 to 300 ms each compiling).
func PassTransaction(s Session, d Dialect) func(ctx context.Context, fn func(Conn) error) error {
	return func(ctx context.Context, fn func(Conn) error) error {
		return s.Begin(ctx, false, func(tx Session) error {
			return d.Driver.Planless(ctx, tx, func() error { return fn(tx) })
		})
	}
}
