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
func (d Upserts) IncrementWhere(w Writer, t Table, slot int, delta int64, cond func(Writer)) {
	d.incrementWhere(w, t, func(w Writer) {
		// Typed casts: a bare parameter in a SELECT list is text to PostgreSQL.
		w.WriteString("CAST(")
		w.Arg(slot)
		w.WriteString(" AS " + d.slotType() + ")")
	}, delta, cond)
}

// IncrementOwnSlot writes IncrementWhere's upsert into the slot rows of
// this transaction's own number (PostgreSQL, see [Dialect.ownSlot]): slot
// slots + the number, which no other transaction writes while this one
// runs, so the upsert never waits for another transaction's row lock, and
// transactions that increment parents in any order cannot deadlock through
// counters. Where no number is free it writes slot fallback.
func (d Postgres) IncrementOwnSlot(w Writer, t Table, slots, fallback int, delta int64, cond func(Writer)) {
	d.incrementWhere(w, t, func(w Writer) {
		d.ownSlot(w, slots, func(w Writer) {
			w.WriteString("CAST(")
			w.Arg(fallback)
			w.WriteString(" AS INTEGER)")
		})
	}, delta, cond)
}

func (d Upserts) incrementWhere(w Writer, t Table, slot func(Writer), delta int64, cond func(Writer)) {
	q(w, "INSERT INTO % (%, %, %) SELECT %.%, ", t.Slots, t.Owner, SlotColumn, ValueColumn, t.Parent, t.ParentKey)
	slot(w)
	w.WriteString(", CAST(")
	w.Arg(delta)
	q(w, " AS "+d.intType()+") FROM % WHERE ", t.Parent)
	cond(w)
	q(w, " ORDER BY %.% ON CONFLICT (%, %) DO UPDATE SET % = %.% + excluded.%",
		t.Parent, t.ParentKey, t.Owner, SlotColumn, ValueColumn, t.Slots, ValueColumn, ValueColumn)
}

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
func (d Postgres) IncrementReturningTotals(w Writer, t Table, slot int, delta int64, cond func(Writer), read Sources) {
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

// IncrementFreeSlot writes an UPDATE that adds delta to one slot row of the
// parent matching cond that no other transaction holds: the first free one
// from slot `start` on, wrapping around (start is random, so writers spread
// over the slots as with IncrementWhere), or, with a negative start, the
// lowest free one (in index order: no sort of the parent's rows). It
// returns the owner key of the row it updated, or no row when every slot
// row of the parent is held or it has none yet; the caller then writes
// the transaction's own row (IncrementOwnSlot).
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
// exactly once, before the update. The statement costs a row lock written
// before the update. SKIP LOCKED passes over rows other transactions hold,
// with one exception inside PostgreSQL: when the row's last updater
// commits between the scan and the lock, the lock follows the row's update
// chain, and waits for a transaction that holds the newer version
// (heap_lock_updated_tuple, "while locking updated version"). Writes that
// must never wait use the transaction's own row instead.
func (d Postgres) IncrementFreeSlot(w Writer, t Table, start int, delta int64, cond func(Writer)) {
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

// KeyIn returns a condition for IncrementWhere and PrecreateSlots that
// matches the parents with the given keys.
func (d Dialect) KeyIn(t Table, keys []any) func(Writer) {
	return func(w Writer) {
		q(w, "%.%", t.Parent, t.ParentKey)
		d.keyIn(w, keys)
	}
}
