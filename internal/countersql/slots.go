package countersql

import "strconv"

// A counter's slot table: one row per (owner, slot), keyed on both,
// cascading away with its parent; and the rows created ahead of
// increments (precreate).

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
	if d.citus {
		// Citus finds no path for a CTE in an INSERT ... SELECT it sends
		// to the parents' nodes: the numbers come from generate_series.
		q(w, "INSERT INTO % (%, %, %) SELECT %.%, %.%, 0 FROM % CROSS JOIN generate_series(0, "+strconv.Itoa(slots-1)+") AS %(%) WHERE ",
			t.Slots, t.Owner, SlotColumn, ValueColumn, t.Parent, t.ParentKey, s, i, t.Parent, s, i)
	} else {
		numbers()
		q(w, " INSERT INTO % (%, %, %) SELECT %.%, %.%, 0 FROM % CROSS JOIN % WHERE ",
			t.Slots, t.Owner, SlotColumn, ValueColumn, t.Parent, t.ParentKey, s, i, t.Parent, s)
	}
	cond(w)
	q(w, " ORDER BY %.%, %.% ON CONFLICT DO NOTHING", t.Parent, t.ParentKey, s, i)
}

// SlotFillFactor is the fillfactor of a slot table on PostgreSQL: every
// page keeps a tenth free. Increments and compaction rewrite slot rows in
// place; a row's new version fits on its own page only if the page has
// room (a HOT update, which adds no index entry), and a table loaded in
// bulk has none. Without the room, compacting such a table grew its heap
// and its indexes; with it, and compaction's transactions cut per page
// (see Upserts.CompactSplit), neither grows.
const SlotFillFactor = 90

// SlotStorage returns the statement that sets the storage of t's slot
// table once it is created (PostgreSQL's fillfactor, SlotFillFactor), or
// nil where there is none.
func (d Dialect) SlotStorage(t Table) func(Writer) {
	if d.kind != postgres {
		return nil
	}
	return func(w Writer) { q(w, "ALTER TABLE % SET (fillfactor = "+strconv.Itoa(SlotFillFactor)+")", t.Slots) }
}
