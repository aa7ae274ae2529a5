// Package engine runs the statements that countersql writes: the batched
// fill of loaded rows and the rollup walk. It knows neither GORM nor ent;
// each ORM hands it a [Conn] that writes SQL its own way (quoting, binding)
// and runs it on its own connection or transaction, so both ORMs share the
// same chunking, the same fold loop and the same retry rules.
package engine

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/hotcounter/hotcounter/internal/countersql"
)

// Rows is the part of *sql.Rows that the engine reads.
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Close() error
	Err() error
}

// Conn runs statements written by countersql on one connection, pool or
// transaction of an ORM.
type Conn interface {
	// Exec runs a statement and returns the number of rows it affected.
	Exec(ctx context.Context, build func(countersql.Writer)) (int64, error)
	// Query runs a query.
	Query(ctx context.Context, build func(countersql.Writer)) (Rows, error)
}

// KeyText is the text form of a key, as the database's CAST(key AS TEXT)
// writes it: integers in decimal, strings as they are, UUIDs canonical. Fill
// returns keys in this form.
func KeyText(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case []byte:
		return string(x)
	case fmt.Stringer:
		return x.String()
	case countersql.Pair:
		return KeyText(x[0]) + "\x00" + KeyText(x[1])
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return strconv.FormatInt(rv.Int(), 10)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return strconv.FormatUint(rv.Uint(), 10)
	case reflect.String:
		return rv.String()
	}
	return fmt.Sprint(v)
}

// KeyReader turns the keys a query returns in column col back into values
// of the column's type. MySQL's text protocol returns integers as bytes;
// bound again as strings, they would make MariaDB compare an integer key
// with strings and scan (and lock) the whole index instead of the rows.
type KeyReader struct{ integer, unsigned bool }

func NewKeyReader(rows Rows, col int) KeyReader {
	typed, ok := rows.(interface {
		ColumnTypes() ([]*sql.ColumnType, error)
	})
	if !ok {
		return KeyReader{}
	}
	types, err := typed.ColumnTypes()
	if err != nil || col >= len(types) {
		return KeyReader{}
	}
	name := strings.ToUpper(types[col].DatabaseTypeName())
	return KeyReader{
		integer:  strings.Contains(name, "INT"),
		unsigned: strings.Contains(name, "UNSIGNED"),
	}
}

func (r KeyReader) Key(v any) any {
	b, ok := v.([]byte)
	if !ok {
		return v
	}
	if r.integer {
		if r.unsigned {
			if u, err := strconv.ParseUint(string(b), 10, 64); err == nil {
				return u
			}
		} else if i, err := strconv.ParseInt(string(b), 10, 64); err == nil {
			return i
		}
	}
	return string(b)
}

// SortKeys returns keys in ascending order (integers by value, anything
// else by text), so that slot rows are always locked in key order and two
// multi-parent increments cannot deadlock.
func SortKeys(keys []any) []any {
	out := slices.Clone(keys)
	slices.SortFunc(out, func(a, b any) int {
		ia, aok := asInt(a)
		ib, bok := asInt(b)
		if aok && bok {
			return cmp.Compare(ia, ib)
		}
		return cmp.Compare(KeyText(a), KeyText(b))
	})
	return out
}

func asInt(v any) (int64, bool) {
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return rv.Int(), true
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if u := rv.Uint(); u <= math.MaxInt64 {
			return int64(u), true
		}
	}
	return 0, false
}

// QueryKeys runs a query written by countersql whose rows are one key each.
func QueryKeys(ctx context.Context, c Conn, build func(countersql.Writer)) ([]any, error) {
	rows, err := c.Query(ctx, build)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var keys []any
	kr := NewKeyReader(rows, 0)
	for rows.Next() {
		var k any
		if err := rows.Scan(&k); err != nil {
			return nil, err
		}
		keys = append(keys, kr.Key(k))
	}
	return keys, rows.Err()
}

// ForeignKeysOff reports whether the connection leaves foreign keys
// unenforced where the database lets a connection choose (SQLite's
// PRAGMA foreign_keys): a deleted parent would then keep its slot rows,
// which the slot table's ON DELETE CASCADE removes. Elsewhere it is false.
func ForeignKeysOff(ctx context.Context, c Conn, d Dialect) (bool, error) {
	pragma := d.ForeignKeysPragma()
	if pragma == "" {
		return false, nil
	}
	on, err := QueryInt(ctx, c, func(w countersql.Writer) { w.WriteString(pragma) })
	if err != nil {
		return false, fmt.Errorf("read %s: %w", pragma, err)
	}
	return on == 0, nil
}

// QueryInt runs a query written by countersql whose one row is one integer.
func QueryInt(ctx context.Context, c Conn, build func(countersql.Writer)) (int64, error) {
	rows, err := c.Query(ctx, build)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	var n int64
	if rows.Next() {
		if err := rows.Scan(&n); err != nil {
			return 0, err
		}
	}
	return n, rows.Err()
}

// System returns OpenTelemetry's db.system.name of the database behind c:
// postgresql, sqlite, mysql or mariadb. Telling MariaDB from MySQL takes a
// query, run only when ask is set (metrics are on); without it, or when
// the query fails, a MySQL-dialect database is mysql.
func System(ctx context.Context, c Conn, d Dialect, ask bool) string {
	var version string
	if ask {
		version = d.Driver.ServerVersion(ctx, c)
	}
	return d.System(version)
}
