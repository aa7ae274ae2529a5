package countersql

import "strconv"

// The rollup fold: a pass walks a slot table's owners in batches and moves
// their pending values into the parent column, removing the rows it folded,
// in one transaction per batch.

// PendingOwners writes a query for up to limit distinct owners that have slot
// rows, in key order, after the key `after` (nil starts at the beginning).
// The rollup pass walks the slot table with it in batches.
func (d Dialect) PendingOwners(w Writer, t Table, after any, limit int) {
	if d.kind == postgres && !d.citus {
		d.pendingOwnersPostgres(w, t, after, limit)
		return
	}
	// (Citus runs a recursive walk only on one shard: each worker lists
	// its owners, and the coordinator merges them.)
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

// pendingOwnersPostgres lists the owners of the walk (see pgOwnerWalk).
// A DISTINCT over the table, planned without statistics, hashed every row
// after `after` for each batch, and a pass took time quadratic in the
// table.
func (d Dialect) pendingOwnersPostgres(w Writer, t Table, after any, limit int) {
	pgOwnerWalk(w, t, after)
	q(w, " SELECT k FROM % WHERE k IS NOT NULL LIMIT "+strconv.Itoa(limit), "hc_o")
}

// pgOwnerWalk writes a recursive CTE, hc_o(k), that walks the slot table's
// (owner, slot) index from owner to next owner after `after`, one LIMIT 1
// lookup each (PostgreSQL): a plan that reads what it returns whatever the
// statistics say. The walk ends in one NULL row.
//
//	WITH RECURSIVE hc_o(k) AS ((SELECT owner FROM slots WHERE owner > after ORDER BY owner LIMIT 1)
//	    UNION ALL SELECT (SELECT owner FROM slots WHERE owner > hc_o.k ORDER BY owner LIMIT 1) FROM hc_o WHERE hc_o.k IS NOT NULL)
func pgOwnerWalk(w Writer, t Table, after any) {
	const o, s = "hc_o", "hc_s"
	q(w, "WITH RECURSIVE %(k) AS ((SELECT % FROM % WHERE ", o, t.Owner, t.Slots)
	if after != nil {
		q(w, "% > ", t.Owner)
		w.Arg(after)
	} else {
		w.WriteString("1=1")
	}
	q(w, " ORDER BY % LIMIT 1) UNION ALL SELECT (SELECT %.% FROM % AS % WHERE %.% > %.k ORDER BY %.% LIMIT 1) FROM % WHERE %.k IS NOT NULL)",
		t.Owner, s, t.Owner, t.Slots, s, s, t.Owner, o, s, t.Owner, o, o)
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
func (d Upserts) Fold(t Table, owners []any) []func(Writer) {
	switch {
	case d.citus:
		// One statement per parent, each of which Citus runs on the
		// parent's node (citusFold).
		steps := make([]func(Writer), len(owners))
		for i, k := range owners {
			steps[i] = func(w Writer) { d.citusFold(w, t, k) }
		}
		return steps
	case d.kind == postgres:
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
	// Its plan must not depend on the tables' statistics: joined by key, on
	// tables never analysed, the planner guessed the batch large and hashed
	// the whole slot table for it (200,000 rows for a batch of 500 parents),
	// so a pass took time quadratic in the table. So the slot rows of each
	// locked parent are read by a LATERAL lookup (its FOR UPDATE keeps it a
	// nested loop) and deleted by their ctid (a TID scan): a row whose locked
	// version is newer than the statement's snapshot is not deleted, and not
	// counted either (the totals sum what was deleted); the next pass folds
	// it. The parents are updated by key, also among the batch's keys (their
	// primary key makes that an index lookup): a parent updated meanwhile is
	// found in its new version.
	const parents, locked, taken, totals, tid = "hc_parents", "hc_locked", "hc_taken", "hc_totals", "hc_t"
	// WITH parents AS (SELECT key FROM parent WHERE key IN (...) ORDER BY key FOR NO KEY UPDATE SKIP LOCKED),
	q(w, "WITH % AS (SELECT % FROM % WHERE %", parents, t.ParentKey, t.Parent, t.ParentKey)
	d.keyIn(w, owners)
	q(w, " ORDER BY % FOR NO KEY UPDATE SKIP LOCKED), "+
		// locked AS (SELECT l.t FROM parents AS p CROSS JOIN LATERAL (SELECT ctid AS t FROM slots
		//     WHERE owner = p.key ORDER BY slot FOR UPDATE SKIP LOCKED) AS l),
		"% AS (SELECT hc_l.% FROM % AS hc_p CROSS JOIN LATERAL (SELECT ctid AS % FROM % WHERE % = hc_p.% ORDER BY % FOR UPDATE SKIP LOCKED) AS hc_l), "+
		// taken AS (DELETE FROM slots WHERE ctid = ANY(ARRAY(SELECT t FROM locked)) RETURNING owner, n),
		"% AS (DELETE FROM % WHERE ctid = ANY(ARRAY(SELECT % FROM %)) RETURNING %, %), "+
		// totals AS (SELECT owner, SUM(n) AS n FROM taken GROUP BY owner)
		"% AS (SELECT %, SUM(%) AS % FROM % GROUP BY %) "+
		// UPDATE parent SET col = parent.col + totals.n FROM totals WHERE parent.key IN (...) AND parent.key = totals.owner
		"UPDATE % SET % = COALESCE(%.%, 0) + %.% FROM % WHERE %.%",
		t.ParentKey,
		locked, tid, parents, tid, t.Slots, t.Owner, t.ParentKey, SlotColumn,
		taken, t.Slots, tid, locked, t.Owner, ValueColumn,
		totals, t.Owner, ValueColumn, ValueColumn, taken, t.Owner,
		t.Parent, t.Column, t.Parent, t.Column, totals, ValueColumn, totals, t.Parent, t.ParentKey)
	d.keyIn(w, owners)
	q(w, " AND %.% = %.%", t.Parent, t.ParentKey, totals, t.Owner)
}
