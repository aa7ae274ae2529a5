package countersql

import "strconv"

// Compaction of sum counters. A sum counter's value lives only in its slot
// rows, and random slots spread a parent that was ever liked a few dozen
// times over all of them, hot or not: every load then groups every one of
// those rows. A compaction pass moves each parent's slot values into one of
// its rows, so a load reads one row per parent plus whatever arrived since.
// The total a reader sees never changes: the values move inside one
// transaction, and a load reads the slots in one statement.

// CrowdedOwners writes a query for up to limit owners, in key order after
// the key `after` (nil starts at the beginning), that have more than one
// slot row holding a value: the owners a compaction pass folds.
func (d Dialect) CrowdedOwners(w Writer, t Table, after any, limit int) {
	if d.kind == postgres {
		// The owners of the walk (see pgOwnerWalk) that have two rows
		// holding a value. The GROUP BY over the table, planned without
		// statistics, hashed every row after `after` for each batch.
		pgOwnerWalk(w, t, after)
		const o, s = "hc_o", "hc_s"
		q(w, " SELECT k FROM % WHERE k IS NOT NULL AND (SELECT COUNT(*) FROM (SELECT 1 FROM % AS % WHERE %.% = %.k AND %.% <> 0 LIMIT 2) AS hc_two) > 1 LIMIT "+strconv.Itoa(limit),
			o, t.Slots, s, s, t.Owner, o, s, ValueColumn)
		return
	}
	q(w, "SELECT % FROM % WHERE % <> 0", t.Owner, t.Slots, ValueColumn)
	if after != nil {
		q(w, " AND % > ", t.Owner)
		w.Arg(after)
	}
	q(w, " GROUP BY % HAVING COUNT(*) > 1 ORDER BY % LIMIT "+strconv.Itoa(limit), t.Owner, t.Owner)
}

// Compact returns the statements that move the slot values of each of the
// given owners into one of its slot rows, deleting the other rows (or
// setting them to 0 when keep is set: pre-created slots stay). The caller
// runs them in order inside one transaction it owns. PostgreSQL and SQLite
// only (see engine.Compact).
//
// PostgreSQL does it in one statement that locks the slot rows holding a
// value with SKIP LOCKED, in key order, and moves what it locked into the
// lowest of them: it never waits, so it can neither stall increments nor
// deadlock; rows it skips stay as they are until the next pass. SQLite has
// one writer at a time: the first statement takes the write lock, so
// nothing changes between the two. It moves the values into each owner's
// lowest slot row.
func (d Dialect) Compact(t Table, owners []any, keep bool) []func(Writer) {
	if d.kind == postgres {
		return []func(Writer){func(w Writer) { d.compactPostgres(w, t, owners, keep) }}
	}
	// UPDATE slots SET n = (SELECT SUM(s.n) FROM slots s WHERE s.owner = slots.owner)
	//   WHERE owner IN (...) AND slot = (SELECT MIN(s.slot) FROM slots s WHERE s.owner = slots.owner)
	// then DELETE (or zero) the rows above that lowest slot, which the first
	// statement leaves where it was.
	const s = "hc_s"
	lowest := func(w Writer) {
		q(w, "(SELECT MIN(%.%) FROM % AS % WHERE %.% = %.%)", s, SlotColumn, t.Slots, s, s, t.Owner, t.Slots, t.Owner)
	}
	return []func(Writer){
		func(w Writer) {
			q(w, "UPDATE % SET % = (SELECT SUM(%.%) FROM % AS % WHERE %.% = %.%) WHERE %",
				t.Slots, ValueColumn, s, ValueColumn, t.Slots, s, s, t.Owner, t.Slots, t.Owner, t.Owner)
			d.keyIn(w, owners)
			q(w, " AND % = ", SlotColumn)
			lowest(w)
		},
		func(w Writer) {
			if keep {
				q(w, "UPDATE % SET % = 0 WHERE % <> 0 AND %", t.Slots, ValueColumn, ValueColumn, t.Owner)
			} else {
				q(w, "DELETE FROM % WHERE %", t.Slots, t.Owner)
			}
			d.keyIn(w, owners)
			q(w, " AND % > ", SlotColumn)
			lowest(w)
		},
	}
}

func (d Dialect) compactPostgres(w Writer, t Table, owners []any, keep bool) {
	const locked, kept, gone = "hc_locked", "hc_kept", "hc_gone"
	// WITH locked AS (SELECT owner, slot, n FROM slots WHERE owner IN (...) AND n <> 0 ORDER BY owner, slot FOR UPDATE SKIP LOCKED),
	q(w, "WITH % AS (SELECT %, %, % FROM % WHERE %", locked, t.Owner, SlotColumn, ValueColumn, t.Slots, t.Owner)
	d.keyIn(w, owners)
	q(w, " AND % <> 0 ORDER BY %, % FOR UPDATE SKIP LOCKED), "+
		// kept AS (SELECT owner, MIN(slot) AS slot, SUM(n) AS n FROM locked GROUP BY owner HAVING COUNT(*) > 1),
		"% AS (SELECT %, MIN(%) AS %, SUM(%) AS % FROM % GROUP BY % HAVING COUNT(*) > 1), ",
		ValueColumn, t.Owner, SlotColumn,
		kept, t.Owner, SlotColumn, SlotColumn, ValueColumn, ValueColumn, locked, t.Owner)
	// gone AS (DELETE FROM slots USING locked, kept  -- or UPDATE slots SET n = 0 FROM locked, kept
	//   WHERE slots.owner = locked.owner AND slots.slot = locked.slot AND kept.owner = locked.owner AND locked.slot <> kept.slot)
	if keep {
		q(w, "% AS (UPDATE % SET % = 0 FROM %, % WHERE ", gone, t.Slots, ValueColumn, locked, kept)
	} else {
		q(w, "% AS (DELETE FROM % USING %, % WHERE ", gone, t.Slots, locked, kept)
	}
	q(w, "%.% = %.% AND %.% = %.% AND %.% = %.% AND %.% <> %.%) ",
		t.Slots, t.Owner, locked, t.Owner, t.Slots, SlotColumn, locked, SlotColumn,
		kept, t.Owner, locked, t.Owner, locked, SlotColumn, kept, SlotColumn)
	// UPDATE slots SET n = kept.n FROM kept WHERE slots.owner = kept.owner AND slots.slot = kept.slot
	q(w, "UPDATE % SET % = %.% FROM % WHERE %.% = %.% AND %.% = %.%",
		t.Slots, ValueColumn, kept, ValueColumn, kept, t.Slots, t.Owner, kept, t.Owner, t.Slots, SlotColumn, kept, SlotColumn)
}
