package countersql

import "strconv"

// The rollup fold: a pass walks a slot table's owners in batches and moves
// their pending values into the parent column, removing the rows it folded,
// in one transaction per batch.

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
