// Package dberr classifies the errors of PostgreSQL, MySQL/MariaDB and
// SQLite drivers without importing any of them: a program that uses
// gormcounter on PostgreSQL compiles no MySQL driver. Errors are recognised
// by the methods and fields the drivers' error types have: SQLState()
// (pgx's *pgconn.PgError), Code() (the SQLite drivers), and go-sql-driver's
// *mysql.MySQLError, read by its shape.
package dberr

import (
	"database/sql/driver"
	"errors"
	"io"
	"reflect"
	"strings"
)

// Transient reports whether err is worth another attempt of the whole
// transaction: a deadlock, a serialization failure, a lock timeout, SQLite
// being busy.
func Transient(err error) bool {
	if err == nil {
		return false
	}
	switch sqlState(err) {
	case "40P01", // deadlock_detected
		"40001", // serialization_failure
		"55P03": // lock_not_available
		return true
	}
	switch n, _ := MySQLNumber(err); n {
	case 1213, // ER_LOCK_DEADLOCK
		1205: // ER_LOCK_WAIT_TIMEOUT
		return true
	}
	if c, ok := sqliteCode(err); ok {
		switch c & 0xff { // primary result code
		case 5, 6: // SQLITE_BUSY, SQLITE_LOCKED
			return true
		}
	}
	return false
}

// SerializationFailure reports a statement or transaction that
// PostgreSQL aborted because it could not serialize it beside concurrent
// ones (40001): under SERIALIZABLE (or REPEATABLE READ), writers of one
// row abort one another's, and an attempt on a fresh snapshot goes on.
func SerializationFailure(err error) bool { return err != nil && sqlState(err) == "40001" }

// ConnectionBroken reports a statement whose connection broke under it:
// database/sql's ErrBadConn, an unexpected EOF, or go-sql-driver's
// ErrInvalidConn ("invalid connection", recognised by its text, as the
// driver is not imported). Only a statement that changes nothing may be
// sent again after it.
func ConnectionBroken(err error) bool {
	return err != nil && (errors.Is(err, driver.ErrBadConn) || errors.Is(err, io.ErrUnexpectedEOF) ||
		walk(err, func(e error) bool { return e.Error() == "invalid connection" }))
}

// LockWait reports a MySQL/MariaDB statement that gave up waiting for a
// lock (ER_LOCK_WAIT_TIMEOUT, also what innodb_lock_wait_timeout = 0
// returns at once).
func LockWait(err error) bool {
	n, _ := MySQLNumber(err)
	return n == 1205
}

// ForeignKeyViolation reports an insert or update whose referenced row does
// not exist.
func ForeignKeyViolation(err error) bool {
	if err == nil {
		return false
	}
	if n, _ := MySQLNumber(err); n == 1452 { // ER_NO_REFERENCED_ROW_2
		return true
	}
	if sqlState(err) == "23503" { // foreign_key_violation
		return true
	}
	c, ok := sqliteCode(err)
	return ok && c == 787 // SQLITE_CONSTRAINT_FOREIGNKEY
}

// MySQLNumber returns the server's error number of a MySQL/MariaDB error in
// err's chain (go-sql-driver's *mysql.MySQLError: a struct named MySQLError
// with a uint16 field Number).
func MySQLNumber(err error) (uint16, bool) {
	var n uint16
	found := walk(err, func(e error) bool {
		v := reflect.ValueOf(e)
		if v.Kind() == reflect.Pointer && !v.IsNil() {
			v = v.Elem()
		}
		if v.Kind() != reflect.Struct || v.Type().Name() != "MySQLError" {
			return false
		}
		f := v.FieldByName("Number")
		if !f.IsValid() || f.Kind() != reflect.Uint16 {
			return false
		}
		n = uint16(f.Uint())
		return true
	})
	return n, found
}

func sqlState(err error) string {
	var state interface{ SQLState() string } // pgconn.PgError
	if errors.As(err, &state) {
		return state.SQLState()
	}
	return ""
}

func sqliteCode(err error) (int, bool) {
	var code interface{ Code() int }
	if errors.As(err, &code) {
		return code.Code(), true
	}
	return 0, false
}

// walk calls match on every error of err's chain (Unwrap() error and
// Unwrap() []error) until it returns true, and reports whether one did.
func walk(err error, match func(error) bool) bool {
	for err != nil {
		if match(err) {
			return true
		}
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			err = u.Unwrap()
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				if walk(e, match) {
					return true
				}
			}
			return false
		default:
			return false
		}
	}
	return false
}

// UndefinedTable reports a statement that names a table the database does
// not have: PostgreSQL's undefined_table, MySQL's ER_NO_SUCH_TABLE,
// SQLite's "no such table" (a generic SQLITE_ERROR, told by its text).
func UndefinedTable(err error) bool {
	if err == nil {
		return false
	}
	if sqlState(err) == "42P01" {
		return true
	}
	if n, _ := MySQLNumber(err); n == 1146 {
		return true
	}
	return walk(err, func(e error) bool { return strings.Contains(e.Error(), "no such table") })
}

// UndefinedColumn reports a statement that names a column the table does
// not have: PostgreSQL's undefined_column, MySQL's ER_BAD_FIELD_ERROR,
// SQLite's "no such column" (a generic SQLITE_ERROR, told by its text).
func UndefinedColumn(err error) bool {
	if err == nil {
		return false
	}
	if sqlState(err) == "42703" {
		return true
	}
	if n, _ := MySQLNumber(err); n == 1054 {
		return true
	}
	return walk(err, func(e error) bool { return strings.Contains(e.Error(), "no such column") })
}
