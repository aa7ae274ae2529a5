// Package countersql is the one place where hotcounter's SQL is written: slot
// table DDL, the slot upsert, the fill query that loads counter values, and the
// rollup fold. It knows nothing about GORM or ent. Each ORM hands it a [Writer]
// that quotes identifiers and binds arguments in the ORM's own way, so the same
// statements come out of both ORMs and each can read what the other wrote.
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

// Table names the storage of one counter.
type Table struct {
	Parent    string // parent table, e.g. posts
	ParentKey string // parent primary key column, e.g. id
	Column    string // parent column holding the folded total (rollup mode), e.g. views
	Slots     string // slot table, e.g. post_views_slots (an append counter's delta table, post_claps_deltas)
	Owner     string // slot table column referencing the parent, e.g. post_id
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
type Dialect struct{ kind kind }

// For returns the dialect for an ORM's dialect name: "postgres" (also "pgx"),
// "sqlite" (also "sqlite3") or "mysql" (MySQL 8 and MariaDB 10.6+, InnoDB).
func For(name string) (Dialect, error) {
	switch name {
	case "postgres", "pgx":
		return Dialect{postgres}, nil
	case "sqlite", "sqlite3":
		return Dialect{sqlite}, nil
	case "mysql":
		return Dialect{mysql}, nil
	}
	return Dialect{}, fmt.Errorf("hotcounter: database %q is not supported (PostgreSQL, MySQL/MariaDB and SQLite are)", name)
}

// MySQL reports whether this is the MySQL/MariaDB dialect, whose increments
// and folds run as several statements (see [Dialect.SelectKeys] and
// [Dialect.LockSlots]).
func (d Dialect) MySQL() bool { return d.kind == mysql }

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

// slotCast is the CAST target of a slot number (MySQL casts to SIGNED only).
func (d Dialect) slotCast() string {
	if d.kind == mysql {
		return "SIGNED"
	}
	return d.slotType()
}

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
// SQL they produce; names come from the ORM and are always quoted.
func q(w Writer, sql string, names ...string) {
	for {
		i := strings.IndexByte(sql, '%')
		if i < 0 {
			if len(names) > 0 {
				panic("countersql: more names than % in " + sql)
			}
			w.WriteString(sql)
			return
		}
		w.WriteString(sql[:i])
		w.Ident(names[0])
		sql, names = sql[i+1:], names[1:]
	}
}

// CreateSlotTable writes the DDL of t's slot table: one row per (owner, slot),
// keyed on both, cascading away with its parent. ownerType is the column type
// of the parent key as the ORM maps it (no auto-increment).
func (d Dialect) CreateSlotTable(w Writer, t Table, ownerType string) {
	q(w, "CREATE TABLE IF NOT EXISTS % (% "+ownerType+" NOT NULL, % "+d.slotType()+" NOT NULL, "+
		"% BIGINT NOT NULL DEFAULT 0, PRIMARY KEY (%, %), "+
		"FOREIGN KEY (%) REFERENCES % (%) ON DELETE CASCADE)",
		t.Slots, t.Owner, SlotColumn, ValueColumn, t.Owner, SlotColumn, t.Owner, t.Parent, t.ParentKey)
}

// DropSlotTable writes the DDL that removes t's slot table.
func (d Dialect) DropSlotTable(w Writer, t Table) {
	q(w, "DROP TABLE IF EXISTS %", t.Slots)
}

// IncrementWhere writes one statement that adds delta to slot `slot` of every
// parent row matching cond, creating slot rows as needed:
//
//	INSERT INTO slots (owner, slot, n) SELECT parent.key, slot, delta FROM parent
//	WHERE cond ORDER BY parent.key ON CONFLICT (owner, slot) DO UPDATE SET n = slots.n + excluded.n
//
// Selecting the parents takes no row lock on them (PostgreSQL, SQLite), so an
// increment never queues behind a transaction that holds the parent row. The
// ORDER BY makes every multi-parent increment lock slot rows in key order, so
// two of them cannot deadlock. cond writes a boolean SQL expression over the
// parent table (the ORM renders the caller's WHERE); it must write something,
// "1=1" at least, because SQLite needs a WHERE before ON CONFLICT.
func (d Dialect) IncrementWhere(w Writer, t Table, slot int, delta int64, cond func(Writer)) {
	// Typed casts: a bare parameter in a SELECT list is text to PostgreSQL.
	q(w, "INSERT INTO % (%, %, %) SELECT %.%, CAST(", t.Slots, t.Owner, SlotColumn, ValueColumn, t.Parent, t.ParentKey)
	w.Arg(slot)
	w.WriteString(" AS " + d.slotCast() + "), CAST(")
	w.Arg(delta)
	q(w, " AS "+d.intType()+") FROM % WHERE ", t.Parent)
	cond(w)
	if d.kind == mysql {
		q(w, " ORDER BY %.% ON DUPLICATE KEY UPDATE % = %.% + ", t.Parent, t.ParentKey, ValueColumn, t.Slots, ValueColumn)
		w.Arg(delta)
		return
	}
	q(w, " ORDER BY %.% ON CONFLICT (%, %) DO UPDATE SET % = %.% + excluded.%",
		t.Parent, t.ParentKey, t.Owner, SlotColumn, ValueColumn, t.Slots, ValueColumn, ValueColumn)
}

// ReturnsTotals reports whether [Dialect.IncrementReturningTotals] is
// available (PostgreSQL).
func (d Dialect) ReturnsTotals() bool { return d.kind == postgres }

// IncrementReturningTotals writes IncrementWhere's upsert wrapped so that
// it also returns, for every parent it incremented, the parent key as text
// and the counter's new total (PostgreSQL only):
//
//	WITH up AS (<the upsert> RETURNING owner)
//	SELECT CAST(up.owner AS TEXT), COALESCE((SELECT SUM(n) FROM slots
//	    WHERE owner = up.owner), 0) + delta FROM up
//
// The slots are all read as of the statement's start (the upsert's own
// change is not visible to the rest of the statement), so the total is the
// one a load at that moment would have read, plus delta. Mixing the
// upserted row's latest value with the other rows as of the start would
// not be: a compaction committing while the upsert waited for its row
// would make the total miss or repeat the values it moved. It saves the
// read that would otherwise follow. read names what adds up to the total:
// the slot table, a table a change of mode left, the parent column the
// counter was adopted over.
func (d Dialect) IncrementReturningTotals(w Writer, t Table, slot int, delta int64, cond func(Writer), read Sources) {
	const up, all, p = "hc_up", "hc_all", "hc_p"
	q(w, "WITH % AS (", up)
	d.IncrementWhere(w, t, slot, delta, cond)
	q(w, " RETURNING %.%) SELECT CAST(%.% AS TEXT), ", t.Slots, t.Owner, up, t.Owner)
	for _, tb := range read.Tables {
		q(w, "COALESCE((SELECT SUM(%.%) FROM % AS % WHERE %.% = %.%), 0) + ", all, ValueColumn, tb, all, all, t.Owner, up, t.Owner)
	}
	if read.Column {
		q(w, "COALESCE((SELECT %.% FROM % AS % WHERE %.% = %.%), 0) + ", p, t.Column, t.Parent, p, p, t.ParentKey, up, t.Owner)
	}
	w.Arg(delta)
	q(w, " FROM %", up)
}

// SkipLocked reports whether the database can choose a slot row that no
// other transaction holds (FOR UPDATE SKIP LOCKED): PostgreSQL, and MySQL 8
// and MariaDB 10.6+ (see [Dialect.PickFreeSlot]).
func (d Dialect) SkipLocked() bool { return d.kind == postgres || d.kind == mysql }

// IncrementFreeSlot writes an UPDATE that adds delta to one slot row of the
// parent matching cond that no other transaction holds: the first free one
// from slot `start` on, wrapping around (start is random, so writers spread
// over the slots as with IncrementWhere). It returns the owner key of the row
// it updated, or no row when every slot row of the parent is held or it has
// none yet; the caller then falls back to IncrementWhere.
//
//	WITH pick AS MATERIALIZED (SELECT parent.key AS o, free.slot AS s FROM parent
//	    CROSS JOIN LATERAL (SELECT slot FROM slots WHERE owner = parent.key AND slot >= 0
//	        ORDER BY MOD(slot + 1024 - start, 1024) FOR UPDATE SKIP LOCKED LIMIT 1) free
//	    WHERE cond)
//	UPDATE slots SET n = slots.n + delta FROM pick
//	WHERE slots.owner = pick.o AND slots.slot = pick.s RETURNING slots.owner
//
// cond must match one parent at most. With several, the slot rows of some
// would be locked here and those of others by the fallback, in no common
// order: two such increments could deadlock. MATERIALIZED makes the pick run
// exactly once, before the update. SKIP LOCKED never waits; the statement
// costs a row lock written before the update.
func (d Dialect) IncrementFreeSlot(w Writer, t Table, start int, delta int64, cond func(Writer)) {
	const pick, free, inner, o, s = "hc_pick", "hc_free", "hc_slots", "hc_o", "hc_s"
	q(w, "WITH % AS MATERIALIZED (SELECT %.% AS %, %.% AS % FROM % CROSS JOIN LATERAL (SELECT %.% FROM % AS % WHERE %.% = %.% AND %.% >= 0 ORDER BY MOD(%.% + 1024 - ",
		pick, t.Parent, t.ParentKey, o, free, SlotColumn, s, t.Parent,
		inner, SlotColumn, t.Slots, inner, inner, t.Owner, t.Parent, t.ParentKey, inner, SlotColumn, inner, SlotColumn)
	w.Arg(start)
	q(w, ", 1024) FOR UPDATE SKIP LOCKED LIMIT 1) % WHERE ", free)
	cond(w)
	q(w, ") UPDATE % SET % = %.% + ", t.Slots, ValueColumn, t.Slots, ValueColumn)
	w.Arg(delta)
	q(w, " FROM % WHERE %.% = %.% AND %.% = %.% RETURNING %.%",
		pick, t.Slots, t.Owner, pick, o, t.Slots, SlotColumn, pick, s, t.Slots, t.Owner)
}

// KeyIn returns a condition for IncrementWhere and PrecreateSlots that
// matches the parents with the given keys.
func (d Dialect) KeyIn(t Table, keys []any) func(Writer) {
	return func(w Writer) {
		q(w, "%.%", t.Parent, t.ParentKey)
		d.keyIn(w, keys)
	}
}

// PrecreateSlots writes one statement that inserts every slot row (n = 0) of
// every parent matching cond, leaving existing rows alone:
//
//	WITH RECURSIVE s(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM s WHERE i < slots-1)
//	INSERT INTO slots (owner, slot, n) SELECT parent.key, s.i, 0 FROM parent CROSS JOIN s
//	WHERE cond ORDER BY parent.key, s.i ON CONFLICT DO NOTHING
func (d Dialect) PrecreateSlots(w Writer, t Table, slots int, cond func(Writer)) {
	const s, i = "hc_slot", "i"
	numbers := func() {
		q(w, "WITH RECURSIVE % (%) AS (SELECT 0 UNION ALL SELECT % + 1 FROM % WHERE % < "+strconv.Itoa(slots-1)+")", s, i, i, s, i)
	}
	if d.kind == mysql {
		// INSERT ... SELECT FROM parent CROSS JOIN (slot numbers) s ... ON
		// DUPLICATE KEY UPDATE n = n. The numbers come from four cross-joined
		// digit lists: MySQL takes no WITH before INSERT, and MariaDB stops a
		// recursive CTE at 1,000 rows. INSERT IGNORE would also hide foreign
		// key failures.
		q(w, "INSERT INTO % (%, %, %) SELECT %.%, %.%, 0 FROM % CROSS JOIN (SELECT ",
			t.Slots, t.Owner, SlotColumn, ValueColumn, t.Parent, t.ParentKey, s, i, t.Parent)
		digits := "(SELECT 0 AS d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4" +
			" UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9)"
		q(w, "d0.d + 10 * d1.d + 100 * d2.d + 1000 * d3.d AS % FROM "+digits+" d0 CROSS JOIN "+digits+" d1 CROSS JOIN "+
			digits+" d2 CROSS JOIN "+digits+" d3) AS % WHERE %.% < "+strconv.Itoa(slots)+" AND (", i, s, s, i)
		cond(w)
		w.WriteString(")")
		q(w, " ORDER BY %.%, %.% ON DUPLICATE KEY UPDATE % = %.%", t.Parent, t.ParentKey, s, i, ValueColumn, t.Slots, ValueColumn)
		return
	}
	numbers()
	q(w, " INSERT INTO % (%, %, %) SELECT %.%, %.%, 0 FROM % CROSS JOIN % WHERE ",
		t.Slots, t.Owner, SlotColumn, ValueColumn, t.Parent, t.ParentKey, s, i, t.Parent, s)
	cond(w)
	q(w, " ORDER BY %.%, %.% ON CONFLICT DO NOTHING", t.Parent, t.ParentKey, s, i)
}

// PendingOwners writes a query for up to limit distinct owners that have slot
// rows, in key order, after the key `after` (nil starts at the beginning).
// The rollup pass walks the slot table with it in batches.
func (d Dialect) PendingOwners(w Writer, t Table, after any, limit int) {
	q(w, "SELECT DISTINCT % FROM % WHERE ", t.Owner, t.Slots)
	if d.kind == mysql {
		// MySQL folds empty slot rows instead of deleting them.
		q(w, "% <> 0 AND ", ValueColumn)
	}
	if after != nil {
		q(w, "% > ", t.Owner)
		w.Arg(after)
	} else {
		w.WriteString("1=1")
	}
	q(w, " ORDER BY % LIMIT "+strconv.Itoa(limit), t.Owner)
}

// Fold returns the statements that move the pending slot values of the given
// owners into the parent column and remove the slot rows they came from. The
// caller runs them in order inside one transaction it owns; the affected-row
// count of the last one is the number of parents folded.
//
// Exactness: a value leaves the slot table in the same transaction that adds
// it to the column, so readers that read column + pending in one statement
// (see [Dialect.Fill]) never count it twice or miss it.
//
// PostgreSQL folds in one statement that locks the parents and then the slot
// rows with SKIP LOCKED, in key order: the fold never waits, so it can neither
// stall increments nor deadlock with a caller's transaction; what it skips
// stays pending for the next pass. SQLite has one writer at a time: the first
// statement takes the write lock, so nothing changes between the two.
func (d Dialect) Fold(t Table, owners []any) []func(Writer) {
	if d.kind == postgres {
		return []func(Writer){func(w Writer) { d.foldPostgres(w, t, owners) }}
	}
	return []func(Writer){
		func(w Writer) {
			q(w, "UPDATE % SET % = COALESCE(%.%, 0) + (SELECT COALESCE(SUM(%.%), 0) FROM % WHERE %.% = %.%) WHERE %.%",
				t.Parent, t.Column, t.Parent, t.Column, t.Slots, ValueColumn, t.Slots, t.Slots, t.Owner, t.Parent, t.ParentKey, t.Parent, t.ParentKey)
			d.keyIn(w, owners)
		},
		func(w Writer) { d.DeleteOwners(w, t, owners) },
	}
}

// DeleteOwners writes a statement that removes every slot row of the given
// owners.
func (d Dialect) DeleteOwners(w Writer, t Table, owners []any) {
	q(w, "DELETE FROM % WHERE %", t.Slots, t.Owner)
	d.keyIn(w, owners)
}

// SetColumn writes a statement that sets the parent column of the given
// parents to v (a rollup counter's total, with DeleteOwners in the same
// transaction).
func (d Dialect) SetColumn(w Writer, t Table, keys []any, v int64) {
	q(w, "UPDATE % SET % = ", t.Parent, t.Column)
	w.Arg(v)
	q(w, " WHERE %", t.ParentKey)
	d.keyIn(w, keys)
}

func (d Dialect) foldPostgres(w Writer, t Table, owners []any) {
	const parents, locked, taken, totals = "hc_parents", "hc_locked", "hc_taken", "hc_totals"
	// WITH parents AS (SELECT key FROM parent WHERE key IN (...) ORDER BY key FOR NO KEY UPDATE SKIP LOCKED),
	q(w, "WITH % AS (SELECT % FROM % WHERE %", parents, t.ParentKey, t.Parent, t.ParentKey)
	d.keyIn(w, owners)
	q(w, " ORDER BY % FOR NO KEY UPDATE SKIP LOCKED), "+
		// locked AS (SELECT owner, slot FROM slots WHERE owner IN (SELECT key FROM parents) ORDER BY owner, slot FOR UPDATE SKIP LOCKED),
		"% AS (SELECT %, % FROM % WHERE % IN (SELECT % FROM %) ORDER BY %, % FOR UPDATE SKIP LOCKED), "+
		// taken AS (DELETE FROM slots USING locked WHERE slots.owner = locked.owner AND slots.slot = locked.slot RETURNING slots.owner, slots.n),
		"% AS (DELETE FROM % USING % WHERE %.% = %.% AND %.% = %.% RETURNING %.%, %.%), "+
		// totals AS (SELECT owner, SUM(n) AS n FROM taken GROUP BY owner)
		"% AS (SELECT %, SUM(%) AS % FROM % GROUP BY %) "+
		// UPDATE parent SET col = parent.col + totals.n FROM totals WHERE parent.key = totals.owner
		"UPDATE % SET % = COALESCE(%.%, 0) + %.% FROM % WHERE %.% = %.%",
		t.ParentKey,
		locked, t.Owner, SlotColumn, t.Slots, t.Owner, t.ParentKey, parents, t.Owner, SlotColumn,
		taken, t.Slots, locked, t.Slots, t.Owner, locked, t.Owner, t.Slots, SlotColumn, locked, SlotColumn, t.Slots, t.Owner, t.Slots, ValueColumn,
		totals, t.Owner, ValueColumn, ValueColumn, taken, t.Owner,
		t.Parent, t.Column, t.Parent, t.Column, totals, ValueColumn, totals, t.Parent, t.ParentKey, totals, t.Owner)
}

// The MySQL/MariaDB write path. Under InnoDB's default REPEATABLE READ,
// INSERT ... SELECT takes shared next-key locks on the rows it reads, so the
// one-statement upsert of IncrementWhere would lock the parent rows. An
// increment instead reads the parent keys with a plain (consistent,
// lock-free) SELECT, adds to their slot rows with an exact-match UPDATE, and
// inserts the slot rows that were missing.

// SelectKeys writes a lock-free query for the keys of the parents matching
// cond, in key order.
func (d Dialect) SelectKeys(w Writer, t Table, cond func(Writer)) {
	q(w, "SELECT %.% FROM % WHERE ", t.Parent, t.ParentKey, t.Parent)
	cond(w)
	q(w, " ORDER BY %.%", t.Parent, t.ParentKey)
}

// IncrementKeys writes an UPDATE that adds delta to slot `slot` of each of
// keys (sorted), matching the slot table's primary key exactly, so InnoDB
// locks those rows and no gaps. Its affected-row count is the number of slot
// rows that existed (when delta is not 0).
func (d Dialect) IncrementKeys(w Writer, t Table, keys []any, slot int, delta int64) {
	q(w, "UPDATE % SET % = % + ", t.Slots, ValueColumn, ValueColumn)
	w.Arg(delta)
	q(w, " WHERE % = ", SlotColumn)
	w.Arg(slot)
	q(w, " AND %", t.Owner)
	d.keyIn(w, keys)
}

// InsertSlots writes an INSERT of slot `slot` with value delta for each of
// keys (sorted), adding to rows that appeared meanwhile:
//
//	INSERT INTO slots (owner, slot, n) VALUES (k1, slot, delta), ... ON DUPLICATE KEY UPDATE n = n + delta
func (d Dialect) InsertSlots(w Writer, t Table, keys []any, slot int, delta int64) {
	q(w, "INSERT INTO % (%, %, %) VALUES ", t.Slots, t.Owner, SlotColumn, ValueColumn)
	for i, k := range keys {
		if i > 0 {
			w.WriteString(", ")
		}
		args(w, []any{k, slot, delta})
	}
	q(w, " ON DUPLICATE KEY UPDATE % = % + ", ValueColumn, ValueColumn)
	w.Arg(delta)
}

// PickFreeSlot writes a MySQL query that locks the first slot row of owner,
// in slot order from slot `from` (or below `from` when below is set), that no
// other transaction holds, and returns its slot number:
//
//	SELECT slot FROM slots WHERE owner = ? AND slot >= from ORDER BY slot LIMIT 1 FOR UPDATE SKIP LOCKED
//
// The scan follows the primary key and stops at the first row it can lock,
// so it locks that row alone (and, under REPEATABLE READ, the gap before it).
func (d Dialect) PickFreeSlot(w Writer, t Table, owner any, from int, below bool) {
	q(w, "SELECT % FROM % WHERE % = ", SlotColumn, t.Slots, t.Owner)
	w.Arg(owner)
	op := " >= "
	if below {
		// Never the row of moved column values (ColumnSlot).
		q(w, " AND % >= 0", SlotColumn)
		op = " < "
	}
	q(w, " AND %"+op, SlotColumn)
	w.Arg(from)
	q(w, " ORDER BY % LIMIT 1 FOR UPDATE SKIP LOCKED", SlotColumn)
}

// LockParentsForSet writes a query that locks the given parents, in key
// order, waiting for other holders, so that assignments of a counter's
// total (delete the slot rows, write the new total) run one after another.
// It takes FOR NO KEY UPDATE on PostgreSQL, which increments (their foreign
// key checks take FOR KEY SHARE) do not wait for. SQLite has one writer at
// a time and needs no lock: callers check [Dialect.LocksRows].
func (d Dialect) LockParentsForSet(w Writer, t Table, keys []any) {
	q(w, "SELECT % FROM % WHERE %", t.ParentKey, t.Parent, t.ParentKey)
	d.keyIn(w, keys)
	if d.kind == mysql {
		q(w, " ORDER BY % FOR UPDATE", t.ParentKey)
		return
	}
	q(w, " ORDER BY % FOR NO KEY UPDATE", t.ParentKey)
}

// LocksRows reports whether the database takes row locks (not SQLite).
func (d Dialect) LocksRows() bool { return d.kind != sqlite }

// LockParents writes a query that locks the parents of owners that no other
// transaction holds (FOR UPDATE SKIP LOCKED, MySQL 8 / MariaDB 10.6) and
// returns their keys: the first step of a MySQL fold, so that it never waits.
func (d Dialect) LockParents(w Writer, t Table, owners []any) {
	q(w, "SELECT % FROM % FORCE INDEX (PRIMARY) WHERE %", t.ParentKey, t.Parent, t.ParentKey)
	d.keyIn(w, owners)
	q(w, " ORDER BY % FOR UPDATE SKIP LOCKED", t.ParentKey)
}

// LockSlots writes a query that locks the slot rows of one owner that no
// other transaction holds and returns them as (slot, n), read current. One
// owner at a time: with an equality on the key's prefix InnoDB reads (and
// locks) that owner's rows only, where an IN list over a small table may
// make it scan, and lock, them all.
func (d Dialect) LockSlots(w Writer, t Table, owner any) {
	q(w, "SELECT %, % FROM % WHERE % = ", SlotColumn, ValueColumn, t.Slots, t.Owner)
	w.Arg(owner)
	q(w, " AND % <> 0 ORDER BY % FOR UPDATE SKIP LOCKED", ValueColumn, SlotColumn)
}

// AddToColumns writes one UPDATE that adds amounts[i] to the column of the
// parent with key keys[i].
func (d Dialect) AddToColumns(w Writer, t Table, keys []any, amounts []int64) {
	// FORCE INDEX: InnoDB locks every row an UPDATE reads; a scan would lock
	// (and wait for) parents the fold does not touch.
	q(w, "UPDATE % FORCE INDEX (PRIMARY) SET % = COALESCE(%, 0) + CASE %", t.Parent, t.Column, t.Column, t.ParentKey)
	for i, k := range keys {
		w.WriteString(" WHEN ")
		w.Arg(k)
		w.WriteString(" THEN ")
		w.Arg(amounts[i])
	}
	q(w, " ELSE 0 END WHERE %", t.ParentKey)
	d.keyIn(w, keys)
}

// ZeroSlot writes the UPDATE that empties one folded slot row (MySQL). The
// row stays: the next increment of that slot is then an exact-match UPDATE,
// where re-inserting it would take gap locks that wait for, or deadlock
// with, writers of its neighbours (above all where the unique key is a
// secondary index, ent's layout). One row a statement: an exact match on
// the unique key locks that row only.
func (d Dialect) ZeroSlot(w Writer, t Table, owner any, slot int64) {
	q(w, "UPDATE % SET % = 0 WHERE % = ", t.Slots, ValueColumn, SlotColumn)
	w.Arg(slot)
	q(w, " AND % = ", t.Owner)
	w.Arg(owner)
}

// The write-behind buffer's statements.

// AddToSlots writes one statement that adds amounts[i] to slot slots[i] of
// owner keys[i] (keys sorted, each once), creating rows as needed:
//
//	INSERT INTO slots (owner, slot, n) VALUES (k1, s1, a1), ...
//	ON CONFLICT (owner, slot) DO UPDATE SET n = slots.n + excluded.n
//
// On MySQL/MariaDB, where an insert's foreign key check locks the parent,
// increments use it only for rows an UPDATE found missing; a move out of
// the parent column holds the parents already.
func (d Dialect) AddToSlots(w Writer, t Table, keys []any, slots []int, amounts []int64) {
	q(w, "INSERT INTO % (%, %, %) VALUES ", t.Slots, t.Owner, SlotColumn, ValueColumn)
	for i, k := range keys {
		if i > 0 {
			w.WriteString(", ")
		}
		args(w, []any{k, slots[i], amounts[i]})
	}
	if d.kind == mysql {
		q(w, " ON DUPLICATE KEY UPDATE % = % + VALUES(%)", ValueColumn, ValueColumn, ValueColumn)
		return
	}
	q(w, " ON CONFLICT (%, %) DO UPDATE SET % = %.% + excluded.%", t.Owner, SlotColumn, ValueColumn, t.Slots, ValueColumn, ValueColumn)
}

// CreateLedger returns the DDL of the table that records applied
// write-behind batches, with an index on the time that pruning reads (a
// prune that scanned would lock every other flush's ledger row).
func (d Dialect) CreateLedger(ledger string) []func(Writer) {
	if d.kind == mysql {
		return []func(Writer){func(w Writer) {
			q(w, "CREATE TABLE IF NOT EXISTS % (% VARCHAR(64) NOT NULL PRIMARY KEY, % BIGINT NOT NULL, INDEX (%))", ledger, "batch", "at", "at")
		}}
	}
	return []func(Writer){
		func(w Writer) {
			q(w, "CREATE TABLE IF NOT EXISTS % (% VARCHAR(64) NOT NULL PRIMARY KEY, % BIGINT NOT NULL)", ledger, "batch", "at")
		},
		func(w Writer) { q(w, "CREATE INDEX IF NOT EXISTS % ON % (%)", "idx_"+ledger+"_at", ledger, "at") },
	}
}

// LedgerHas writes a query that returns a row if batch was applied.
func (d Dialect) LedgerHas(w Writer, ledger, batch string) {
	q(w, "SELECT 1 FROM % WHERE % = ", ledger, "batch")
	w.Arg(batch)
}

// LedgerAdd writes the insert that records batch as applied at the given
// time (Unix milliseconds). Its primary key makes a second attempt of a
// batch fail instead of applying it twice.
func (d Dialect) LedgerAdd(w Writer, ledger, batch string, at int64) {
	q(w, "INSERT INTO % (%, %) VALUES (", ledger, "batch", "at")
	w.Arg(batch)
	w.WriteString(", ")
	w.Arg(at)
	w.WriteString(")")
}

// LedgerPrune writes the delete of batches recorded before the given time.
func (d Dialect) LedgerPrune(w Writer, ledger string, before int64) {
	q(w, "DELETE FROM % WHERE % < ", ledger, "at")
	w.Arg(before)
}

// Append mode: an increment inserts a delta row (id, owner, n) into the
// counter's delta table; a rollup pass folds delta rows into the parent
// column in batches by id. The delta table plays the part of the slot table
// for reads: Fill's live part sums its n by owner ([Table].Slots names it).

// IDColumn is the delta table's increasing row id.
const IDColumn = "id"

// CreateDeltaTable writes the DDL of t's delta table (t.Slots names it):
// an increasing id, the owner key, n; an index on the owner for live reads;
// a foreign key that cascades with the parent.
func (d Dialect) CreateDeltaTable(t Table, ownerType string) []func(Writer) {
	id := "BIGSERIAL PRIMARY KEY"
	switch d.kind {
	case sqlite:
		id = "INTEGER PRIMARY KEY AUTOINCREMENT"
	case mysql:
		// The foreign key gives the owner column its index.
		return []func(Writer){func(w Writer) {
			q(w, "CREATE TABLE IF NOT EXISTS % (% BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY, % "+ownerType+" NOT NULL, % BIGINT NOT NULL, "+
				"FOREIGN KEY (%) REFERENCES % (%) ON DELETE CASCADE)",
				t.Slots, IDColumn, t.Owner, ValueColumn, t.Owner, t.Parent, t.ParentKey)
		}}
	}
	return []func(Writer){
		func(w Writer) {
			q(w, "CREATE TABLE IF NOT EXISTS % (% "+id+", % "+ownerType+" NOT NULL, % BIGINT NOT NULL, "+
				"FOREIGN KEY (%) REFERENCES % (%) ON DELETE CASCADE)",
				t.Slots, IDColumn, t.Owner, ValueColumn, t.Owner, t.Parent, t.ParentKey)
		},
		func(w Writer) {
			q(w, "CREATE INDEX IF NOT EXISTS % ON % (%)", "idx_"+t.Slots+"_"+t.Owner, t.Slots, t.Owner)
		},
	}
}

// AppendWhere writes one statement that inserts a delta row of delta for
// every parent matching cond (which must write something, "1=1" at least):
//
//	INSERT INTO deltas (owner, n) SELECT parent.key, delta FROM parent WHERE cond ORDER BY parent.key
//
// No row is shared with another increment, so none waits for another.
func (d Dialect) AppendWhere(w Writer, t Table, delta int64, cond func(Writer)) {
	q(w, "INSERT INTO % (%, %) SELECT %.%, CAST(", t.Slots, t.Owner, ValueColumn, t.Parent, t.ParentKey)
	w.Arg(delta)
	q(w, " AS "+d.intType()+") FROM % WHERE ", t.Parent)
	cond(w)
	q(w, " ORDER BY %.%", t.Parent, t.ParentKey)
}

// DeltaBatchEnd writes a query for the id that ends the next batch of at
// most limit delta rows after the id `after`: the largest id among them,
// NULL when there are none.
func (d Dialect) DeltaBatchEnd(w Writer, t Table, after int64, limit int) {
	const b = "hc_batch"
	q(w, "SELECT MAX(%.%) FROM (SELECT % FROM % WHERE % > ", b, IDColumn, IDColumn, t.Slots, IDColumn)
	w.Arg(after)
	q(w, " ORDER BY % LIMIT "+strconv.Itoa(limit)+") %", IDColumn, b)
}

// DeltaOwners writes a lock-free query for the owners of the delta rows
// with ids in (after, upTo]: the first step of a MySQL fold, whose next
// locks those parents that no one holds (LockParents).
func (d Dialect) DeltaOwners(w Writer, t Table, after, upTo int64) {
	q(w, "SELECT DISTINCT % FROM % WHERE % > ", t.Owner, t.Slots, IDColumn)
	w.Arg(after)
	q(w, " AND % <= ", IDColumn)
	w.Arg(upTo)
	q(w, " ORDER BY %", t.Owner)
}

// LockDeltas writes a query that locks and returns (id, owner, n) of the
// delta rows with ids in (after, upTo] of the given owners: MySQL/MariaDB,
// whose fold then adds exactly those values (AddToColumns) and deletes
// exactly those rows (DeleteDeltas).
func (d Dialect) LockDeltas(w Writer, t Table, after, upTo int64, owners []any) {
	q(w, "SELECT %, %, % FROM % WHERE % > ", IDColumn, t.Owner, ValueColumn, t.Slots, IDColumn)
	w.Arg(after)
	q(w, " AND % <= ", IDColumn)
	w.Arg(upTo)
	q(w, " AND %", t.Owner)
	d.keyIn(w, owners)
	// SKIP LOCKED: a delta another transaction has not committed yet (or
	// the next-key lock past the range's end) is never waited for.
	q(w, " ORDER BY % FOR UPDATE SKIP LOCKED", IDColumn)
}

// DeleteDeltas writes the delete of the delta rows with the given ids.
func (d Dialect) DeleteDeltas(w Writer, t Table, ids []any) {
	q(w, "DELETE FROM % WHERE %", t.Slots, IDColumn)
	d.keyIn(w, ids)
}

// FoldDeltas returns the statements that move the delta rows with ids in
// (after, upTo] into their parents' column and delete them, run in order in
// one transaction. Exactly once: a row leaves the delta table in the same
// transaction that adds it to the column. Rows inserted meanwhile, or
// committed late with a lower id, stay for the next pass.
//
// PostgreSQL, in one statement that never waits: delta rows another fold
// holds, and parents another transaction holds, are skipped (SKIP LOCKED)
// and stay. SQLite has one writer at a time: an UPDATE, then a DELETE.
func (d Dialect) FoldDeltas(t Table, after, upTo int64) []func(Writer) {
	inRange := func(w Writer, table string) {
		q(w, "%.% > ", table, IDColumn)
		w.Arg(after)
		q(w, " AND %.% <= ", table, IDColumn)
		w.Arg(upTo)
	}
	if d.kind == postgres {
		return []func(Writer){func(w Writer) {
			const picked, parents, gone, totals = "hc_picked", "hc_parents", "hc_gone", "hc_totals"
			q(w, "WITH % AS (SELECT %.%, %.% FROM % WHERE ", picked, t.Slots, IDColumn, t.Slots, t.Owner, t.Slots)
			inRange(w, t.Slots)
			q(w, " FOR UPDATE SKIP LOCKED), "+
				"% AS (SELECT % FROM % WHERE % IN (SELECT % FROM %) ORDER BY % FOR NO KEY UPDATE SKIP LOCKED), "+
				"% AS (DELETE FROM % USING % WHERE %.% = %.% AND %.% IN (SELECT % FROM %) RETURNING %.%, %.%), "+
				"% AS (SELECT %, SUM(%) AS % FROM % GROUP BY %) "+
				"UPDATE % SET % = COALESCE(%.%, 0) + %.% FROM % WHERE %.% = %.%",
				parents, t.ParentKey, t.Parent, t.ParentKey, t.Owner, picked, t.ParentKey,
				gone, t.Slots, picked, t.Slots, IDColumn, picked, IDColumn, picked, t.Owner, t.ParentKey, parents, t.Slots, t.Owner, t.Slots, ValueColumn,
				totals, t.Owner, ValueColumn, ValueColumn, gone, t.Owner,
				t.Parent, t.Column, t.Parent, t.Column, totals, ValueColumn, totals, t.Parent, t.ParentKey, totals, t.Owner)
		}}
	}
	return []func(Writer){
		func(w Writer) {
			q(w, "UPDATE % SET % = COALESCE(%.%, 0) + (SELECT COALESCE(SUM(%.%), 0) FROM % WHERE %.% = %.% AND ",
				t.Parent, t.Column, t.Parent, t.Column, t.Slots, ValueColumn, t.Slots, t.Slots, t.Owner, t.Parent, t.ParentKey)
			inRange(w, t.Slots)
			q(w, ") WHERE %.% IN (SELECT % FROM % WHERE ", t.Parent, t.ParentKey, t.Owner, t.Slots)
			inRange(w, t.Slots)
			w.WriteString(")")
		},
		func(w Writer) {
			q(w, "DELETE FROM % WHERE ", t.Slots)
			inRange(w, t.Slots)
		},
	}
}

// AppendRows writes one statement that inserts a delta row of amounts[i]
// for owner keys[i]: the write-behind flush of an append counter.
func (d Dialect) AppendRows(w Writer, t Table, keys []any, amounts []int64) {
	q(w, "INSERT INTO % (%, %) VALUES ", t.Slots, t.Owner, ValueColumn)
	for i, k := range keys {
		if i > 0 {
			w.WriteString(", ")
		}
		args(w, []any{k, amounts[i]})
	}
}
