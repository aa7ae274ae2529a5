package countersql

import (
	"strconv"
	"strings"
)

// Adopting a counter over a table that already holds counts. A column of
// the counter's name on the parent table is part of the counter's value
// for as long as it exists: a sum counter reads COALESCE(column, 0) plus
// its slots, so tagging an existing column hides nothing, and old code
// that still runs `likes = likes + 1` keeps counting. MoveColumns moves
// the column's values onto slots (the row of slot [ColumnSlot]) and zeroes
// it, a batch of parents per transaction, so that the column can be
// dropped once no old code writes it.

// ColumnSlot is the slot number of the row that holds what was moved out
// of a parent column. Increments never choose it (they use 0..N-1), so a
// move never waits for an increment's row lock, and under MySQL's
// REPEATABLE READ a transaction that reads a counter, increments it and
// reads it again never sees a moved value both in the column (its
// snapshot) and in its own slot row (current).
const ColumnSlot = -1

// ProbeStorage writes a query that returns one row describing where t's
// values live right now:
//
//	(column exists, column type, column nullable, column default, own table exists, other table exists)
//
// The column is t.Column on t.Parent; the own table is t.Slots and the
// other t.Other (empty: reported absent). The type is the database's name
// for it (bigint, int(11), INTEGER); the default is its text, empty when
// there is none.
func (d Dialect) ProbeStorage(w Writer, t Table) {
	switch d.kind {
	case postgres:
		// to_regclass resolves a name through the search_path and returns
		// NULL, not an error, for a table that does not exist.
		w.WriteString("SELECT a.attname IS NOT NULL, COALESCE(format_type(a.atttypid, a.atttypmod), ''), " +
			"COALESCE(NOT a.attnotnull, false), COALESCE(pg_get_expr(ad.adbin, ad.adrelid), ''), to_regclass(")
		w.Arg(pgRegclass(t.Slots))
		w.WriteString(") IS NOT NULL, ")
		if t.Other == "" {
			w.WriteString("false")
		} else {
			w.WriteString("to_regclass(")
			w.Arg(pgRegclass(t.Other))
			w.WriteString(") IS NOT NULL")
		}
		w.WriteString(" FROM (SELECT 1) AS one LEFT JOIN pg_attribute a ON a.attrelid = to_regclass(")
		w.Arg(pgRegclass(t.Parent))
		w.WriteString(") AND a.attname = ")
		w.Arg(t.Column)
		w.WriteString(" AND a.attnum > 0 AND NOT a.attisdropped LEFT JOIN pg_attrdef ad ON ad.adrelid = a.attrelid AND ad.adnum = a.attnum")
	case mysql:
		schema := func(table string) {
			s, _ := splitQualified(table)
			mysqlSchema(w, s, arg)
		}
		exists := func(table string) {
			s, name := splitQualified(table)
			w.WriteString("(SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = ")
			mysqlSchema(w, s, arg)
			w.WriteString(" AND TABLE_NAME = ")
			w.Arg(name)
			w.WriteString(") > 0")
		}
		// One row, whether or not the column exists: an aggregate without
		// GROUP BY. The conditions stay in WHERE, on constants: MariaDB
		// then reads the definition of that one table, where a join's ON
		// (or a correlated condition) makes it open every table of every
		// database on the server. MariaDB reports the text NULL (unquoted)
		// as the default of a nullable column without one.
		w.WriteString("SELECT COUNT(*) > 0, COALESCE(MAX(c.COLUMN_TYPE), ''), COALESCE(MAX(c.IS_NULLABLE = 'YES'), 0), " +
			"COALESCE(MAX(CASE WHEN c.COLUMN_DEFAULT IS NULL OR c.COLUMN_DEFAULT = 'NULL' THEN '' ELSE c.COLUMN_DEFAULT END), ''), ")
		exists(t.Slots)
		w.WriteString(", ")
		exists(t.Other)
		w.WriteString(" FROM information_schema.COLUMNS c WHERE c.TABLE_SCHEMA = ")
		schema(t.Parent)
		_, parent := splitQualified(t.Parent)
		w.WriteString(" AND c.TABLE_NAME = ")
		w.Arg(parent)
		w.WriteString(" AND c.COLUMN_NAME = ")
		w.Arg(t.Column)
	default:
		exists := func(table string) {
			s, name := splitQualified(table)
			if s == "" {
				s = "main"
			}
			w.WriteString("(SELECT COUNT(*) FROM ")
			w.Ident(s + ".sqlite_master")
			w.WriteString(" WHERE type = 'table' AND name = ")
			w.Arg(name)
			w.WriteString(") > 0")
		}
		s, parent := splitQualified(t.Parent)
		if s == "" {
			s = "main"
		}
		w.WriteString("SELECT c.name IS NOT NULL, COALESCE(c.type, ''), COALESCE(c.\"notnull\" = 0, 0), COALESCE(c.dflt_value, ''), ")
		exists(t.Slots)
		w.WriteString(", ")
		exists(t.Other)
		w.WriteString(" FROM (SELECT 1) AS one LEFT JOIN pragma_table_info(")
		w.Arg(parent)
		w.WriteString(", ")
		w.Arg(s)
		w.WriteString(") c ON c.name = ")
		w.Arg(t.Column)
	}
}

// KeyUnique writes a query that returns one row holding a positive number
// when the column key of table is its primary key or alone in a unique
// index, which a slot table's foreign key needs, and 0 otherwise.
func (d Dialect) KeyUnique(w Writer, table, key string) {
	switch d.kind {
	case postgres:
		w.WriteString("SELECT COUNT(*) FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0] " +
			"WHERE i.indrelid = to_regclass(")
		w.Arg(pgRegclass(table))
		w.WriteString(") AND i.indisunique AND i.indnkeyatts = 1 AND i.indpred IS NULL AND a.attname = ")
		w.Arg(key)
	case mysql:
		// Both reads name the table by constants (see ProbeStorage): a
		// correlated s2.TABLE_NAME = s.TABLE_NAME reads every database.
		s, name := splitQualified(table)
		where := func(alias string) {
			w.WriteString(alias + ".TABLE_SCHEMA = ")
			mysqlSchema(w, s, arg)
			w.WriteString(" AND " + alias + ".TABLE_NAME = ")
			w.Arg(name)
		}
		w.WriteString("SELECT COUNT(*) FROM information_schema.STATISTICS s WHERE ")
		where("s")
		w.WriteString(" AND s.NON_UNIQUE = 0 AND s.SEQ_IN_INDEX = 1 AND s.COLUMN_NAME = ")
		w.Arg(key)
		w.WriteString(" AND NOT EXISTS (SELECT 1 FROM information_schema.STATISTICS s2 WHERE ")
		where("s2")
		w.WriteString(" AND s2.INDEX_NAME = s.INDEX_NAME AND s2.SEQ_IN_INDEX = 2)")
	default:
		// The primary key alone, or a unique index of one column.
		s, name := splitQualified(table)
		if s == "" {
			s = "main"
		}
		w.WriteString("SELECT (SELECT COUNT(*) FROM pragma_table_info(")
		w.Arg(name)
		w.WriteString(", ")
		w.Arg(s)
		w.WriteString(") WHERE name = ")
		w.Arg(key)
		w.WriteString(" AND pk = 1) * (SELECT COUNT(*) = 1 FROM pragma_table_info(")
		w.Arg(name)
		w.WriteString(", ")
		w.Arg(s)
		w.WriteString(") WHERE pk > 0) + (SELECT COUNT(*) FROM pragma_index_list(")
		w.Arg(name)
		w.WriteString(", ")
		w.Arg(s)
		w.WriteString(") l WHERE l.\"unique\" = 1 AND l.partial = 0 AND (SELECT COUNT(*) FROM pragma_index_info(l.name, ")
		w.Arg(s)
		w.WriteString(")) = 1 AND (SELECT name FROM pragma_index_info(l.name, ")
		w.Arg(s)
		w.WriteString(")) = ")
		w.Arg(key)
		w.WriteString(")")
	}
}

// ColumnOwners writes a lock-free query for up to limit parents, in key
// order after the key `after` (nil starts at the beginning), whose column
// holds a value other than 0 (NULL included): the parents a move walks.
func (d Dialect) ColumnOwners(w Writer, t Table, after any, limit int) {
	q(w, "SELECT % FROM % WHERE (% <> 0 OR % IS NULL)", t.ParentKey, t.Parent, t.Column, t.Column)
	if after != nil {
		q(w, " AND % > ", t.ParentKey)
		w.Arg(after)
	}
	q(w, " ORDER BY % LIMIT "+strconv.Itoa(limit), t.ParentKey)
}

// LockColumns writes a query that locks the given parents whose column
// holds a value other than 0 (NULL included), skipping those that another
// transaction holds, and returns (key, column) for each: the first step of
// a move. PostgreSQL takes FOR NO KEY UPDATE, which a writer of the column
// (old code's likes = likes + 1) also takes, and which foreign key checks
// (FOR KEY SHARE) do not wait for. SQLite has one writer at a time and
// needs no lock.
func (d Dialect) LockColumns(w Writer, t Table, keys []any) {
	q(w, "SELECT %, % FROM % ", t.ParentKey, t.Column, t.Parent)
	if d.kind == mysql {
		w.WriteString("FORCE INDEX (PRIMARY) ")
	}
	q(w, "WHERE (% <> 0 OR % IS NULL) AND %", t.Column, t.Column, t.ParentKey)
	d.keyIn(w, keys)
	q(w, " ORDER BY %", t.ParentKey)
	switch d.kind {
	case postgres:
		w.WriteString(" FOR NO KEY UPDATE SKIP LOCKED")
	case mysql:
		w.WriteString(" FOR UPDATE SKIP LOCKED")
	}
}

// SetColumnDefault writes the DDL that gives t's parent column the default
// 0, so that rows new code inserts without naming the column start at 0
// (not NULL, which old code's likes = likes + 1 would leave NULL). A change
// of the catalog only on PostgreSQL and MySQL/MariaDB; SQLite cannot alter
// a default, and has no RowLocks.
func (d RowLocks) SetColumnDefault(w Writer, t Table) {
	q(w, "ALTER TABLE % ALTER COLUMN % SET DEFAULT 0", t.Parent, t.Column)
}

// ZeroNullColumns writes the UPDATE that sets t's parent column to 0 where
// it is NULL, for the given parents.
func (d Dialect) ZeroNullColumns(w Writer, t Table, keys []any) {
	q(w, "UPDATE % SET % = 0 WHERE % IS NULL AND %", t.Parent, t.Column, t.Column, t.ParentKey)
	d.keyIn(w, keys)
}

// ZeroAllNulls writes the update that sets every NULL of t's column to 0,
// in one statement: a migration file's step before the column becomes
// NOT NULL (ZeroNullColumns does it in batches, by key, where the library
// runs the migration itself).
func (d Dialect) ZeroAllNulls(w Writer, t Table) {
	q(w, "UPDATE % SET % = 0 WHERE % IS NULL", t.Parent, t.Column, t.Column)
}

// NullOwners writes a lock-free query for up to limit parents, in key
// order after the key `after`, whose column is NULL.
func (d Dialect) NullOwners(w Writer, t Table, after any, limit int) {
	q(w, "SELECT % FROM % WHERE % IS NULL", t.ParentKey, t.Parent, t.Column)
	if after != nil {
		q(w, " AND % > ", t.ParentKey)
		w.Arg(after)
	}
	q(w, " ORDER BY % LIMIT "+strconv.Itoa(limit), t.ParentKey)
}

// IntegerType reports whether a column type, as [Dialect.ProbeStorage]
// names it, holds integers.
func IntegerType(typ string) bool {
	t := strings.ToLower(typ)
	for _, s := range []string{"int", "serial"} {
		if strings.Contains(t, s) {
			return !strings.Contains(t, "interval") && !strings.Contains(t, "point")
		}
	}
	return false
}

// splitQualified splits "schema.table" into its parts ("" for no schema).
func splitQualified(name string) (schema, table string) {
	if i := strings.LastIndexByte(name, '.'); i >= 0 {
		return name[:i], name[i+1:]
	}
	return "", name
}

// pgRegclass quotes a possibly schema-qualified name for to_regclass, so
// that its case is kept; "" stays "" (to_regclass(”) is NULL).
func pgRegclass(name string) string {
	if name == "" {
		return ""
	}
	parts := strings.Split(name, ".")
	for i, p := range parts {
		parts[i] = `"` + strings.ReplaceAll(p, `"`, `""`) + `"`
	}
	return strings.Join(parts, ".")
}

// IndexesOn writes the query of the name and SQL of every index that was
// created on a table with CREATE INDEX (SQLite), so that a rebuild of the
// table can put them back.
func (d SQLite) IndexesOn(w Writer, table string) {
	_, name := splitQualified(table)
	w.WriteString("SELECT name, sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL AND tbl_name = ")
	w.Arg(name)
}

// TableTotal writes a query of how many rows of a slot or delta table hold
// a value, and their sum.
func (d Dialect) TableTotal(w Writer, table string) {
	q(w, "SELECT COUNT(*), COALESCE(SUM(%), 0) FROM % WHERE % <> 0", ValueColumn, table, ValueColumn)
}

// ForeignKeysOn writes the query that returns 1 when the connection
// enforces foreign keys (SQLite's PRAGMA foreign_keys).
func (d SQLite) ForeignKeysOn(w Writer) { w.WriteString("PRAGMA foreign_keys") }

// SetForeignKeys writes the PRAGMA that turns foreign key enforcement on
// or off for the connection (SQLite; a no-op inside a transaction).
func (d SQLite) SetForeignKeys(w Writer, on bool) { setPragma(w, "foreign_keys", on) }

// setPragma writes the PRAGMA that turns a boolean setting of the
// connection on or off (SQLite).
func setPragma(w Writer, name string, on bool) {
	value := "OFF"
	if on {
		value = "ON"
	}
	w.WriteString("PRAGMA " + name + " = " + value)
}

// Recreate writes a CREATE TRIGGER or CREATE [UNIQUE] INDEX statement that
// SQLite kept (sqlite_master.sql) so that it leaves an object of that name
// alone: put back after a rebuild of its table, it must not fail where the
// rebuild kept the object.
func (SQLite) Recreate(w Writer, saved string) {
	for _, p := range []string{"CREATE TRIGGER ", "CREATE INDEX ", "CREATE UNIQUE INDEX "} {
		if strings.HasPrefix(saved, p) && !strings.HasPrefix(saved[len(p):], "IF NOT EXISTS ") {
			w.WriteString(p + "IF NOT EXISTS " + saved[len(p):])
			return
		}
	}
	w.WriteString(saved)
}
