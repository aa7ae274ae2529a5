package countersql

import "strconv"

// Guarded counters (stock): every slot row holds a part of the stock and
// never goes below zero. A take subtracts from one row that holds enough
// (TakeFromFreeSlot, TakeFromSlot), or, when none does, from several after
// locking every row of the parent (LockAllSlots, TakeFrom) so that it
// refuses only when the total really is short.

// TakeFromFreeSlot writes the PostgreSQL take of amount from one slot row
// of owner that holds at least amount and that no other transaction holds,
// picked at random (FOR UPDATE SKIP LOCKED), returning its slot; no row
// when there is none:
//
//	UPDATE slots SET n = n - a WHERE owner = o AND slot = (SELECT slot FROM slots
//	  WHERE owner = o AND n >= a ORDER BY random() LIMIT 1 FOR UPDATE SKIP LOCKED)
//	  AND n >= a RETURNING slot
func (d Postgres) TakeFromFreeSlot(w Writer, t Table, owner any, amount int64) {
	q(w, "UPDATE % SET % = % - ", t.Slots, ValueColumn, ValueColumn)
	w.Arg(amount)
	q(w, " WHERE % = ", t.Owner)
	w.Arg(owner)
	q(w, " AND % = (SELECT % FROM % WHERE % = ", SlotColumn, SlotColumn, t.Slots, t.Owner)
	w.Arg(owner)
	q(w, " AND % >= ", ValueColumn)
	w.Arg(amount)
	q(w, " ORDER BY random() LIMIT 1 FOR UPDATE SKIP LOCKED) AND % >= ", ValueColumn)
	w.Arg(amount)
	q(w, " RETURNING %", SlotColumn)
}

// SlotsHolding writes a query for the slot and amount of owner's rows that
// hold any stock, read without locks: which rows a take tries one by one
// with TakeFromSlot, and whether they add up to the amount at all.
func (d Dialect) SlotsHolding(w Writer, t Table, owner any) {
	q(w, "SELECT %, % FROM % WHERE % = ", SlotColumn, ValueColumn, t.Slots, t.Owner)
	w.Arg(owner)
	q(w, " AND % > 0", ValueColumn)
}

// TakeFromSlot writes the take of amount from slot `slot` of owner if the
// row holds at least that much (an exact match: one row locked).
func (d Dialect) TakeFromSlot(w Writer, t Table, owner any, slot int, amount int64) {
	q(w, "UPDATE % SET % = % - ", t.Slots, ValueColumn, ValueColumn)
	w.Arg(amount)
	q(w, " WHERE % = ", t.Owner)
	w.Arg(owner)
	q(w, " AND % = "+strconv.Itoa(slot)+" AND % >= ", SlotColumn, ValueColumn)
	w.Arg(amount)
}

// LockAllSlots writes a query that locks every slot row of owner, in slot
// order, and returns (slot, n) as they are now (SQLite, with one writer at
// a time, locks nothing row by row).
func (d Dialect) LockAllSlots(w Writer, t Table, owner any) {
	q(w, "SELECT %, % FROM % WHERE % = ", SlotColumn, ValueColumn, t.Slots, t.Owner)
	w.Arg(owner)
	q(w, " ORDER BY %", SlotColumn)
	if d.kind != sqlite {
		w.WriteString(" FOR UPDATE")
	}
}

// SlotNumbers writes the plain (non-locking) read of owner's slot numbers,
// in order.
func (d MySQL) SlotNumbers(w Writer, t Table, owner any) {
	q(w, "SELECT % FROM % WHERE % = ", SlotColumn, t.Slots, t.Owner)
	w.Arg(owner)
	q(w, " ORDER BY %", SlotColumn)
}

// LockSlot writes the locking read of owner's slot row slot, as (slot, n),
// by its unique key: on MySQL/MariaDB a lookup of one row by a unique key
// always goes through that key's index, then the row, whatever the table's
// size, where LockAllSlots over a small table with a surrogate key (ent's)
// may scan the table and lock in the other order.
func (d MySQL) LockSlot(w Writer, t Table, owner any, slot any) {
	q(w, "SELECT %, % FROM % WHERE % = ", SlotColumn, ValueColumn, t.Slots, t.Owner)
	w.Arg(owner)
	q(w, " AND % = ", SlotColumn)
	w.Arg(slot)
	w.WriteString(" FOR UPDATE")
}

// ReshapeSlots writes one UPDATE that adds changes[i] (negative: taken) to
// slot slots[i] of owner: a take gathered from several rows, and what
// remains moved into fewer rows, on rows that LockAllSlots locked.
func (d Dialect) ReshapeSlots(w Writer, t Table, owner any, slots []any, changes []int64) {
	// A searched CASE (WHEN slot = ...): Citus 13 sends the simple form
	// (CASE slot WHEN ...) to its workers as a comparison of the slot with
	// a boolean.
	q(w, "UPDATE % SET % = % + CASE", t.Slots, ValueColumn, ValueColumn)
	for i, s := range slots {
		q(w, " WHEN % = ", SlotColumn)
		w.Arg(s)
		w.WriteString(" THEN ")
		w.Arg(changes[i])
	}
	q(w, " ELSE 0 END WHERE % = ", t.Owner)
	w.Arg(owner)
	q(w, " AND %", SlotColumn)
	d.keyIn(w, slots)
}

// SpreadOver writes one upsert that adds amounts[i] to slot i of owner:
// a restock of a guarded counter, spread over its slots so that takes
// find stock in every row.
func (d Dialect) SpreadOver(w Writer, t Table, owner any, amounts []int64) {
	keys := make([]any, len(amounts))
	slots := make([]int, len(amounts))
	for i := range amounts {
		keys[i], slots[i] = owner, i
	}
	d.AddToSlots(w, t, keys, slots, amounts)
}
