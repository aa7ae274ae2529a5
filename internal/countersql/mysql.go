package countersql

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
func (d MySQL) IncrementKeys(w Writer, t Table, keys []any, slot int, delta int64) {
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
func (d MySQL) InsertSlots(w Writer, t Table, keys []any, slot int, delta int64) {
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
func (d MySQL) PickFreeSlot(w Writer, t Table, owner any, from int, below bool) {
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
// a time and needs no lock (it has no RowLocks).
func (d RowLocks) LockParentsForSet(w Writer, t Table, keys []any) {
	q(w, "SELECT % FROM % WHERE %", t.ParentKey, t.Parent, t.ParentKey)
	d.keyIn(w, keys)
	if d.kind == mysql {
		q(w, " ORDER BY % FOR UPDATE", t.ParentKey)
		return
	}
	q(w, " ORDER BY % FOR NO KEY UPDATE", t.ParentKey)
}

// LockParents writes a query that locks the parents of owners that no other
// transaction holds (FOR UPDATE SKIP LOCKED, MySQL 8 / MariaDB 10.6) and
// returns their keys: the first step of a MySQL fold, so that it never waits.
func (d MySQL) LockParents(w Writer, t Table, owners []any) {
	q(w, "SELECT % FROM % FORCE INDEX (PRIMARY) WHERE %", t.ParentKey, t.Parent, t.ParentKey)
	d.keyIn(w, owners)
	q(w, " ORDER BY % FOR UPDATE SKIP LOCKED", t.ParentKey)
}

// LockSlots writes a query that locks the slot rows of one owner that no
// other transaction holds and returns them as (slot, n), read current. One
// owner at a time: with an equality on the key's prefix InnoDB reads (and
// locks) that owner's rows only, where an IN list over a small table may
// make it scan, and lock, them all.
func (d MySQL) LockSlots(w Writer, t Table, owner any) {
	q(w, "SELECT %, % FROM % WHERE % = ", SlotColumn, ValueColumn, t.Slots, t.Owner)
	w.Arg(owner)
	q(w, " AND % <> 0 ORDER BY % FOR UPDATE SKIP LOCKED", ValueColumn, SlotColumn)
}

// AddToColumns writes one UPDATE that adds amounts[i] to the column of the
// parent with key keys[i].
func (d MySQL) AddToColumns(w Writer, t Table, keys []any, amounts []int64) {
	// FORCE INDEX: InnoDB locks every row an UPDATE reads; a scan would lock
	// (and wait for) parents the fold does not touch.
	q(w, "UPDATE % FORCE INDEX (PRIMARY) SET % = COALESCE(%, 0) + CASE %", t.Parent, t.Column, t.Column, t.ParentKey)
	whenThen(w, keys, amounts)
	q(w, " ELSE 0 END WHERE %", t.ParentKey)
	d.keyIn(w, keys)
}

// ZeroSlot writes the UPDATE that empties one folded slot row (MySQL). The
// row stays: the next increment of that slot is then an exact-match UPDATE,
// where re-inserting it would take gap locks that wait for, or deadlock
// with, writers of its neighbours (above all where the unique key is a
// secondary index, ent's layout). One row a statement: an exact match on
// the unique key locks that row only.
func (d MySQL) ZeroSlot(w Writer, t Table, owner any, slot int64) {
	q(w, "UPDATE % SET % = 0 WHERE % = ", t.Slots, ValueColumn, SlotColumn)
	w.Arg(slot)
	q(w, " AND % = ", t.Owner)
	w.Arg(owner)
}

// whenThen writes the arms of a CASE on a key: WHEN keys[i] THEN amounts[i].
func whenThen(w Writer, keys []any, amounts []int64) {
	for i, k := range keys {
		w.WriteString(" WHEN ")
		w.Arg(k)
		w.WriteString(" THEN ")
		w.Arg(amounts[i])
	}
}
