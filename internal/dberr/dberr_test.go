package dberr

import (
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"testing"
)

// The shapes of the drivers' errors, as the drivers define them.
type (
	MySQLError struct {
		Number   uint16
		SQLState [5]byte
		Message  string
	}
	pgError     struct{ code string }
	sqliteError struct{ code int }
)

func (e *MySQLError) Error() string { return fmt.Sprintf("Error %d: %s", e.Number, e.Message) }
func (e *pgError) Error() string    { return "pg " + e.code }
func (e *pgError) SQLState() string { return e.code }
func (e sqliteError) Error() string { return fmt.Sprint("sqlite ", e.code) }
func (e sqliteError) Code() int     { return e.code }

func TestErrorsAreToldTransientOrMissingParentThroughWrapping(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("gormcounter: increment Post.Likes: %w", err) }
	for _, tc := range []struct {
		err                  error
		transient, fkMissing bool
	}{
		{wrap(&MySQLError{Number: 1213}), true, false},
		{errors.Join(errors.New("rollback"), wrap(&MySQLError{Number: 1205})), true, false},
		{wrap(&MySQLError{Number: 1452}), false, true},
		{wrap(&MySQLError{Number: 1062}), false, false},
		{wrap(&pgError{"40P01"}), true, false},
		{wrap(&pgError{"40001"}), true, false},
		{wrap(&pgError{"23503"}), false, true},
		{wrap(&pgError{"23505"}), false, false},
		{wrap(sqliteError{5}), true, false},
		{wrap(sqliteError{517}), true, false}, // SQLITE_BUSY_SNAPSHOT
		{wrap(sqliteError{787}), false, true},
		{errors.New("other"), false, false},
		{nil, false, false},
	} {
		if got := Transient(tc.err); got != tc.transient {
			t.Errorf("Transient(%v) = %v", tc.err, got)
		}
		if got := ForeignKeyViolation(tc.err); got != tc.fkMissing {
			t.Errorf("ForeignKeyViolation(%v) = %v", tc.err, got)
		}
	}
}

// A broken connection is told from a database's refusal: go-sql-driver's
// ErrInvalidConn (by its text, as the driver defines it), database/sql's
// ErrBadConn and an unexpected EOF, wrapped or joined.
func TestConnectionBroken(t *testing.T) {
	invalidConn := errors.New("invalid connection") // mysql.ErrInvalidConn
	for _, tc := range []struct {
		err    error
		broken bool
	}{
		{fmt.Errorf("gormcounter: read the triggers: %w", invalidConn), true},
		{errors.Join(errors.New("rollback"), driver.ErrBadConn), true},
		{fmt.Errorf("read: %w", io.ErrUnexpectedEOF), true},
		{&MySQLError{Number: 1213}, false},
		{errors.New("invalid connection string"), false},
		{nil, false},
	} {
		if got := ConnectionBroken(tc.err); got != tc.broken {
			t.Errorf("ConnectionBroken(%v) = %v", tc.err, got)
		}
	}
}
