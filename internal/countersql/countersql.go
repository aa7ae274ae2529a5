// Package countersql is the one place where hotcounter's SQL is written. It
// knows nothing about GORM or ent. Each ORM hands it a [Writer] that quotes
// identifiers and binds arguments in the ORM's own way, so the same
// statements come out of both ORMs and each can read what the other wrote.
//
// One file per family of statements:
//
//	countersql.go   the Writer, the Table a counter is stored in, the Dialect
//	                and the types of what one or two databases alone run
//	slots.go        slot table DDL, pre-created slot rows
//	increment.go    increments (random slot, returning totals, skip-locked)
//	mysql.go        the MySQL/MariaDB write path and its lock-free fold steps
//	fill.go         loads: one query for every counter of a statement
//	rollup.go       the rollup fold of slot rows into the parent column
//	append.go       append mode: delta rows and their fold
//	compact.go      compaction of sum counters' slot rows
//	counts.go       counts of child rows: triggers, hooks' statements, recount
//	writebehind.go  the write-behind buffer's flush and ledger
//	adopt.go        adoption of existing columns: probes, moves, defaults
//	citus.go        PostgreSQL with Citus: distribution beside the parent
//
// testdata/<dialect>.sql holds every statement that database runs (golden
// files, rewritten by go test ./internal/countersql -update).
package countersql

import (
	"database/sql/driver"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgtype"
)

// Column names inside every slot table.
const (
	SlotColumn  = "slot"
	ValueColumn = "n"
)

// Writer receives SQL text from the builders in this package.
type Writer interface {
	// WriteString writes raw SQL.
	WriteString(s string)
	// Ident writes a quoted identifier. A dotted name is schema-qualified.
	Ident(name string)
	// Arg writes a bind placeholder and records v as its argument.
	Arg(v any)
}

// QuoteIdent quotes a possibly schema-qualified name for MySQL/MariaDB
// (backquotes) or the others (double quotes), for Writers that render SQL
// for database/sql.
func QuoteIdent(name string, mysql bool) string {
	q := `"`
	if mysql {
		q = "`"
	}
	parts := strings.Split(name, ".")
	for i, part := range parts {
		parts[i] = q + strings.ReplaceAll(part, q, q+q) + q
	}
	return strings.Join(parts, ".")
}

// Quote quotes a possibly schema-qualified name the database's way
// (QuoteIdent).
func (d Dialect) Quote(name string) string { return QuoteIdent(name, d.kind == mysql) }

// Table names the storage of one counter.
type Table struct {
	Parent    string // parent table, e.g. posts
	ParentKey string // parent primary key column, e.g. id
	Column    string // parent column holding the folded total (rollup mode), e.g. views
	Slots     string // slot table, e.g. post_views_slots (an append counter's delta table, post_claps_deltas)
	Owner     string // slot table column referencing the parent, e.g. post_id
	// RowID is the slot table's surrogate key column (ent's id), or ""
	// where (owner, slot) is its primary key (gormcounter's tables). On
	// MySQL/MariaDB a session's own slot row is then updated by that key:
	// an update through the unique (owner, slot) index locks the gap
	// below the row too, which would make a neighbour's first insert wait.
	RowID string
	// Other is the table of the other kind (a slot counter's delta table,
	// an append counter's slot table): after a change of mode it may still
	// hold values that count.
	Other string
}

type kind int

const (
	postgres kind = iota + 1
	sqlite
	mysql
)

// Dialect writes the SQL of one database family.
type Dialect struct {
	kind kind
	// citus: a PostgreSQL database with the Citus extension (see
	// citus.go), whose distributed tables take some statements in another
	// form.
	citus bool
}

// For returns the dialect for an ORM's dialect name: "postgres" (also "pgx"),
// "sqlite" (also "sqlite3") or "mysql" (MySQL 8 and MariaDB 10.6+, InnoDB).
func For(name string) (Dialect, error) {
	switch name {
	case "postgres", "pgx":
		return Dialect{kind: postgres}, nil
	case "sqlite", "sqlite3":
		return Dialect{kind: sqlite}, nil
	case "mysql":
		return Dialect{kind: mysql}, nil
	}
	return Dialect{}, fmt.Errorf("hotcounter: database %q is not supported (PostgreSQL, MySQL/MariaDB and SQLite are)", name)
}

// Each database's own statements are methods of its own type, beside the
// builders of Dialect that every database runs: Postgres, MySQL (MySQL and
// MariaDB) and SQLite, and the two families that two of them share,
// Upserts (PostgreSQL and SQLite, whose increments, folds and compactions
// are single statements) and RowLocks (PostgreSQL and MySQL, whose
// statements lock rows that other transactions may hold). A caller gets
// them from the dialect (OnPostgres, OnMySQL, OnSQLite, OnUpserts,
// OnRowLocks), so it cannot ask a database for SQL that it does not run,
// and each golden file holds only its database's statements.
type (
	// Postgres writes what PostgreSQL alone runs.
	Postgres struct {
		Dialect
		Upserts
		RowLocks
	}
	// MySQL writes what MySQL and MariaDB alone run: increments and folds
	// in several statements, and the session's own slot rows.
	MySQL struct {
		Dialect
		RowLocks
	}
	// SQLite writes what SQLite alone runs: table rebuilds.
	SQLite struct {
		Dialect
		Upserts
	}
	// Upserts writes the single-statement increments, folds and
	// compactions of PostgreSQL and SQLite.
	Upserts struct{ Dialect }
	// RowLocks writes the locking reads of PostgreSQL and MySQL.
	RowLocks struct{ Dialect }
)

// OnPostgres returns d's PostgreSQL statements, if d is PostgreSQL's.
func (d Dialect) OnPostgres() (Postgres, bool) {
	return Postgres{d, Upserts{d}, RowLocks{d}}, d.kind == postgres
}

// OnMySQL returns d's MySQL/MariaDB statements, if d is theirs.
func (d Dialect) OnMySQL() (MySQL, bool) { return MySQL{d, RowLocks{d}}, d.kind == mysql }

// OnSQLite returns d's SQLite statements, if d is SQLite's.
func (d Dialect) OnSQLite() (SQLite, bool) { return SQLite{d, Upserts{d}}, d.kind == sqlite }

// OnUpserts returns d's single-statement writes, if d is PostgreSQL's or
// SQLite's.
func (d Dialect) OnUpserts() (Upserts, bool) { return Upserts{d}, d.kind != mysql }

// OnRowLocks returns d's locking reads, if d is PostgreSQL's or MySQL's.
func (d Dialect) OnRowLocks() (RowLocks, bool) { return RowLocks{d}, d.kind != sqlite }

// MySQL reports whether this is the MySQL/MariaDB dialect, whose increments
// and folds run as several statements (see [Dialect.SelectKeys] and
// [MySQL.LockSlots]).
func (d Dialect) MySQL() bool { return d.kind == mysql }

// System returns OpenTelemetry's db.system.name of the dialect's database:
// postgresql, sqlite, or for the MySQL dialect mariadb when version (the
// server's, from ServerVersion; "" when not asked) says so, else mysql.
func (d Dialect) System(version string) string {
	switch d.kind {
	case postgres:
		return "postgresql"
	case sqlite:
		return "sqlite"
	}
	if strings.Contains(strings.ToLower(version), "mariadb") {
		return "mariadb"
	}
	return "mysql"
}

// ServerVersion writes the query of a MySQL or MariaDB server's version,
// which tells them apart (System).
func (d MySQL) ServerVersion(w Writer) { w.WriteString("SELECT VERSION()") }

// textType and intType are the CAST targets that make key and value columns of
// different tables comparable inside one UNION ALL.
func (d Dialect) textType() string {
	if d.kind == mysql {
		return "CHAR"
	}
	return "TEXT"
}

func (d Dialect) intType() string {
	switch d.kind {
	case sqlite:
		return "INTEGER"
	case mysql:
		return "SIGNED"
	}
	return "BIGINT"
}

// PrecreateByDefault reports whether sum counters pre-create their slot rows
// unless told otherwise. On MySQL/MariaDB yes: inserting a slot row takes
// gap and insert-intention locks (concurrent first inserts can deadlock,
// MySQL bug 52020) and its foreign key check takes a shared lock on the
// parent row, which waits for any transaction that updated the parent; with
// every row in place an increment is an exact-match UPDATE that locks one
// slot row. Not on PostgreSQL or SQLite: every load sums every slot row, so N
// rows for each parent, liked or not, would make reads of cold rows cost as
// much as reads of hot ones.
func (d Dialect) PrecreateByDefault() bool { return d.kind == mysql }

func (d Dialect) slotType() string {
	if d.kind == sqlite {
		return "INTEGER"
	}
	return "SMALLINT"
}

func args(w Writer, vs []any) {
	w.WriteString("(")
	for i, v := range vs {
		if i > 0 {
			w.WriteString(",")
		}
		w.Arg(v)
	}
	w.WriteString(")")
}

// keyIn writes " IN (k1, k2, ...)", or on PostgreSQL " = ANY(?)" with the keys
// bound as one array when they are all integers or all strings: one
// parameter to encode instead of hundreds.
func (d Dialect) keyIn(w Writer, keys []any) {
	if d.kind == postgres && len(keys) > 1 {
		if arr := typedArray(keys); arr != nil {
			w.WriteString(" = ANY(")
			w.Arg(arr)
			w.WriteString(")")
			return
		}
	}
	w.WriteString(" IN ")
	args(w, keys)
}

// typedArray returns keys as one array argument, or nil if they are not all
// integers or all strings.
func typedArray(keys []any) driver.Valuer {
	switch reflect.ValueOf(keys[0]).Kind() {
	case reflect.String:
		out := make([]string, len(keys))
		for i, k := range keys {
			rv := reflect.ValueOf(k)
			if rv.Kind() != reflect.String {
				return nil
			}
			out[i] = rv.String()
		}
		return stringArray{out}
	default:
		out := make([]int64, len(keys))
		for i, k := range keys {
			rv := reflect.ValueOf(k)
			switch rv.Kind() {
			case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
				out[i] = rv.Int()
			case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
				if rv.Uint() > math.MaxInt64 {
					return nil
				}
				out[i] = int64(rv.Uint())
			default:
				return nil
			}
		}
		return int64Array{out}
	}
}

// int64Array and stringArray bind a PostgreSQL array as one argument (ORMs
// expand a Go slice into a list of arguments). pgx encodes them natively as
// arrays (they are pgtype.ArrayGetters); other drivers get the array's text
// form from Value.
type (
	int64Array  struct{ pgtype.FlatArray[int64] }
	stringArray struct{ pgtype.FlatArray[string] }
)

func (a int64Array) Value() (driver.Value, error) {
	parts := make([]string, len(a.FlatArray))
	for i, v := range a.FlatArray {
		parts[i] = strconv.FormatInt(v, 10)
	}
	return "{" + strings.Join(parts, ",") + "}", nil
}

func (a stringArray) Value() (driver.Value, error) {
	parts := make([]string, len(a.FlatArray))
	esc := strings.NewReplacer(`\`, `\\`, `"`, `\"`)
	for i, v := range a.FlatArray {
		parts[i] = `"` + esc.Replace(v) + `"`
	}
	return "{" + strings.Join(parts, ",") + "}", nil
}

// q writes sql to w, writing each % as the next of names, quoted as an
// identifier ("%.%" is a qualified column). The statements below read as the
// SQL they produce; names come from the ORM and are always quoted. Every
// call has a name for each % (TestEveryQCallHasANameForEachPercent reads
// them all); a % past the names is written as it is.
func q(w Writer, sql string, names ...string) {
	for len(names) > 0 {
		i := strings.IndexByte(sql, '%')
		if i < 0 {
			break
		}
		w.WriteString(sql[:i])
		w.Ident(names[0])
		sql, names = sql[i+1:], names[1:]
	}
	w.WriteString(sql)
}

// Savepoint writes SAVEPOINT name.
func Savepoint(w Writer, name string) { w.WriteString("SAVEPOINT "); w.Ident(name) }

// RollbackTo writes ROLLBACK TO SAVEPOINT name.
func RollbackTo(w Writer, name string) { w.WriteString("ROLLBACK TO SAVEPOINT "); w.Ident(name) }

// Release writes RELEASE SAVEPOINT name.
func Release(w Writer, name string) { w.WriteString("RELEASE SAVEPOINT "); w.Ident(name) }

// Render writes build's statement as text that holds its arguments as
// literals, for a migration file: identifiers quoted the dialect's way,
// integers as numbers, strings quoted. An argument of another type is an
// error; no statement of the schema takes one.
func (d Dialect) Render(build func(Writer)) (string, error) {
	w := &literalWriter{mysql: d.kind == mysql}
	build(w)
	return w.b.String(), w.err
}

type literalWriter struct {
	b     strings.Builder
	mysql bool
	err   error
}

func (w *literalWriter) WriteString(s string) { w.b.WriteString(s) }
func (w *literalWriter) Ident(name string)    { w.b.WriteString(QuoteIdent(name, w.mysql)) }
func (w *literalWriter) Arg(v any) {
	switch x := v.(type) {
	case int:
		w.b.WriteString(strconv.Itoa(x))
	case int64:
		w.b.WriteString(strconv.FormatInt(x, 10))
	case string:
		if w.mysql {
			x = strings.ReplaceAll(x, `\`, `\\`)
		}
		literal(w, x)
	default:
		if w.err == nil {
			w.err = fmt.Errorf("countersql: a %T cannot be written as a literal", v)
		}
	}
}
