package countersql

import "strconv"

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
func (d Upserts) AppendWhere(w Writer, t Table, delta int64, cond func(Writer)) {
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
func (d MySQL) DeltaOwners(w Writer, t Table, after, upTo int64) {
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
func (d MySQL) LockDeltas(w Writer, t Table, after, upTo int64, owners []any) {
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
func (d MySQL) DeleteDeltas(w Writer, t Table, ids []any) {
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
func (d Upserts) FoldDeltas(t Table, after, upTo int64) []func(Writer) {
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
