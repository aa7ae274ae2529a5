// Package engine runs the statements that countersql writes: the batched
// fill of loaded rows and the rollup walk. It knows neither GORM nor ent;
// each ORM hands it a [Conn] that writes SQL its own way (quoting, binding)
// and runs it on its own connection or transaction, so both ORMs share the
// same chunking, the same fold loop and the same retry rules.
package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"

	"github.com/hotcounter/hotcounter/internal/countersql"
	"github.com/hotcounter/hotcounter/internal/retry"
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

// Limits of one fill query: keys per IN list, and bound arguments in all
// (PostgreSQL and MySQL take 65,535, SQLite 32,766).
const (
	FillChunk = 1000
	FillArgs  = 20000
)

// FillGroup asks for one counter's values for some parents.
type FillGroup struct {
	Table countersql.Table
	// Live reads column + pending slots (rollup counters).
	Live bool
	// Keys are distinct parent keys.
	Keys []any
}

// Fill queries the values of every group's keys, as few queries as the
// argument limits allow (one for any ordinary load), and calls set for
// every (group index, key text, value) returned. A sum group returns no row
// for a parent without slot rows: its value is zero, which the caller sets
// beforehand.
func Fill(ctx context.Context, conn Conn, d countersql.Dialect, groups []FillGroup, set func(group int, key string, value int64) error) error {
	var (
		parts []countersql.FillPart
		refs  []int // refs[i] is the group of parts[i]
		nargs int
	)
	flush := func() error {
		if len(parts) == 0 {
			return nil
		}
		defer func() { parts, refs, nargs = nil, nil, 0 }()
		rows, err := conn.Query(ctx, func(w countersql.Writer) { d.Fill(w, parts) })
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var (
				idx int
				key string
				val int64
			)
			if err := rows.Scan(&idx, &key, &val); err != nil {
				return err
			}
			if err := set(refs[idx], key, val); err != nil {
				return err
			}
		}
		return rows.Err()
	}
	for gi, g := range groups {
		for start := 0; start < len(g.Keys); start += FillChunk {
			keys := g.Keys[start:min(start+FillChunk, len(g.Keys))]
			n := len(keys)
			if g.Live {
				n *= 2 // a live part binds its keys twice
			}
			if nargs+n > FillArgs {
				if err := flush(); err != nil {
					return err
				}
			}
			parts = append(parts, countersql.FillPart{Table: g.Table, Live: g.Live, Keys: keys})
			refs = append(refs, gi)
			nargs += n
		}
	}
	return flush()
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

// NormalizeKey turns a key the driver returned as bytes (MySQL's text
// protocol) into a string, so that it can be bound and compared again.
func NormalizeKey(k any) any {
	if b, ok := k.([]byte); ok {
		return string(b)
	}
	return k
}

// PendingOwners returns up to limit owners with slot rows in t, in key
// order, after the key `after` (nil: from the start).
func PendingOwners(ctx context.Context, conn Conn, d countersql.Dialect, t countersql.Table, after any, limit int) ([]any, error) {
	rows, err := conn.Query(ctx, func(w countersql.Writer) { d.PendingOwners(w, t, after, limit) })
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var owners []any
	for rows.Next() {
		var v any
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		owners = append(owners, NormalizeKey(v))
	}
	return owners, rows.Err()
}

// FoldAttempts is how many times a fold batch is tried when the database
// aborts its transaction for a transient reason.
const FoldAttempts = 5

// FoldAll walks t's slot table in key order, folding up to batch parents
// per transaction, until it has walked it all or stop says so. inTx runs a
// function in a new transaction that it commits when the function returns
// nil; fold folds one batch inside it.
func FoldAll(ctx context.Context, conn Conn, d countersql.Dialect, t countersql.Table, batch int, stop func() bool,
	inTx func(ctx context.Context, fn func(Conn) error) error, fold func(ctx context.Context, tx Conn, owners []any) error) error {
	var after any
	for !stop() {
		owners, err := PendingOwners(ctx, conn, d, t, after, batch)
		if err != nil {
			return err
		}
		if len(owners) == 0 {
			return nil
		}
		err = retry.Do(ctx, FoldAttempts, func() error {
			return inTx(ctx, func(tx Conn) error { return fold(ctx, tx, owners) })
		})
		if err != nil {
			return err
		}
		if len(owners) < batch {
			return nil
		}
		after = owners[len(owners)-1]
	}
	return nil
}

// Fold runs the dialect's fold statements for owners (PostgreSQL and
// SQLite; MySQL folds in several steps that the ORM package runs).
func Fold(ctx context.Context, tx Conn, d countersql.Dialect, t countersql.Table, owners []any) error {
	for _, step := range d.Fold(t, owners) {
		if _, err := tx.Exec(ctx, step); err != nil {
			return err
		}
	}
	return nil
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

// IncrementFreeSlot adds delta to a slot row of the one parent matching
// cond that no other transaction holds (PostgreSQL); if it has none free
// (or no slot rows yet), it adds to slot `slot` as a plain increment does.
// The first statement changes nothing when it finds no free row, so the two
// never apply half an increment. It returns the number of parents
// incremented.
func IncrementFreeSlot(ctx context.Context, c Conn, d countersql.Dialect, t countersql.Table, slot int, delta int64, cond func(countersql.Writer)) (int64, error) {
	rows, err := c.Query(ctx, func(w countersql.Writer) { d.IncrementFreeSlot(w, t, slot, delta, cond) })
	if err != nil {
		return 0, err
	}
	updated := 0
	for rows.Next() {
		updated++
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return 0, err
	}
	switch {
	case updated > 1:
		return 0, fmt.Errorf("a skip-locked increment of one parent updated %d slot rows", updated)
	case updated == 1:
		return 1, nil
	}
	return c.Exec(ctx, func(w countersql.Writer) { d.IncrementWhere(w, t, slot, delta, cond) })
}
