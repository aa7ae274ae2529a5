package countersql

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

// DropLedger writes the DDL that removes the ledger table, if it exists.
func (d Dialect) DropLedger(w Writer, ledger string) {
	q(w, "DROP TABLE IF EXISTS %", ledger)
}

// LedgerAdd writes the insert that records batch as applied at the given
// time (Unix milliseconds), unless the ledger holds it: it then affects no
// row. The primary key settles two attempts of one batch (a retry whose
// first COMMIT reply was lost, or two processes that took the same batch
// from a store): the second waits for the first's transaction and, when it
// committed, inserts nothing, so the caller applies nothing. On
// MySQL/MariaDB INSERT IGNORE, whose count of affected rows the client's
// clientFoundRows does not change (ON DUPLICATE KEY UPDATE's would); the
// ledger has no foreign key or column whose error it could hide.
func (d Dialect) LedgerAdd(w Writer, ledger, batch string, at int64) {
	if d.kind == mysql {
		w.WriteString("INSERT IGNORE")
	} else {
		w.WriteString("INSERT")
	}
	q(w, " INTO % (%, %) VALUES (", ledger, "batch", "at")
	w.Arg(batch)
	w.WriteString(", ")
	w.Arg(at)
	w.WriteString(")")
	if d.kind != mysql {
		w.WriteString(" ON CONFLICT DO NOTHING")
	}
}

// LedgerPrune writes the delete of batches recorded before the given time.
func (d Dialect) LedgerPrune(w Writer, ledger string, before int64) {
	q(w, "DELETE FROM % WHERE % < ", ledger, "at")
	w.Arg(before)
}
