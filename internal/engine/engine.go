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
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"

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
	// Read is what adds up to the value (see [Sources]).
	Read countersql.Sources
	// Keys are distinct parent keys.
	Keys []any
}

// Fill queries the values of every group's keys, as few queries as the
// argument limits allow (one for any ordinary load), and calls set for
// every (group index, key text, value) returned. A group that reads no
// column returns no row for a parent without slot rows: its value is zero,
// which the caller sets beforehand.
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
		var (
			idx, val int64
			key      string
		)
		for rows.Next() {
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
			n := g.Read.Args(len(keys))
			if nargs+n > FillArgs {
				if err := flush(); err != nil {
					return err
				}
			}
			parts = append(parts, countersql.FillPart{Table: g.Table, Read: g.Read, Keys: keys})
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

// keyReader turns the keys a query returns in column col back into values
// of the column's type. MySQL's text protocol returns integers as bytes;
// bound again as strings, they would make MariaDB compare an integer key
// with strings and scan (and lock) the whole index instead of the rows.
type keyReader struct{ integer, unsigned bool }

func newKeyReader(rows Rows, col int) keyReader {
	typed, ok := rows.(interface {
		ColumnTypes() ([]*sql.ColumnType, error)
	})
	if !ok {
		return keyReader{}
	}
	types, err := typed.ColumnTypes()
	if err != nil || col >= len(types) {
		return keyReader{}
	}
	name := strings.ToUpper(types[col].DatabaseTypeName())
	return keyReader{
		integer:  strings.Contains(name, "INT"),
		unsigned: strings.Contains(name, "UNSIGNED"),
	}
}

func (r keyReader) key(v any) any {
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

// PendingOwners returns up to limit owners with slot rows in t, in key
// order, after the key `after` (nil: from the start).
func PendingOwners(ctx context.Context, conn Conn, d countersql.Dialect, t countersql.Table, after any, limit int) ([]any, error) {
	rows, err := conn.Query(ctx, func(w countersql.Writer) { d.PendingOwners(w, t, after, limit) })
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var owners []any
	kr := newKeyReader(rows, 0)
	for rows.Next() {
		var v any
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		owners = append(owners, kr.key(v))
	}
	return owners, rows.Err()
}

// FoldAttempts is how many times a fold batch is tried when the database
// aborts its transaction for a transient reason.
const FoldAttempts = 5

// Rollup runs one rollup pass over one counter: it folds an append
// counter's delta rows (deltas) or a counter's slot rows into the parent
// column. inTx runs a function in a new
// transaction that it commits when the function returns nil.
func Rollup(ctx context.Context, conn Conn, d countersql.Dialect, t countersql.Table, deltas bool, batch int, stop func() bool,
	inTx func(ctx context.Context, fn func(Conn) error) error) error {
	if deltas {
		return foldDeltas(ctx, conn, d, t, batch, stop, inTx)
	}
	return foldAll(ctx, conn, d, t, batch, stop, inTx)
}

// foldAll walks t's slot table in key order, folding up to batch parents
// per transaction (fold, or foldMySQL), until it has walked it all or stop
// says so.
func foldAll(ctx context.Context, conn Conn, d countersql.Dialect, t countersql.Table, batch int, stop func() bool,
	inTx func(ctx context.Context, fn func(Conn) error) error) error {
	foldBatch := fold
	if d.MySQL() {
		foldBatch = foldMySQL
	}
	owners := func(after any) ([]any, error) { return PendingOwners(ctx, conn, d, t, after, batch) }
	return walk(ctx, batch, stop, inTx, owners, func(tx Conn, owners []any) error { return foldBatch(ctx, tx, d, t, owners) })
}

// walk runs apply on the owners that list returns, a batch per
// transaction (retried when the database aborts it for a transient reason),
// until list returns a short batch or stop says so.
func walk(ctx context.Context, batch int, stop func() bool, inTx func(ctx context.Context, fn func(Conn) error) error,
	list func(after any) ([]any, error), apply func(tx Conn, owners []any) error) error {
	var after any
	for !stop() {
		owners, err := list(after)
		if err != nil {
			return err
		}
		if len(owners) == 0 {
			return nil
		}
		err = retry.Do(ctx, FoldAttempts, func() error {
			return inTx(ctx, func(tx Conn) error { return apply(tx, owners) })
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

// Compact runs one compaction pass over a sum counter: for every parent
// with more than one slot row holding a value, a batch of parents per
// transaction, it moves the values into one of those rows and deletes the
// others, or sets them to 0 when keep is set (pre-created slots). Totals
// never change, as any reader sees them. On PostgreSQL it locks with SKIP
// LOCKED and never waits: rows that others hold stay as they are until the
// next pass.
//
// MySQL and MariaDB are refused (ErrCompactMySQL): under their default
// REPEATABLE READ, a transaction that reads a counter, increments it and
// reads it again sees its own slot row as it is now and the others as of
// its snapshot, so values a pass moved in between would count twice or
// not at all.
func Compact(ctx context.Context, conn Conn, d countersql.Dialect, t countersql.Table, keep bool, batch int, stop func() bool,
	inTx func(ctx context.Context, fn func(Conn) error) error) error {
	if d.MySQL() {
		return ErrCompactMySQL
	}
	owners := func(after any) ([]any, error) {
		return QueryKeys(ctx, conn, func(w countersql.Writer) { d.CrowdedOwners(w, t, after, batch) })
	}
	return walk(ctx, batch, stop, inTx, owners, func(tx Conn, owners []any) error {
		for _, step := range d.Compact(t, owners, keep) {
			if _, err := tx.Exec(ctx, step); err != nil {
				return err
			}
		}
		return nil
	})
}

// ErrCompactMySQL is Compact's error on MySQL and MariaDB. It wraps
// errors.ErrUnsupported.
var ErrCompactMySQL = fmt.Errorf("%w on MySQL/MariaDB: under REPEATABLE READ a transaction that reads a counter, "+
	"increments it and reads it again would see the values a pass moved meanwhile twice or not at all", errors.ErrUnsupported)

// fold runs the dialect's fold statements for owners (PostgreSQL and
// SQLite; foldMySQL is MySQL's).
func fold(ctx context.Context, tx Conn, d countersql.Dialect, t countersql.Table, owners []any) error {
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

// foldDeltas walks an append counter's delta table by id, folding batches
// of at most batch rows into the parent column, each in a transaction of
// its own (inTx), until it reaches the last row that existed when it
// started, or stop says so. Rows inserted meanwhile are left for the next
// pass, so a pass ends even while writers keep appending.
func foldDeltas(ctx context.Context, c Conn, d countersql.Dialect, t countersql.Table, batch int, stop func() bool,
	inTx func(ctx context.Context, fn func(Conn) error) error) error {
	ceiling, ok, err := deltaBatchEnd(ctx, c, d, t, 0, math.MaxInt32)
	if err != nil || !ok {
		return err
	}
	var after int64
	for after < ceiling && !stop() {
		end, ok, err := deltaBatchEnd(ctx, c, d, t, after, batch)
		if err != nil || !ok {
			return err
		}
		end = min(end, ceiling)
		err = retry.Do(ctx, FoldAttempts, func() error {
			return inTx(ctx, func(tx Conn) error {
				if d.MySQL() {
					return foldDeltasMySQL(ctx, tx, d, t, after, end)
				}
				for _, step := range d.FoldDeltas(t, after, end) {
					if _, err := tx.Exec(ctx, step); err != nil {
						return err
					}
				}
				return nil
			})
		})
		if err != nil {
			return err
		}
		after = end
	}
	return nil
}

func deltaBatchEnd(ctx context.Context, c Conn, d countersql.Dialect, t countersql.Table, after int64, limit int) (int64, bool, error) {
	rows, err := c.Query(ctx, func(w countersql.Writer) { d.DeltaBatchEnd(w, t, after, limit) })
	if err != nil {
		return 0, false, err
	}
	defer rows.Close()
	var end sql.NullInt64
	for rows.Next() {
		if err := rows.Scan(&end); err != nil {
			return 0, false, err
		}
	}
	return end.Int64, end.Valid, rows.Err()
}

// foldDeltasMySQL folds the delta rows in (after, upTo] of the parents that
// no one holds: it reads their owners without locks, locks those parents
// (SKIP LOCKED), locks their delta rows, adds exactly the values it read to
// the columns and deletes exactly those rows. An increment holding its
// parent's shared lock (its foreign key check) is skipped, never waited
// for, so the two cannot deadlock; what is skipped stays for the next pass.
func foldDeltasMySQL(ctx context.Context, tx Conn, d countersql.Dialect, t countersql.Table, after, upTo int64) error {
	owners, err := QueryKeys(ctx, tx, func(w countersql.Writer) { d.DeltaOwners(w, t, after, upTo) })
	if err != nil || len(owners) == 0 {
		return err
	}
	for start := 0; start < len(owners); start += FillChunk {
		chunk := owners[start:min(start+FillChunk, len(owners))]
		locked, err := QueryKeys(ctx, tx, func(w countersql.Writer) { d.LockParents(w, t, chunk) })
		if err != nil {
			return err
		}
		if len(locked) == 0 {
			continue
		}
		rows, err := tx.Query(ctx, func(w countersql.Writer) { d.LockDeltas(w, t, after, upTo, locked) })
		if err != nil {
			return err
		}
		var (
			ids     []any
			keys    []any
			amounts []int64
			index   = map[string]int{}
			kr      = newKeyReader(rows, 1)
		)
		for rows.Next() {
			var id, n int64
			var owner any
			if err := rows.Scan(&id, &owner, &n); err != nil {
				rows.Close()
				return err
			}
			owner = kr.key(owner)
			ids = append(ids, id)
			k := KeyText(owner)
			i, seen := index[k]
			if !seen {
				i = len(keys)
				index[k] = i
				keys, amounts = append(keys, owner), append(amounts, 0)
			}
			amounts[i] += n
		}
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			return err
		}
		if len(ids) == 0 {
			continue
		}
		if _, err := tx.Exec(ctx, func(w countersql.Writer) { d.AddToColumns(w, t, keys, amounts) }); err != nil {
			return err
		}
		for s := 0; s < len(ids); s += deleteChunk {
			part := ids[s:min(s+deleteChunk, len(ids))]
			if _, err := tx.Exec(ctx, func(w countersql.Writer) { d.DeleteDeltas(w, t, part) }); err != nil {
				return err
			}
		}
	}
	return nil
}
