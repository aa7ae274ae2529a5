package countersql

// Increments: one statement that adds a delta to a slot row of every
// parent a condition matches, the variant that also returns the new totals
// (PostgreSQL), and the skip-locked variant that takes a row no other
// transaction holds.

// IncrementWhere writes one statement that adds delta to slot `slot` of every
// parent row matching cond, creating slot rows as needed:
//
//	INSERT INTO slots (owner, slot, n) SELECT parent.key, slot, delta FROM parent
//	WHERE cond ORDER BY parent.key ON CONFLICT (owner, slot) DO UPDATE SET n = slots.n + excluded.n
//
// Selecting the parents takes no row lock on them (PostgreSQL, SQLite), so an
// increment never queues behind a transaction that holds the parent row. The
// ORDER BY makes every multi-parent increment lock slot rows in key order, so
// two of them cannot deadlock. cond writes a boolean SQL expression over the
// parent table (the ORM renders the caller's WHERE); it must write something,
// "1=1" at least, because SQLite needs a WHERE before ON CONFLICT.
func (d Dialect) IncrementWhere(w Writer, t Table, slot int, delta int64, cond func(Writer)) {
	// Typed casts: a bare parameter in a SELECT list is text to PostgreSQL.
	q(w, "INSERT INTO % (%, %, %) SELECT %.%, CAST(", t.Slots, t.Owner, SlotColumn, ValueColumn, t.Parent, t.ParentKey)
	w.Arg(slot)
	w.WriteString(" AS " + d.slotCast() + "), CAST(")
	w.Arg(delta)
	q(w, " AS "+d.intType()+") FROM % WHERE ", t.Parent)
	cond(w)
	if d.kind == mysql {
		q(w, " ORDER BY %.% ON DUPLICATE KEY UPDATE % = %.% + ", t.Parent, t.ParentKey, ValueColumn, t.Slots, ValueColumn)
		w.Arg(delta)
		return
	}
	q(w, " ORDER BY %.% ON CONFLICT (%, %) DO UPDATE SET % = %.% + excluded.%",
		t.Parent, t.ParentKey, t.Owner, SlotColumn, ValueColumn, t.Slots, ValueColumn, ValueColumn)
}

// ReturnsTotals reports whether [Dialect.IncrementReturningTotals] is
// available (PostgreSQL).
func (d Dialect) ReturnsTotals() bool { return d.kind == postgres }

// IncrementReturningTotals writes IncrementWhere's upsert wrapped so that
// it also returns, for every parent it incremented, the parent key as text
// and the counter's new total (PostgreSQL only):
//
//	WITH up AS (<the upsert> RETURNING owner)
//	SELECT CAST(up.owner AS TEXT), COALESCE((SELECT SUM(n) FROM slots
//	    WHERE owner = up.owner), 0) + delta FROM up
//
// The slots are all read as of the statement's start (the upsert's own
// change is not visible to the rest of the statement), so the total is the
// one a load at that moment would have read, plus delta. Mixing the
// upserted row's latest value with the other rows as of the start would
// not be: a compaction committing while the upsert waited for its row
// would make the total miss or repeat the values it moved. It saves the
// read that would otherwise follow. read names what adds up to the total:
// the slot table, a table a change of mode left, the parent column the
// counter was adopted over.
func (d Dialect) IncrementReturningTotals(w Writer, t Table, slot int, delta int64, cond func(Writer), read Sources) {
	const up, all, p = "hc_up", "hc_all", "hc_p"
	q(w, "WITH % AS (", up)
	d.IncrementWhere(w, t, slot, delta, cond)
	q(w, " RETURNING %.%) SELECT CAST(%.% AS TEXT), ", t.Slots, t.Owner, up, t.Owner)
	for _, tb := range read.Tables {
		q(w, "COALESCE((SELECT SUM(%.%) FROM % AS % WHERE %.% = %.%), 0) + ", all, ValueColumn, tb, all, all, t.Owner, up, t.Owner)
	}
	if read.Column {
		q(w, "COALESCE((SELECT %.% FROM % AS % WHERE %.% = %.%), 0) + ", p, t.Column, t.Parent, p, p, t.ParentKey, up, t.Owner)
	}
	w.Arg(delta)
	q(w, " FROM %", up)
}

// SkipLocked reports whether the database can choose a slot row that no
// other transaction holds (FOR UPDATE SKIP LOCKED): PostgreSQL, and MySQL 8
// and MariaDB 10.6+ (see [Dialect.PickFreeSlot]).
func (d Dialect) SkipLocked() bool { return d.kind == postgres || d.kind == mysql }

// IncrementFreeSlot writes an UPDATE that adds delta to one slot row of the
// parent matching cond that no other transaction holds: the first free one
// from slot `start` on, wrapping around (start is random, so writers spread
// over the slots as with IncrementWhere), or, with a negative start, the
// lowest free one (in index order: no sort of the parent's rows). It returns the owner key of the row
// it updated, or no row when every slot row of the parent is held or it has
// none yet; the caller then falls back to IncrementWhere.
//
//	WITH pick AS MATERIALIZED (SELECT parent.key AS o, free.slot AS s FROM parent
//	    CROSS JOIN LATERAL (SELECT slot FROM slots WHERE owner = parent.key AND slot >= 0
//	        ORDER BY MOD(slot + 1024 - start, 1024) FOR UPDATE SKIP LOCKED LIMIT 1) free
//	    WHERE cond)
//	UPDATE slots SET n = slots.n + delta FROM pick
//	WHERE slots.owner = pick.o AND slots.slot = pick.s RETURNING slots.owner
//
// cond must match one parent at most. With several, the slot rows of some
// would be locked here and those of others by the fallback, in no common
// order: two such increments could deadlock. MATERIALIZED makes the pick run
// exactly once, before the update. SKIP LOCKED never waits; the statement
// costs a row lock written before the update.
func (d Dialect) IncrementFreeSlot(w Writer, t Table, start int, delta int64, cond func(Writer)) {
	const pick, free, inner, o, s = "hc_pick", "hc_free", "hc_slots", "hc_o", "hc_s"
	q(w, "WITH % AS MATERIALIZED (SELECT %.% AS %, %.% AS % FROM % CROSS JOIN LATERAL (SELECT %.% FROM % AS % WHERE %.% = %.% AND %.% >= 0 ORDER BY ",
		pick, t.Parent, t.ParentKey, o, free, SlotColumn, s, t.Parent,
		inner, SlotColumn, t.Slots, inner, inner, t.Owner, t.Parent, t.ParentKey, inner, SlotColumn)
	if start < 0 {
		q(w, "%.%", inner, SlotColumn)
	} else {
		q(w, "MOD(%.% + 1024 - ", inner, SlotColumn)
		w.Arg(start)
		w.WriteString(", 1024)")
	}
	q(w, " FOR UPDATE SKIP LOCKED LIMIT 1) % WHERE ", free)
	cond(w)
	q(w, ") UPDATE % SET % = %.% + ", t.Slots, ValueColumn, t.Slots, ValueColumn)
	w.Arg(delta)
	q(w, " FROM % WHERE %.% = %.% AND %.% = %.% RETURNING %.%",
		pick, t.Slots, t.Owner, pick, o, t.Slots, SlotColumn, pick, s, t.Slots, t.Owner)
}

// ClaimNewSlot writes a query for a slot number of the one parent matching
// cond that no row has and that this transaction has claimed (see
// claimNewSlot: PostgreSQL), so that no other transaction inserts it
// meanwhile. It returns one row, the number (NULL when none of 32,767 is
// free), or no row when no parent matches. IncrementNewSlot inserts it.
func (d Dialect) ClaimNewSlot(w Writer, t Table, cond func(Writer)) {
	w.WriteString("SELECT (")
	d.claimNewSlot(w, t, func(w Writer) { q(w, "%.%", t.Parent, t.ParentKey) })
	q(w, ") FROM % WHERE ", t.Parent)
	cond(w)
}

// IncrementNewSlot writes an INSERT that adds delta, for the one parent
// matching cond, in a new slot row at slot, a number ClaimNewSlot claimed
// in an earlier statement of the transaction, so that it never waits for
// another transaction's row. Being a statement of its own, its snapshot
// sees a row that a transaction committed before the claim got its lock:
// then it inserts nothing (NOT EXISTS), where an insert would meet that
// row's newer version, written by a transaction still running, and wait
// for it. It returns the owner key of the row it inserted, or no row when
// there is no such parent or a row of that number exists (then the caller
// tries a free row again):
//
//	INSERT INTO slots (owner, slot, n) SELECT parent.key, slot, delta
//	FROM parent WHERE (cond) AND NOT EXISTS (SELECT 1 FROM slots WHERE owner = parent.key AND slot = <slot>)
//	ON CONFLICT (owner, slot) DO NOTHING RETURNING owner
//
// The new row's foreign key check takes FOR KEY SHARE on the parent: it
// waits for a transaction that deletes the parent or holds it FOR UPDATE.
func (d Dialect) IncrementNewSlot(w Writer, t Table, slot int, delta int64, cond func(Writer)) {
	const e = "hc_e"
	q(w, "INSERT INTO % (%, %, %) SELECT %.%, CAST(", t.Slots, t.Owner, SlotColumn, ValueColumn, t.Parent, t.ParentKey)
	w.Arg(slot)
	w.WriteString(" AS " + d.slotCast() + "), CAST(")
	w.Arg(delta)
	q(w, " AS "+d.intType()+") FROM % WHERE (", t.Parent)
	cond(w)
	q(w, ") AND NOT EXISTS (SELECT 1 FROM % AS % WHERE %.% = %.% AND %.% = ", t.Slots, e, e, t.Owner, t.Parent, t.ParentKey, e, SlotColumn)
	w.Arg(slot)
	q(w, ") ON CONFLICT (%, %) DO NOTHING RETURNING %.%", t.Owner, SlotColumn, t.Slots, t.Owner)
}

// KeyIn returns a condition for IncrementWhere and PrecreateSlots that
// matches the parents with the given keys.
func (d Dialect) KeyIn(t Table, keys []any) func(Writer) {
	return func(w Writer) {
		q(w, "%.%", t.Parent, t.ParentKey)
		d.keyIn(w, keys)
	}
}
