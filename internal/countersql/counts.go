package countersql

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
)

// Counts of child rows (counter caches): a counter whose value is the number
// of rows of a child table that reference its parent, such as a category's
// count of objects. The count lives in the counter's slots like any other;
// what changes it is a write to the child table. Database triggers (the
// default: they also see raw SQL, imports and bulk statements) or the ORM's
// hooks turn each child write into slot upserts.
//
// Lock order: a write that changes two parents (a move) writes the lower
// key's slot first. PostgreSQL's triggers write the transaction's own slot
// row and MySQL's and MariaDB's the session's, which no other transaction
// writes meanwhile (see claim.go), so they never wait for one. SQLite has
// one writer at a time.

// Count describes a counter that counts child rows.
type Count struct {
	Table             // the counter's storage and its parent
	SlotCount  int    // the counter's slot count
	Child      string // child table, e.g. objects
	ChildKey   string // child primary key column (ORM hooks only)
	Ref        string // child column holding the parent key, e.g. category_id
	Columns    []string
	Where      string // SQL condition over child columns (bare names); "" counts every row
	SoftDelete string // child column that marks a soft-deleted row when not NULL; "" if none
	// Sum, when set, makes the counter a running total rather than a
	// count: each counted row adds the value of this child column (NULL
	// adds 0), e.g. a folder's bytes, the sum of its files' size.
	Sum string
	// Via is set for a count over two levels of relations (the child's
	// Ref names a middle row, whose Via.Ref names the parent).
	Via *Via
	// Across is set for a count through the join table of a many-to-many
	// relation (Child is the join table, Ref its column naming the
	// parent): the join's other reference.
	Across *Across
}

// Via is the middle table of a count over two levels: a category's count
// of the products of its sub-categories counts the products whose
// category_id names a category whose parent_id is the category's key
// (Table categories, Key id, Ref parent_id). Triggers on the child add a
// row to the parent its middle row names at the time; triggers on the
// middle table move a middle row's whole total when its Ref changes, and
// subtract it before the middle row is deleted (its children then name
// no middle row, and count nowhere).
type Via struct {
	Table string // the middle table, e.g. categories
	Key   string // its key, which the child's Ref names, e.g. id
	Ref   string // its column naming the parent, e.g. parent_id
}

// Across is the other reference of a join table's row: a tag's count of
// posts counts the rows of post_tags whose tag_id is the tag's key, and
// Across names post_id, posts and its key. Deleting a post takes its
// post_tags rows with it by the join's foreign key cascade, which fires
// the join's triggers on PostgreSQL and SQLite and none on MySQL and
// MariaDB: there a trigger on the other side's table counts them first
// (MySQL.CascadeTrigger).
type Across struct {
	Ref   string // the join table's column naming the other side's row, e.g. post_id
	Table string // the other side's table, e.g. posts
	Key   string // its primary key column
}

// amount writes what one counted row adds to its parent, negated if
// sign is "-": 1, or for a running total the row's value of c.Sum (row is
// OLD, NEW or an alias).
func (c Count) amount(w Writer, row, sign string) {
	if c.Sum == "" {
		w.WriteString(sign + "1")
		return
	}
	w.WriteString(sign + "COALESCE(" + row + ".")
	w.Ident(c.Sum)
	w.WriteString(", 0)")
}

// parentOf writes the parent key a child row (OLD, NEW or an alias)
// counts for: its Ref, or through the middle table (c.Via) the middle
// row's reference, NULL where there is none.
func (c Count) parentOf(w Writer, row string) { c.parentOfLocked(w, row, "") }

// parentOfLocked is parentOf, reading the middle row with lock (a
// locking clause such as " FOR SHARE", or "").
func (c Count) parentOfLocked(w Writer, row, lock string) {
	if c.Via == nil {
		w.WriteString(row + ".")
		w.Ident(c.Ref)
		return
	}
	q(w, "(SELECT hc_m.% FROM % AS hc_m WHERE hc_m.% = "+row+".%"+lock+")", c.Via.Ref, c.Via.Table, c.Via.Key, c.Ref)
}

// total writes the aggregate of the counted rows of a group: COUNT(*),
// or for a running total the sum of c.Sum.
func (c Count) total(w Writer, alias string) {
	if c.Sum == "" {
		w.WriteString("COUNT(*)")
		return
	}
	w.WriteString("COALESCE(SUM(" + alias + ".")
	w.Ident(c.Sum)
	w.WriteString("), 0)")
}

// childAlias names the child table inside the statements below, so that a
// table that counts its own rows (replies to comments) reads unambiguously.
const childAlias = "hc_c"

// triggerName is the name of one of c's triggers (and, on PostgreSQL, of its
// function): hc_<slot table>_<op>, shortened with a hash to fit the
// 63-character identifiers of PostgreSQL and MySQL.
func (c Count) triggerName(op string) string {
	base := c.Slots
	if i := strings.LastIndexByte(base, '.'); i >= 0 {
		base = base[i+1:]
	}
	name := "hc_" + base + "_" + op
	if len(name) > 60 {
		sum := sha256.Sum256([]byte(name))
		name = name[:47] + "_" + hex.EncodeToString(sum[:])[:8] + "_" + op
	}
	return name
}

// schemaOf returns the schema qualifier of a table ("" if none), so that
// functions live beside the table they serve.
func schemaOf(table string) string {
	if i := strings.LastIndexByte(table, '.'); i >= 0 {
		return table[:i+1]
	}
	return ""
}

// where writes c's condition over the child columns, bare or qualified by
// the alias the statement gives the child.
func (c Count) where(w Writer) {
	w.WriteString("(")
	parts := 0
	if c.SoftDelete != "" {
		q(w, "% IS NULL", c.SoftDelete)
		parts++
	}
	if c.Where != "" {
		if parts > 0 {
			w.WriteString(" AND ")
		}
		w.WriteString("(" + c.Where + ")")
		parts++
	}
	if parts == 0 {
		w.WriteString("1=1")
	}
	w.WriteString(")")
}

// sessionSlot is the slot that count triggers, count hooks and recounts
// write on PostgreSQL: the transaction's own (see claim.go), or, where
// every number is taken, the one its backend pid falls on. SQLite has one
// writer at a time: slot 0. (MySQL and MariaDB write the session's own
// slot: see claim.go.)
func (d Dialect) sessionSlot(slots int) string {
	if d.kind == postgres {
		return "CAST(COALESCE(" + strconv.Itoa(slots) + " + " + ownNumber + ", mod(pg_backend_pid(), " + strconv.Itoa(slots) + ")) AS SMALLINT)"
	}
	return "0"
}

// InstallCountTriggers returns the statements that (re)create the triggers
// keeping c: after every INSERT, UPDATE and DELETE on the child table they
// add to the slots of the parents whose count changed. DropCountTriggers
// runs first, so a changed declaration replaces the old triggers.
//
// PostgreSQL: statement-level triggers with transition tables; each child
// statement issues one upsert, one row per changed parent, in key order.
// MySQL/MariaDB and SQLite: row-level triggers; a row moved between
// parents updates the lower key first. MySQL and MariaDB do not fire
// triggers for foreign key cascades; the slots of a deleted parent go with
// it anyway.
func (d Dialect) InstallCountTriggers(c Count) []func(Writer) {
	steps := d.DropCountTriggers(c)
	switch d.kind {
	case postgres:
		if d.citus {
			steps = append(steps, d.citusCountTriggers(c)...)
			break
		}
		for _, op := range []struct{ name, event, refs string }{
			{"ins", "INSERT", "NEW TABLE AS hc_new"},
			{"upd", "UPDATE", "OLD TABLE AS hc_old NEW TABLE AS hc_new"},
			{"del", "DELETE", "OLD TABLE AS hc_old"},
		} {
			op := op
			fn := schemaOf(c.Child) + c.triggerName(op.name)
			steps = append(steps,
				func(w Writer) { d.pgCountFunction(w, c, fn, op.event) },
				func(w Writer) {
					q(w, "CREATE TRIGGER % AFTER "+op.event+" ON % REFERENCING "+op.refs+" FOR EACH STATEMENT EXECUTE FUNCTION %()",
						c.triggerName(op.name), c.Child, fn)
				})
		}
	case mysql:
		for _, op := range []struct{ name, event string }{{"ins", "INSERT"}, {"upd", "UPDATE"}, {"del", "DELETE"}} {
			op := op
			steps = append(steps, func(w Writer) {
				// MySQL wants the trigger in the table's schema, named so.
				q(w, "CREATE TRIGGER % AFTER "+op.event+" ON % FOR EACH ROW BEGIN ", schemaOf(c.Child)+c.triggerName(op.name), c.Child)
				d.mysqlCountBody(w, c, op.event)
				w.WriteString(" END")
			})
		}
	default:
		for _, op := range []struct{ name, event string }{{"ins", "INSERT"}, {"upd", "UPDATE"}, {"del", "DELETE"}} {
			op := op
			steps = append(steps, func(w Writer) {
				q(w, "CREATE TRIGGER % AFTER "+op.event+" ON % FOR EACH ROW BEGIN ", c.triggerName(op.name), c.Child)
				if op.event != "INSERT" {
					d.sqliteApply(w, c, "OLD", -1)
				}
				if op.event != "DELETE" {
					d.sqliteApply(w, c, "NEW", 1)
				}
				w.WriteString(" END")
			})
		}
	}
	if c.Via != nil {
		steps = append(steps, d.viaTriggers(c)...)
	}
	return steps
}

// middleTotal writes what the children of a middle row (row: OLD, NEW or
// an alias of the middle table) add to their parent: their count, or
// their running total, over the counted ones.
func (c Count) middleTotal(w Writer, row string) {
	w.WriteString("(SELECT ")
	c.total(w, childAlias)
	q(w, " FROM % AS "+childAlias+" WHERE "+childAlias+".% = "+row+".% AND ", c.Child, c.Ref, c.Via.Key)
	c.where(w)
	w.WriteString(")")
}

// mysqlMiddleTotal writes the statement of a MySQL/MariaDB middle-table
// trigger that reads middleTotal into hc_t with a plain SELECT ... INTO,
// a consistent read that locks no child row: a subquery of a SET would
// lock them, and wait for a child write that waits, in its own trigger,
// for this middle row (a deadlock). A child write under this middle row
// still waits for the move: its trigger reads the middle row locked.
func (c Count) mysqlMiddleTotal(w Writer, row string) {
	w.WriteString("SELECT ")
	c.total(w, childAlias)
	q(w, " INTO hc_t FROM % AS "+childAlias+" WHERE "+childAlias+".% = "+row+".% AND ", c.Child, c.Ref, c.Via.Key)
	c.where(w)
	w.WriteString("; ")
}

// viaTriggers returns the statements that create the triggers on the
// middle table of a count over two levels (c.Via): after an update that
// changes a middle row's reference, its children's total moves from the
// old parent to the new one; before a middle row is deleted, its
// children's total leaves its parent (they then reach none: a cascade
// deletes them, and their own triggers find no middle row).
func (d Dialect) viaTriggers(c Count) []func(Writer) {
	v := c.Via
	mrow := func(w Writer, row string) { w.WriteString(row + "."); w.Ident(v.Ref) }
	switch d.kind {
	case postgres:
		upd, del := schemaOf(v.Table)+c.triggerName("mupd"), schemaOf(v.Table)+c.triggerName("mdel")
		upsert := func(w Writer) {
			q(w, " ON CONFLICT (%, %) DO UPDATE SET % = %.% + excluded.%", c.Owner, SlotColumn, ValueColumn, c.Slots, ValueColumn, ValueColumn)
		}
		return []func(Writer){
			func(w Writer) {
				q(w, "CREATE OR REPLACE FUNCTION %() RETURNS trigger LANGUAGE plpgsql AS $hc$ BEGIN INSERT INTO % (%, %, %) SELECT hc_d.k, ", upd, c.Slots, c.Owner, SlotColumn, ValueColumn)
				w.WriteString(d.sessionSlot(c.SlotCount))
				w.WriteString(", hc_d.n FROM (SELECT hc_x.k, SUM(hc_x.n) AS n FROM (SELECT ")
				mrow(w, "hc_o")
				w.WriteString(" AS k, -")
				c.middleTotal(w, "hc_o")
				w.WriteString(" AS n FROM hc_old AS hc_o UNION ALL SELECT ")
				mrow(w, "hc_w")
				w.WriteString(", ")
				c.middleTotal(w, "hc_w")
				q(w, " FROM hc_new AS hc_w) AS hc_x WHERE hc_x.k IS NOT NULL GROUP BY hc_x.k HAVING SUM(hc_x.n) <> 0) AS hc_d JOIN % AS hc_p ON hc_p.% = hc_d.k ORDER BY hc_d.k", c.Parent, c.ParentKey)
				upsert(w)
				w.WriteString("; RETURN NULL; END $hc$")
			},
			func(w Writer) {
				q(w, "CREATE TRIGGER % AFTER UPDATE ON % REFERENCING OLD TABLE AS hc_old NEW TABLE AS hc_new FOR EACH STATEMENT EXECUTE FUNCTION %()", c.triggerName("mupd"), v.Table, upd)
			},
			func(w Writer) {
				q(w, "CREATE OR REPLACE FUNCTION %() RETURNS trigger LANGUAGE plpgsql AS $hc$ BEGIN INSERT INTO % (%, %, %) SELECT hc_p.%, ", del, c.Slots, c.Owner, SlotColumn, ValueColumn, c.ParentKey)
				w.WriteString(d.sessionSlot(c.SlotCount))
				w.WriteString(", -")
				c.middleTotal(w, "OLD")
				q(w, " FROM % AS hc_p WHERE hc_p.% = ", c.Parent, c.ParentKey)
				mrow(w, "OLD")
				w.WriteString(" AND ")
				c.middleTotal(w, "OLD")
				w.WriteString(" <> 0")
				upsert(w)
				w.WriteString("; RETURN OLD; END $hc$")
			},
			func(w Writer) {
				q(w, "CREATE TRIGGER % BEFORE DELETE ON % FOR EACH ROW EXECUTE FUNCTION %()", c.triggerName("mdel"), v.Table, del)
			},
		}
	case mysql:
		add := func(w Writer, row, sign string) {
			w.WriteString("IF ")
			mrow(w, row)
			q(w, " IS NOT NULL AND EXISTS (SELECT 1 FROM % WHERE % = ", c.Parent, c.ParentKey)
			mrow(w, row)
			q(w, ") THEN INSERT INTO % (%, %, %) VALUES (", c.Slots, c.Owner, SlotColumn, ValueColumn)
			mrow(w, row)
			q(w, ", "+mysqlOwnSlot(c.SlotCount)+", "+sign+"hc_t) ON DUPLICATE KEY UPDATE % = % + "+sign+"hc_t; END IF; ", ValueColumn, ValueColumn)
		}
		return []func(Writer){
			func(w Writer) {
				q(w, "CREATE TRIGGER % AFTER UPDATE ON % FOR EACH ROW BEGIN DECLARE hc_i INT DEFAULT 0; DECLARE hc_t BIGINT DEFAULT 0; IF NOT (", schemaOf(v.Table)+c.triggerName("mupd"), v.Table)
				mrow(w, "OLD")
				w.WriteString(" <=> ")
				mrow(w, "NEW")
				w.WriteString(") THEN ")
				c.mysqlMiddleTotal(w, "NEW")
				w.WriteString("IF hc_t <> 0 THEN ")
				d.mysqlClaim(w)
				add(w, "OLD", "-")
				add(w, "NEW", "")
				w.WriteString("END IF; END IF; END")
			},
			func(w Writer) {
				q(w, "CREATE TRIGGER % BEFORE DELETE ON % FOR EACH ROW BEGIN DECLARE hc_i INT DEFAULT 0; DECLARE hc_t BIGINT DEFAULT 0; ", schemaOf(v.Table)+c.triggerName("mdel"), v.Table)
				c.mysqlMiddleTotal(w, "OLD")
				w.WriteString("IF hc_t <> 0 THEN ")
				d.mysqlClaim(w)
				add(w, "OLD", "-")
				w.WriteString("END IF; END")
			},
		}
	}
	add := func(w Writer, key, sign, totalOf string) {
		q(w, "INSERT INTO % (%, %, %) SELECT ", c.Slots, c.Owner, SlotColumn, ValueColumn)
		mrow(w, key)
		w.WriteString(", 0, 0 WHERE ")
		mrow(w, key)
		q(w, " IS NOT NULL AND EXISTS (SELECT 1 FROM % WHERE % = ", c.Parent, c.ParentKey)
		mrow(w, key)
		q(w, ") AND NOT EXISTS (SELECT 1 FROM % WHERE % = ", c.Slots, c.Owner)
		mrow(w, key)
		q(w, " AND % = 0); UPDATE % SET % = % "+sign+" ", SlotColumn, c.Slots, ValueColumn, ValueColumn)
		c.middleTotal(w, totalOf)
		q(w, " WHERE % = ", c.Owner)
		mrow(w, key)
		q(w, " AND % = 0; ", SlotColumn)
	}
	return []func(Writer){
		func(w Writer) {
			q(w, "CREATE TRIGGER % AFTER UPDATE ON % FOR EACH ROW WHEN ", c.triggerName("mupd"), v.Table)
			mrow(w, "OLD")
			w.WriteString(" IS NOT ")
			mrow(w, "NEW")
			w.WriteString(" BEGIN ")
			add(w, "OLD", "-", "NEW")
			add(w, "NEW", "+", "NEW")
			w.WriteString("END")
		},
		func(w Writer) {
			q(w, "CREATE TRIGGER % BEFORE DELETE ON % FOR EACH ROW BEGIN ", c.triggerName("mdel"), v.Table)
			add(w, "OLD", "-", "OLD")
			w.WriteString("END")
		},
	}
}

// CountTriggersOf writes the query of the names of c's triggers that exist
// (three when all do), so that a migration can tell a missing trigger
// from one it replaces. The names are literals, not arguments, so that
// the query goes as a plain one: twice in the test suite, MariaDB's answer
// to its prepared form broke the connection ("invalid connection"), which
// 720 prepared queries beside trigger DDL in 12 sessions did not
// reproduce alone.
func (d Dialect) CountTriggersOf(w Writer, c Count) {
	names := func() {
		for i, op := range []string{"ins", "upd", "del"} {
			if i > 0 {
				w.WriteString(", ")
			}
			literal(w, c.triggerName(op))
		}
		w.WriteString(")")
	}
	switch d.kind {
	case postgres:
		w.WriteString("SELECT tgname FROM pg_trigger WHERE tgrelid = to_regclass(")
		literal(w, pgRegclass(c.Child))
		w.WriteString(") AND tgname IN (")
	case mysql:
		schema, _ := splitQualified(c.Child)
		// A trigger lives in the schema of its table, and MariaDB reads
		// the triggers of one database only for a condition on the
		// table's schema (EVENT_OBJECT_SCHEMA), not on TRIGGER_SCHEMA.
		w.WriteString("SELECT TRIGGER_NAME FROM information_schema.TRIGGERS WHERE EVENT_OBJECT_SCHEMA = ")
		mysqlSchema(w, schema, literal)
		w.WriteString(" AND TRIGGER_NAME IN (")
	default:
		w.WriteString("SELECT name FROM sqlite_master WHERE type = 'trigger' AND name IN (")
	}
	names()
}

// DropCountTriggers returns the statements that remove c's triggers (and
// functions), if they exist.
func (d Dialect) DropCountTriggers(c Count) []func(Writer) {
	var steps []func(Writer)
	for _, op := range []string{"ins", "upd", "del"} {
		name := c.triggerName(op)
		switch d.kind {
		case postgres:
			steps = append(steps,
				func(w Writer) { q(w, "DROP TRIGGER IF EXISTS % ON %", name, c.Child) },
				func(w Writer) { q(w, "DROP FUNCTION IF EXISTS %()", schemaOf(c.Child)+name) })
		default:
			steps = append(steps, func(w Writer) { q(w, "DROP TRIGGER IF EXISTS %", schemaOf(c.Child)+name) })
		}
	}
	if c.Via != nil {
		for _, op := range []string{"mupd", "mdel"} {
			name := c.triggerName(op)
			switch d.kind {
			case postgres:
				steps = append(steps,
					func(w Writer) { q(w, "DROP TRIGGER IF EXISTS % ON %", name, c.Via.Table) },
					func(w Writer) { q(w, "DROP FUNCTION IF EXISTS %()", schemaOf(c.Via.Table)+name) })
			default:
				steps = append(steps, func(w Writer) { q(w, "DROP TRIGGER IF EXISTS %", schemaOf(c.Via.Table)+name) })
			}
		}
	}
	if d.kind == mysql && c.Across != nil {
		steps = append(steps, func(w Writer) { q(w, "DROP TRIGGER IF EXISTS %", schemaOf(c.Across.Table)+c.triggerName("cas")) })
	}
	return steps
}

// CascadeTrigger returns the statement that creates the trigger counting,
// on MySQL and MariaDB, the join rows that deleting a row of the other
// side of c (c.Across) takes with it by a foreign key cascade, which fires
// no trigger of the join table there: before the row is deleted, one
// upsert subtracts the counted join rows naming it from the session's own
// slot of each parent, in key order. Install it only where the join's
// foreign key cascades (DeleteCascades): without one the rows stay and
// still count; with a restricting one the delete fails, and the statement
// is undone with its trigger.
func (d MySQL) CascadeTrigger(c Count) func(Writer) {
	return func(w Writer) {
		a := c.Across
		q(w, "CREATE TRIGGER % BEFORE DELETE ON % FOR EACH ROW BEGIN DECLARE hc_i INT DEFAULT 0; ", schemaOf(a.Table)+c.triggerName("cas"), a.Table)
		d.mysqlClaim(w)
		q(w, "INSERT INTO % (%, %, %) SELECT %.%, "+mysqlOwnSlot(c.SlotCount)+", -", c.Slots, c.Owner, SlotColumn, ValueColumn, childAlias, c.Ref)
		c.total(w, childAlias)
		q(w, " FROM % AS % WHERE %.% = OLD.% AND ", c.Child, childAlias, childAlias, a.Ref, a.Key)
		d.counted(w, c, childAlias)
		w.WriteString(" AND ")
		c.parentExists(w, childAlias)
		q(w, " GROUP BY %.% ORDER BY %.% ON DUPLICATE KEY UPDATE % = % + VALUES(%); END",
			childAlias, c.Ref, childAlias, c.Ref, ValueColumn, ValueColumn, ValueColumn)
	}
}

// DeleteCascades writes the query that finds whether c's join table has a
// foreign key from its column c.Across.Ref to the other side's table that
// cascades deletes (a row when it has).
func (d MySQL) DeleteCascades(w Writer, c Count) {
	schema, table := splitQualified(c.Child)
	_, other := splitQualified(c.Across.Table)
	// Both tables are named by constants: joined only on rc's columns,
	// MariaDB reads the key columns of every table of every database.
	w.WriteString("SELECT 1 FROM information_schema.REFERENTIAL_CONSTRAINTS AS rc JOIN information_schema.KEY_COLUMN_USAGE AS k " +
		"ON k.CONSTRAINT_SCHEMA = rc.CONSTRAINT_SCHEMA AND k.CONSTRAINT_NAME = rc.CONSTRAINT_NAME AND k.TABLE_NAME = rc.TABLE_NAME WHERE rc.CONSTRAINT_SCHEMA = ")
	mysqlSchema(w, schema, literal)
	w.WriteString(" AND rc.TABLE_NAME = ")
	literal(w, table)
	w.WriteString(" AND k.TABLE_SCHEMA = ")
	mysqlSchema(w, schema, literal)
	w.WriteString(" AND k.TABLE_NAME = ")
	literal(w, table)
	w.WriteString(" AND rc.REFERENCED_TABLE_NAME = ")
	literal(w, other)
	w.WriteString(" AND rc.DELETE_RULE = 'CASCADE' AND k.COLUMN_NAME = ")
	literal(w, c.Across.Ref)
}

// pgCountFunction writes the trigger function of one event: it sums +1 for
// every counted new row and -1 for every counted old row by parent and adds
// each non-zero sum, in key order, to the parent's slot row of this
// transaction's own number (see claim.go), in one upsert: a row no other
// transaction writes, so the trigger never waits for a counter row, and a
// statement of any size takes one advisory lock per transaction. The join
// skips parents that no longer exist: deleting a parent cascades to its
// children, whose trigger then runs after the parent is gone. The only wait
// left is the foreign key check of a new slot row, FOR KEY SHARE on the
// parent: it waits for a transaction that deletes the parent or holds it
// FOR UPDATE.
func (d Dialect) pgCountFunction(w Writer, c Count, fn, event string) {
	q(w, "CREATE OR REPLACE FUNCTION %() RETURNS trigger LANGUAGE plpgsql AS $hc$ BEGIN "+
		"INSERT INTO % (%, %, %) SELECT hc_d.k, ", fn, c.Slots, c.Owner, SlotColumn, ValueColumn)
	w.WriteString(d.sessionSlot(c.SlotCount))
	w.WriteString(", hc_d.n FROM (SELECT hc_x.k, SUM(hc_x.n) AS n FROM (")
	parts := []struct{ table, sign string }{}
	if event != "DELETE" {
		parts = append(parts, struct{ table, sign string }{"hc_new", ""})
	}
	if event != "INSERT" {
		parts = append(parts, struct{ table, sign string }{"hc_old", "-"})
	}
	for i, p := range parts {
		if i > 0 {
			w.WriteString(" UNION ALL ")
		}
		// The middle row is read FOR SHARE: a concurrent move of it (an
		// UPDATE) then waits for this transaction, or this statement
		// for the move, and reads the reference it committed. Without
		// the lock a child written under a middle row whose move is
		// not committed yet would count for the old parent, and the
		// move's total would leave it out.
		w.WriteString("SELECT ")
		c.parentOfLocked(w, d.Quote(childAlias), " FOR SHARE")
		w.WriteString(" AS k, ")
		c.amount(w, childAlias, p.sign)
		q(w, " AS n FROM "+p.table+" AS % WHERE ", childAlias)
		c.where(w)
	}
	q(w, ") AS hc_x GROUP BY hc_x.k HAVING SUM(hc_x.n) <> 0) AS hc_d JOIN % AS hc_p ON hc_p.% = hc_d.k ORDER BY hc_d.k "+
		"ON CONFLICT (%, %) DO UPDATE SET % = %.% + excluded.%; RETURN NULL; END $hc$",
		c.Parent, c.ParentKey, c.Owner, SlotColumn, ValueColumn, c.Slots, ValueColumn, ValueColumn)
}

// literal writes s as a SQL string literal, for DDL such as a function
// body, which takes no bind parameters.
func literal(w Writer, s string) {
	w.WriteString("'" + strings.ReplaceAll(s, "'", "''") + "'")
}

// mysqlSchema writes the MySQL schema named schema through value (an
// argument, or a literal where the statement takes none), or DATABASE(),
// the connection's, when schema is empty.
func mysqlSchema(w Writer, schema string, value func(Writer, string)) {
	if schema == "" {
		w.WriteString("DATABASE()")
		return
	}
	value(w, schema)
}

// arg writes s as an argument.
func arg(w Writer, s string) { w.Arg(s) }

// counted writes a boolean: does the row (OLD or NEW, in a row trigger of
// MySQL, MariaDB or SQLite) count for its parent? It reads only the columns
// the count needs: the reference, the soft-delete column and those the
// condition names (see condition.go), never a copy of the row.
func (d Dialect) counted(w Writer, c Count, row string) {
	w.WriteString("(")
	c.parentOf(w, row)
	w.WriteString(" IS NOT NULL")
	if c.SoftDelete != "" {
		w.WriteString(" AND " + row + ".")
		w.Ident(c.SoftDelete)
		w.WriteString(" IS NULL")
	}
	if c.Where != "" {
		w.WriteString(" AND (")
		d.rowCondition(w, c, row)
		w.WriteString(")")
	}
	w.WriteString(")")
}

// parentExists writes a boolean: does row's parent exist? Without foreign
// key constraints a child may name a missing parent, whose slot row the
// slot table's foreign key would refuse, failing the child's write.
func (c Count) parentExists(w Writer, row string) {
	q(w, "EXISTS (SELECT 1 FROM % WHERE % = ", c.Parent, c.ParentKey)
	c.parentOf(w, row)
	w.WriteString(")")
}

// mysqlCountBody writes the body of a MySQL/MariaDB row trigger. A moved
// row updates the lower parent key first.
func (d Dialect) mysqlCountBody(w Writer, c Count, event string) {
	counted := func(row string) {
		w.WriteString("(")
		d.counted(w, c, row)
		w.WriteString(" AND ")
		c.parentExists(w, row)
		w.WriteString(")")
	}
	ref := func(row string) { c.parentOf(w, row) }
	w.WriteString("DECLARE hc_i INT DEFAULT 0; ")
	if event == "UPDATE" {
		w.WriteString("DECLARE hc_o, hc_n INT DEFAULT 0; ")
	}
	d.mysqlClaim(w)
	switch event {
	case "INSERT", "DELETE":
		row, delta := "NEW", 1
		if event == "DELETE" {
			row, delta = "OLD", -1
		}
		w.WriteString("IF ")
		counted(row)
		w.WriteString(" THEN ")
		d.mysqlApply(w, c, row, delta)
		w.WriteString(" END IF;")
		return
	}
	w.WriteString("SET hc_o = ")
	counted("OLD")
	w.WriteString("; SET hc_n = ")
	counted("NEW")
	w.WriteString("; IF hc_o AND hc_n AND ")
	ref("OLD")
	w.WriteString(" = ")
	ref("NEW")
	if c.Sum != "" {
		w.WriteString(" AND OLD.")
		w.Ident(c.Sum)
		w.WriteString(" <=> NEW.")
		w.Ident(c.Sum)
	}
	w.WriteString(" THEN SET hc_o = 0, hc_n = 0; END IF; IF hc_o AND (NOT hc_n OR ")
	ref("OLD")
	w.WriteString(" < ")
	ref("NEW")
	w.WriteString(") THEN ")
	d.mysqlApply(w, c, "OLD", -1)
	w.WriteString(" SET hc_o = 0; END IF; IF hc_n THEN ")
	d.mysqlApply(w, c, "NEW", 1)
	w.WriteString(" END IF; IF hc_o THEN ")
	d.mysqlApply(w, c, "OLD", -1)
	w.WriteString(" END IF;")
}

// mysqlApply adds delta to the session's own slot of row's parent (see
// claim.go): a row no other session writes, so the trigger never waits for
// another transaction's slot row. Where (owner, slot) is the primary key,
// with one upsert: a duplicate is locked as a record only, and a new row
// takes no lock another writer waits for. Where it is a unique secondary
// index beside a surrogate key (ent's layout), see mysqlApplyByIndex.
func (d Dialect) mysqlApply(w Writer, c Count, row string, delta int) {
	sign := ""
	if delta < 0 {
		sign = "-"
	}
	if c.RowID != "" {
		mysqlApplyByIndex(w, c, row, sign)
		return
	}
	q(w, "INSERT INTO % (%, %, %) VALUES (", c.Slots, c.Owner, SlotColumn, ValueColumn)
	c.parentOf(w, row)
	w.WriteString(", " + mysqlOwnSlot(c.SlotCount) + ", ")
	c.amount(w, row, sign)
	q(w, ") ON DUPLICATE KEY UPDATE % = % + ", ValueColumn, ValueColumn)
	c.amount(w, row, sign)
	w.WriteString(";")
}

// seenLimit bounds the list of a session's rows that mysqlApplyByIndex
// keeps in a user variable (bytes); a longer list starts again.
const seenLimit = 8000

// mysqlApplyByIndex is mysqlApply on a slot table whose (owner, slot) is
// a unique secondary index beside a surrogate key (ent's layout). There an
// upsert that meets its row locks it with the gap below it (InnoDB's
// next-key lock on a duplicate of a unique secondary key), so another
// session's first row of the parent that falls in that gap waits, and
// sessions doing so wait for each other in cycles (deadlocks: ent's
// many-to-many counts under 24 writers). An UPDATE through the index
// locks a row it finds as a record only, but one that finds none locks
// the gap where the row would go, where a first row of another session
// would wait. So the trigger keeps, in a user variable of the session
// (@hc_seen_…, per slot table), the rows it has written as "number:parent"
// of the session's claimed number: a row it has written it updates
// through the index, and inserts only if the update found none (a
// rollback took it away); a row it has not written it upserts, as before:
// a new one takes no lock that others wait for. The list is a hint, so a
// parent key holding a comma or a colon costs only an update that finds
// nothing. (Reading the surrogate key first would not help: reads in a
// trigger lock too.)
func mysqlApplyByIndex(w Writer, c Count, row, sign string) {
	sum := sha256.Sum256([]byte(c.Slots))
	seen := "@hc_seen_" + hex.EncodeToString(sum[:8])
	w.WriteString("SET @hc_p = ")
	c.parentOf(w, row)
	w.WriteString(", @hc_k = CONCAT(',', @hc_slot, ':', @hc_p, ','), @hc_done = 0; ")
	w.WriteString("IF LOCATE(@hc_k, IFNULL(" + seen + ", '')) > 0 THEN ")
	q(w, "UPDATE % SET % = % + ", c.Slots, ValueColumn, ValueColumn)
	c.amount(w, row, sign)
	q(w, " WHERE % = @hc_p AND % = "+mysqlOwnSlot(c.SlotCount)+"; SET @hc_done = ROW_COUNT() > 0; END IF; ", c.Owner, SlotColumn)
	q(w, "IF NOT @hc_done THEN INSERT INTO % (%, %, %) VALUES (@hc_p, "+mysqlOwnSlot(c.SlotCount)+", ", c.Slots, c.Owner, SlotColumn, ValueColumn)
	c.amount(w, row, sign)
	q(w, ") ON DUPLICATE KEY UPDATE % = % + ", ValueColumn, ValueColumn)
	c.amount(w, row, sign)
	w.WriteString("; IF @hc_k IS NOT NULL THEN SET " + seen + " = IF(LENGTH(IFNULL(" + seen + ", '')) > " + strconv.Itoa(seenLimit) +
		", @hc_k, CONCAT(IFNULL(" + seen + ", ','), SUBSTRING(@hc_k, 2))); END IF; END IF;")
}

// sqliteApply writes the statements of a SQLite row trigger that add delta
// to slot 0 of row's parent if the row counts and the parent exists (a
// cascade from a deleted parent runs this trigger after the parent is gone).
// The slot row is created only where it is missing (NOT EXISTS, never a
// conflict): a statement in a trigger takes the conflict policy of the
// statement that fired it, so INSERT OR IGNORE would become an upsert's
// failure or a REPLACE that resets the row.
func (d Dialect) sqliteApply(w Writer, c Count, row string, delta int) {
	q(w, "INSERT INTO % (%, %, %) SELECT ", c.Slots, c.Owner, SlotColumn, ValueColumn)
	c.parentOf(w, row)
	w.WriteString(", 0, 0 WHERE ")
	d.counted(w, c, row)
	w.WriteString(" AND ")
	c.parentExists(w, row)
	q(w, " AND NOT EXISTS (SELECT 1 FROM % WHERE % = ", c.Slots, c.Owner)
	c.parentOf(w, row)
	q(w, " AND % = 0); ", SlotColumn)
	sign := ""
	if delta < 0 {
		sign = "-"
	}
	q(w, "UPDATE % SET % = % + ", c.Slots, ValueColumn, ValueColumn)
	c.amount(w, row, sign)
	q(w, " WHERE % = ", c.Owner)
	c.parentOf(w, row)
	q(w, " AND % = 0 AND ", SlotColumn)
	d.counted(w, c, row)
	w.WriteString("; ")
}

// CountedRows writes the query an ORM hook runs around a child write: for
// every child row matching cond, its key and, per count, the parent key it
// counts for (NULL where it does not count). lock takes the rows FOR
// UPDATE, so that no other writer changes them before the write.
//
//	SELECT key, CASE WHEN where1 THEN ref1 END, ... FROM child WHERE cond [FOR UPDATE]
//
// Every count names the same child table; cond may name it.
func (d Dialect) CountedRows(w Writer, counts []Count, cond func(Writer), lock bool) {
	child := counts[0]
	for i, col := range child.KeyColumns() {
		if i == 0 {
			q(w, "SELECT %", col)
		} else {
			q(w, ", %", col)
		}
	}
	for _, c := range counts {
		w.WriteString(", CASE WHEN ")
		c.where(w)
		q(w, " THEN % END", c.Ref)
	}
	q(w, " FROM % WHERE ", child.Child)
	cond(w)
	if lock && d.kind != sqlite {
		w.WriteString(" FOR UPDATE")
	}
}

// ChildKeyIn returns a condition on the child key: key IN (keys), or for
// a join table keyed by its two references (Pair keys) (ref, other) IN
// ((?, ?), ...).
func (d Dialect) ChildKeyIn(c Count, keys []any) func(Writer) {
	return func(w Writer) {
		cols := c.KeyColumns()
		if len(cols) == 1 {
			q(w, "%.%", c.Child, cols[0])
			d.keyIn(w, keys)
			return
		}
		if len(keys) == 0 {
			w.WriteString("1=0")
			return
		}
		if d.kind == mysql {
			// MariaDB reads (a, b) IN (...) by scanning the table, and a
			// DELETE so locks every row (a deadlock between two writers
			// of different pairs, measured); an OR of equalities is read
			// by ranges of the index.
			w.WriteString("(")
			for i, k := range keys {
				if i > 0 {
					w.WriteString(" OR ")
				}
				p := k.(Pair)
				q(w, "(%.% = ", c.Child, cols[0])
				w.Arg(p[0])
				q(w, " AND %.% = ", c.Child, cols[1])
				w.Arg(p[1])
				w.WriteString(")")
			}
			w.WriteString(")")
			return
		}
		q(w, "(%.%, %.%) IN (", c.Child, cols[0], c.Child, cols[1])
		for i, k := range keys {
			if i > 0 {
				w.WriteString(", ")
			}
			p := k.(Pair)
			args(w, p[:])
		}
		w.WriteString(")")
	}
}

// Pair is the key of a row of a many-to-many join table that has no key
// column of its own: its two references, in the order of KeyColumns.
type Pair [2]any

// KeyColumns returns the columns that name one child row for ORM hooks:
// ChildKey, or for a join table without one, Ref and Across.Ref (whose
// values a Pair holds).
func (c Count) KeyColumns() []string {
	if c.ChildKey == "" && c.Across != nil {
		return []string{c.Ref, c.Across.Ref}
	}
	return []string{c.ChildKey}
}

// InsertJoinRow writes the insert of one row of a many-to-many join table
// (its two references, in the order of KeyColumns) that does nothing if
// the row exists: the hook that keeps a count through the join table
// counts the row when the statement inserted it (one row affected), so
// two transactions attaching the same pair at once count it once.
func (d Dialect) InsertJoinRow(w Writer, c Count, p Pair) {
	q(w, "INSERT INTO % (%, %) VALUES ", c.Child, c.Ref, c.Across.Ref)
	args(w, p[:])
	if d.kind == mysql {
		q(w, " ON DUPLICATE KEY UPDATE % = %", c.Ref, c.Ref)
		return
	}
	w.WriteString(" ON CONFLICT DO NOTHING")
}

// DeleteJoinRows writes the delete of the join table's rows named by
// pairs (KeyColumns order), rows a hook read and locked first.
func (d Dialect) DeleteJoinRows(w Writer, c Count, pairs []any) {
	q(w, "DELETE FROM % WHERE ", c.Child)
	d.ChildKeyIn(c, pairs)(w)
}

// KeysWhere writes the query of the keys of table's rows matching cond,
// in key order, locked FOR UPDATE if lock (SQLite, one writer at a
// time: unlocked).
func (d Dialect) KeysWhere(w Writer, table, key string, cond func(Writer), lock bool) {
	q(w, "SELECT %.% FROM % WHERE ", table, key, table)
	cond(w)
	q(w, " ORDER BY %.%", table, key)
	if lock && d.kind != sqlite {
		w.WriteString(" FOR UPDATE")
	}
}

// LockAcrossForUpdate writes the query that locks rows of the join's
// other side (c.Across.Table, keys sorted) FOR UPDATE before their join
// rows are read and cleared or deleted with them: a transaction attaching
// a row to one of them holds it through the join's foreign key check, so
// the lock waits for it, and none can start until this one commits (see
// LockParentsForClear).
func (d RowLocks) LockAcrossForUpdate(w Writer, c Count, keys []any) {
	q(w, "SELECT % FROM % WHERE %", c.Across.Key, c.Across.Table, c.Across.Key)
	d.keyIn(w, keys)
	q(w, " ORDER BY % FOR UPDATE", c.Across.Key)
}

// ForeignKeysPragma returns the query that says whether the connection
// enforces foreign keys (SQLite, where they are off unless the connection
// turns them on), or "" where they always are.
func (d Dialect) ForeignKeysPragma() string {
	if d.kind != sqlite {
		return ""
	}
	return "PRAGMA foreign_keys"
}

// CountTriggersNaming writes the query of the name and SQL of every count
// trigger on a table or naming it (SQLite), so that a migration that
// recreates the table can set them aside and put them back: SQLite drops
// the triggers on a table with it, and a rename of the table rebuilt in
// its place fails on a trigger of another table that names it (a count's
// triggers on the child name the parent). A trigger whose SQL merely
// contains the name is set aside too, and put back as it was.
func (d SQLite) CountTriggersNaming(w Writer, table string) {
	name := table
	if i := strings.LastIndexByte(table, '.'); i >= 0 {
		name = table[i+1:]
	}
	w.WriteString("SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND name LIKE 'hc\\_%' ESCAPE '\\' AND (tbl_name = ")
	w.Arg(name)
	w.WriteString(" OR instr(sql, ")
	w.Arg(name)
	w.WriteString(") > 0) ORDER BY name")
}

// LegacyAlterTable writes the query of the connection's
// legacy_alter_table setting (SQLite): 1 when ALTER TABLE ... RENAME leaves
// the triggers and views that name the table as they are written.
func (d SQLite) LegacyAlterTable(w Writer) { w.WriteString("PRAGMA legacy_alter_table") }

// SetLegacyAlterTable writes the statement that turns legacy_alter_table
// on or off for the connection (SQLite).
func (d SQLite) SetLegacyAlterTable(w Writer, on bool) { setPragma(w, "legacy_alter_table", on) }

// TriggerNamed writes the query of the trigger of that name (SQLite): a
// row when it exists.
func (d SQLite) TriggerNamed(w Writer, name string) {
	w.WriteString("SELECT name FROM sqlite_master WHERE type = 'trigger' AND name = ")
	literal(w, name)
}

// DropTrigger writes the DROP of a trigger (SQLite), if it exists.
func (d SQLite) DropTrigger(w Writer, name string) {
	q(w, "DROP TRIGGER IF EXISTS %", name)
}

// TableExists writes a query that returns a row if the table exists,
// schema-qualified or not (ORM migrators check the current schema only).
func (d Dialect) TableExists(w Writer, table string) {
	schema, name := "", table
	if i := strings.LastIndexByte(table, '.'); i >= 0 {
		schema, name = table[:i], table[i+1:]
	}
	switch d.kind {
	case postgres:
		w.WriteString("SELECT 1 WHERE to_regclass(")
		w.Arg(table)
		w.WriteString(") IS NOT NULL")
	case mysql:
		w.WriteString("SELECT 1 FROM information_schema.tables WHERE table_name = ")
		w.Arg(name)
		w.WriteString(" AND table_schema = ")
		mysqlSchema(w, schema, arg)
	default:
		if schema == "" {
			schema = "main"
		}
		q(w, "SELECT 1 FROM %.sqlite_master WHERE type = 'table' AND name = ", schema)
		w.Arg(name)
	}
}

// TablesAmong writes a query that returns the names, among names
// (unqualified, in the current schema or database), of the tables that
// exist.
func (d Dialect) TablesAmong(w Writer, names []string) {
	switch d.kind {
	case postgres:
		w.WriteString("SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() AND table_name IN (")
	case mysql:
		w.WriteString("SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name IN (")
	default:
		w.WriteString("SELECT name FROM sqlite_master WHERE type = 'table' AND name IN (")
	}
	for i, n := range names {
		if i > 0 {
			w.WriteString(", ")
		}
		w.Arg(n)
	}
	w.WriteString(")")
}

// LockParentsForClear writes the query that locks parents (keys sorted)
// FOR UPDATE before their children are detached in bulk: a transaction
// adding a child to one of them holds its row FOR KEY SHARE (PostgreSQL)
// or shared (InnoDB) through the foreign key check, so the lock waits for
// it, and none can start until the clear commits.
func (d RowLocks) LockParentsForClear(w Writer, c Count, keys []any) {
	q(w, "SELECT % FROM % WHERE %", c.ParentKey, c.Parent, c.ParentKey)
	d.keyIn(w, keys)
	q(w, " ORDER BY % FOR UPDATE", c.ParentKey)
}

// ExistingParents writes the query of the keys among keys whose parent
// row exists.
func (d Dialect) ExistingParents(w Writer, c Count, keys []any) {
	q(w, "SELECT % FROM % WHERE %", c.ParentKey, c.Parent, c.ParentKey)
	d.keyIn(w, keys)
}

// ChildColumnIn returns a condition on a child column: column IN (values).
func (d Dialect) ChildColumnIn(c Count, column string, values []any) func(Writer) {
	return func(w Writer) {
		q(w, "%.%", c.Child, column)
		d.keyIn(w, values)
	}
}

// AddCounts writes one upsert that adds amounts[i] to the session's slot of
// parent keys[i]; keys are sorted and distinct, so that slot rows are
// locked in key order. PostgreSQL and SQLite (MySQL and MariaDB:
// AddToOwnSlot).
func (d Upserts) AddCounts(w Writer, c Count, keys []any, amounts []int64) {
	insertSlotRows(w, c.Table, d.sessionSlot(c.SlotCount), keys, amounts)
	q(w, " ON CONFLICT (%, %) DO UPDATE SET % = %.% + excluded.%", c.Owner, SlotColumn, ValueColumn, c.Slots, ValueColumn, ValueColumn)
}

// RecountBatch writes the query of one recount batch: for up to limit
// parents matching cond after the key `after` (nil: from the start), in
// key order (limit 0: every one, in no order), the parent key (k) and how
// far its count is off (d): rows counted in
// the child table minus the counter's total (column, if withColumn, plus
// slots). It is one statement, so both sides are read from one snapshot;
// the caller adds the difference to a slot, and whatever commits between
// the read and that write is counted by its own trigger or hook, so
// writes can go on during a recount.
func (d Dialect) RecountBatch(w Writer, c Count, withColumn bool, after any, limit int, cond func(Writer)) {
	q(w, "SELECT %.% AS k, CAST((SELECT ", c.Parent, c.ParentKey)
	c.total(w, childAlias)
	if c.Via == nil {
		q(w, " FROM % AS % WHERE %.% = %.% AND ", c.Child, childAlias, childAlias, c.Ref, c.Parent, c.ParentKey)
	} else {
		q(w, " FROM % AS % WHERE %.% IN (SELECT hc_m.% FROM % AS hc_m WHERE hc_m.% = %.%) AND ",
			c.Child, childAlias, childAlias, c.Ref, c.Via.Key, c.Via.Table, c.Via.Ref, c.Parent, c.ParentKey)
	}
	c.where(w)
	q(w, ") - COALESCE((SELECT SUM(hc_s.%) FROM % AS hc_s WHERE hc_s.% = %.%), 0)", ValueColumn, c.Slots, c.Owner, c.Parent, c.ParentKey)
	if withColumn {
		q(w, " - %.%", c.Parent, c.Column)
	}
	q(w, " AS "+d.intType()+") AS d FROM % WHERE ", c.Parent)
	if after != nil {
		q(w, "%.% > ", c.Parent, c.ParentKey)
		w.Arg(after)
		w.WriteString(" AND ")
	}
	w.WriteString("(")
	cond(w)
	w.WriteString(")")
	if limit > 0 {
		q(w, " ORDER BY %.% LIMIT "+strconv.Itoa(limit), c.Parent, c.ParentKey)
	}
}

// CountExistingAll writes one statement that sets c's count right for
// every parent, as Recount does in batches: for each parent whose children
// add up to other than its slots (and, withColumn, its folded column), it
// adds the difference to slot 0. Run again, it finds no difference and
// writes nothing: a migration file can hold it.
func (d Dialect) CountExistingAll(w Writer, c Count, withColumn bool) {
	const r = "hc_r"
	q(w, "INSERT INTO % (%, %, %) SELECT %.k, 0, %.d FROM (", c.Slots, c.Owner, SlotColumn, ValueColumn, r, r)
	d.RecountBatch(w, c, withColumn, nil, 0, func(w Writer) { w.WriteString("1=1") })
	q(w, ") AS % WHERE %.d <> 0 ORDER BY %.k", r, r, r)
	if d.kind == mysql {
		q(w, " ON DUPLICATE KEY UPDATE % = %.% + VALUES(%)", ValueColumn, c.Slots, ValueColumn, ValueColumn)
		return
	}
	q(w, " ON CONFLICT (%, %) DO UPDATE SET % = %.% + excluded.%", c.Owner, SlotColumn, ValueColumn, c.Slots, ValueColumn, ValueColumn)
}

// JITOff writes a query that turns JIT compilation off for the rest of the
// transaction and returns the setting it had, for [Postgres.SetJIT] to put
// back (PostgreSQL).
func (d Postgres) JITOff(w Writer) {
	w.WriteString("SELECT current_setting('jit'), set_config('jit', 'off', true)")
}

// SetJIT writes a statement that sets jit for the rest of the transaction.
func (d Postgres) SetJIT(w Writer, value string) {
	w.WriteString("SELECT set_config('jit', ")
	w.Arg(value)
	w.WriteString(", true)")
}
