package countersql

import (
	"fmt"
	"strconv"
)

// Citus (a PostgreSQL extension that spreads a table's rows over worker
// nodes by one column) runs the PostgreSQL statements of this package, but
// for those that must take another form on its distributed tables. A
// counter's side tables (slot rows) are distributed by their owner column
// beside the parent (co-located: a parent's slot rows are on its node), so
// that every statement about one parent runs on one node.

// OnCitus returns d for a PostgreSQL database with the Citus extension
// (d itself on any other database).
func (d Dialect) OnCitus() Dialect {
	d.citus = d.kind == postgres
	return d
}

// WithoutCitus returns d as For returns it, for tables Citus leaves to
// PostgreSQL (local ones).
func (d Dialect) WithoutCitus() Dialect {
	d.citus = false
	return d
}

// Citus reports whether d is a PostgreSQL database with Citus (OnCitus).
func (d Dialect) Citus() bool { return d.citus }

// CitusInstalled writes a query of one integer: 1 when the database has
// the Citus extension, 0 when not.
func (d Postgres) CitusInstalled(w Writer) {
	w.WriteString("SELECT COUNT(*) FROM pg_extension WHERE extname = 'citus'")
}

// Distributed writes a query of one integer: 1 when Citus distributes the
// table by hash, else 0 (it needs Citus: CitusInstalled).
func (d Postgres) Distributed(w Writer, table string) {
	w.WriteString("SELECT COUNT(*) FROM pg_dist_partition WHERE logicalrelid = to_regclass(")
	w.Arg(d.Quote(table))
	w.WriteString(") AND partmethod = 'h'")
}

// PrimaryKeyName writes a query of the name of table's primary key
// constraint (PostgreSQL).
func (d Postgres) PrimaryKeyName(w Writer, table string) {
	w.WriteString("SELECT conname::text FROM pg_constraint WHERE conrelid = to_regclass(")
	w.Arg(d.Quote(table))
	w.WriteString(") AND contype = 'p'")
}

// KeyBesideOwner writes the statement that replaces the primary key of a
// slot table with a surrogate key (ent's: t.RowID), the constraint named
// pkey, by one of the owner column and that key: Citus distributes a table only by a
// column of each of its unique keys, and the owner column is the one a
// slot table is distributed by. The key stays unique, and (owner, slot)
// keeps its own unique index.
func (d Postgres) KeyBesideOwner(w Writer, t Table, pkey string) {
	q(w, "ALTER TABLE % DROP CONSTRAINT %, ADD PRIMARY KEY (%, %)", t.Slots, pkey, t.Owner, t.RowID)
}

// DistributeBeside writes the statement that distributes a counter's side
// table (t.Slots) by its owner column, co-located with its parent, when
// Citus distributes the parent by hash and not yet the side table: the
// parent's slot rows then live on the parent's node, its foreign key is
// between co-located tables, and a statement about one parent runs on one
// node. It changes nothing when the parent is not distributed (a local or
// reference table) or the side table is already. It needs Citus
// (CitusInstalled).
func (d Postgres) DistributeBeside(w Writer, t Table) {
	w.WriteString("SELECT create_distributed_table(hc_s.oid, ")
	w.Arg(t.Owner)
	w.WriteString(", colocate_with => ")
	w.Arg(d.Quote(t.Parent))
	w.WriteString(") FROM (SELECT to_regclass(")
	w.Arg(d.Quote(t.Slots))
	w.WriteString(") AS oid) AS hc_s WHERE EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = to_regclass(")
	w.Arg(d.Quote(t.Parent))
	w.WriteString(") AND partmethod = 'h') AND NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = hc_s.oid)")
}

// citusCountTriggers returns the statements that create c's triggers on
// Citus: row-level triggers, whose functions read the row (OLD, NEW), not
// the transition tables of PostgreSQL's statement-level ones, which Citus
// does not hand to a trigger's query on a worker node. A child distributed
// beside its parent (by the reference to it) fires them on the parent's
// node, where each counted row adds to the transaction's own slot row of
// its parent there (one upsert of one slot row). Each function keeps the
// search_path it was created under: on a worker the trigger runs in a
// session of Citus's own, which does not have the application's. A count
// through a join table counts the join's rows as a child's; counts through
// a middle table have none (CitusCountable).
func (d Dialect) citusCountTriggers(c Count) []func(Writer) {
	var steps []func(Writer)
	for _, op := range []struct{ name, event string }{{"ins", "INSERT"}, {"upd", "UPDATE"}, {"del", "DELETE"}} {
		op := op
		fn := schemaOf(c.Child) + c.triggerName(op.name)
		steps = append(steps,
			func(w Writer) {
				q(w, "CREATE OR REPLACE FUNCTION %() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $hc$ "+
					"DECLARE hc_slot smallint; BEGIN SELECT "+d.sessionSlot(c.SlotCount)+" INTO hc_slot; ", fn)
				if op.event == "UPDATE" {
					// An update that changes nothing the count reads writes
					// nothing.
					w.WriteString("IF ")
					d.counted(w, c, "OLD")
					w.WriteString(" = ")
					d.counted(w, c, "NEW")
					w.WriteString(" AND OLD.")
					w.Ident(c.Ref)
					w.WriteString(" IS NOT DISTINCT FROM NEW.")
					w.Ident(c.Ref)
					w.WriteString(" AND ")
					c.amount(w, "OLD", "")
					w.WriteString(" = ")
					c.amount(w, "NEW", "")
					w.WriteString(" THEN RETURN NULL; END IF; ")
				}
				if op.event != "INSERT" {
					d.citusApply(w, c, "OLD", "-")
				}
				if op.event != "DELETE" {
					d.citusApply(w, c, "NEW", "")
				}
				w.WriteString("RETURN NULL; END $hc$")
			},
			func(w Writer) {
				q(w, "CREATE TRIGGER % AFTER "+op.event+" ON % FOR EACH ROW EXECUTE FUNCTION %()", c.triggerName(op.name), c.Child, fn)
			})
	}
	return steps
}

// citusApply writes the statement of a Citus row trigger that adds what
// row (OLD or NEW) counts, negated if sign is "-", to the slot row hc_slot
// of its parent, when the row counts and the parent exists (a cascade from
// a deleted parent fires the trigger after the parent is gone): an
// INSERT ... SELECT from the parent's row, which Citus runs on the node of
// that parent.
func (d Dialect) citusApply(w Writer, c Count, row, sign string) {
	w.WriteString("IF ")
	d.counted(w, c, row)
	q(w, " THEN INSERT INTO % AS hc_s (%, %, %) SELECT hc_p.%, hc_slot, ", c.Slots, c.Owner, SlotColumn, ValueColumn, c.ParentKey)
	c.amount(w, row, sign)
	q(w, " FROM % AS hc_p WHERE hc_p.% = ", c.Parent, c.ParentKey)
	c.parentOf(w, row)
	q(w, " ON CONFLICT (%, %) DO UPDATE SET % = hc_s.% + excluded.%; END IF; ", c.Owner, SlotColumn, ValueColumn, ValueColumn, ValueColumn)
}

// CitusCountable returns an error when Citus cannot keep c by triggers:
// a count through a middle table (Via) reads the middle row from the
// child's trigger, and its middle table's own triggers move whole totals
// between parents, neither of which Citus runs on one node.
func (d Dialect) CitusCountable(c Count) error {
	if d.citus && c.Via != nil {
		return fmt.Errorf("a count through the middle table %s is not kept on Citus: count the children of each middle row, and add those up", c.Via.Table)
	}
	return nil
}

// citusFold writes the rollup fold of one parent on Citus (foldPostgres's
// steps, each naming the parent's key, so that Citus routes the whole
// statement to the parent's node): lock the parent, never waiting; lock
// its slot rows, skipping those another transaction holds; delete them;
// add what they held to the parent's column.
//
//	WITH hc_parents AS (SELECT key FROM parent WHERE key = k FOR NO KEY UPDATE SKIP LOCKED),
//	  hc_taken AS (DELETE FROM slots WHERE owner = k AND slot IN (SELECT slot FROM slots
//	      WHERE owner = k AND EXISTS (SELECT 1 FROM hc_parents) FOR UPDATE SKIP LOCKED) RETURNING n)
//	UPDATE parent SET col = COALESCE(col, 0) + hc_t.n FROM (SELECT SUM(n) AS n FROM hc_taken) AS hc_t
//	  WHERE key = k AND hc_t.n IS NOT NULL
func (d Upserts) citusFold(w Writer, t Table, k any) { d.citusFoldBy(w, t, k, SlotColumn) }

// CitusFoldDeltas returns the statements that fold the delta rows of an
// append counter's owners into the parent column on Citus, one per
// parent, as citusFold folds slot rows (the rows named by their id): what
// FoldDeltas does by ranges of ids, which Citus would run on every shard.
func (d Upserts) CitusFoldDeltas(t Table, owners []any) []func(Writer) {
	steps := make([]func(Writer), len(owners))
	for i, k := range owners {
		steps[i] = func(w Writer) { d.citusFoldBy(w, t, k, IDColumn) }
	}
	return steps
}

// citusFoldBy is citusFold of the rows of t.Slots named by the column row
// within their owner (slot, or a delta row's id).
func (d Upserts) citusFoldBy(w Writer, t Table, k any, row string) {
	q(w, "WITH hc_parents AS (SELECT % FROM % WHERE % = ", t.ParentKey, t.Parent, t.ParentKey)
	w.Arg(k)
	q(w, " FOR NO KEY UPDATE SKIP LOCKED), hc_taken AS (DELETE FROM % WHERE % = ", t.Slots, t.Owner)
	w.Arg(k)
	q(w, " AND % IN (SELECT % FROM % WHERE % = ", row, row, t.Slots, t.Owner)
	w.Arg(k)
	q(w, " AND EXISTS (SELECT 1 FROM hc_parents) FOR UPDATE SKIP LOCKED) RETURNING %) ", ValueColumn)
	q(w, "UPDATE % SET % = COALESCE(%.%, 0) + hc_t.% FROM (SELECT SUM(%) AS % FROM hc_taken) AS hc_t WHERE %.% = ",
		t.Parent, t.Column, t.Parent, t.Column, ValueColumn, ValueColumn, ValueColumn, t.Parent, t.ParentKey)
	w.Arg(k)
	q(w, " AND hc_t.% IS NOT NULL", ValueColumn)
}

// SessionSlot writes a query of one integer: the slot of a counter of
// slots slots that count triggers, hooks and recounts write in this
// transaction (sessionSlot), claimed now if the transaction holds none.
// On Citus, which takes no subquery (the claim) in an INSERT's VALUES,
// AddCountsAt then writes it as a value.
func (d Dialect) SessionSlot(w Writer, slots int) { w.WriteString("SELECT " + d.sessionSlot(slots)) }

// AddCountsAt is AddCounts at the slot SessionSlot returned.
func (d Upserts) AddCountsAt(w Writer, c Count, slot int64, keys []any, amounts []int64) {
	insertSlotRows(w, c.Table, strconv.FormatInt(slot, 10), keys, amounts)
	q(w, " ON CONFLICT (%, %) DO UPDATE SET % = %.% + excluded.%", c.Owner, SlotColumn, ValueColumn, c.Slots, ValueColumn, ValueColumn)
}

// CitusIncrementFreeSlot is IncrementFreeSlot of the parent key on Citus,
// which does not send the parent's LATERAL search to the parent's node: a
// slot row of that parent no other transaction holds, the first from slot
// start on (the lowest if start is negative), every table named by the
// key so that Citus routes the statement to the parent's node. It returns
// the owner of the row it wrote, none when every slot row is held (the
// caller then writes the transaction's own, as on PostgreSQL).
//
//	WITH hc_pick AS MATERIALIZED (SELECT slot FROM slots WHERE owner = k AND slot >= 0
//	    ORDER BY MOD(slot + 1024 - start, 1024) FOR UPDATE SKIP LOCKED LIMIT 1)
//	UPDATE slots SET n = slots.n + delta FROM hc_pick WHERE slots.owner = k AND slots.slot = hc_pick.slot RETURNING slots.owner
func (d Postgres) CitusIncrementFreeSlot(w Writer, t Table, start int, delta int64, key any) {
	q(w, "WITH hc_pick AS MATERIALIZED (SELECT % FROM % WHERE % = ", SlotColumn, t.Slots, t.Owner)
	w.Arg(key)
	q(w, " AND % >= 0 ORDER BY ", SlotColumn)
	if start < 0 {
		w.Ident(SlotColumn)
	} else {
		q(w, "MOD(% + 1024 - ", SlotColumn)
		w.Arg(start)
		w.WriteString(", 1024)")
	}
	q(w, " FOR UPDATE SKIP LOCKED LIMIT 1) UPDATE % SET % = %.% + ", t.Slots, ValueColumn, t.Slots, ValueColumn)
	w.Arg(delta)
	q(w, " FROM hc_pick WHERE %.% = ", t.Slots, t.Owner)
	w.Arg(key)
	q(w, " AND %.% = hc_pick.% RETURNING %.%", t.Slots, SlotColumn, SlotColumn, t.Slots, t.Owner)
}
