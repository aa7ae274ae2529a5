package countersql

import "strconv"

// A MySQL/MariaDB session's own slot rows. Writes that run inside a
// transaction (count triggers and hooks, increments in a caller's
// transaction, recount) go to slot rows no other session ever writes, so
// they never wait for another transaction's row lock and transactions
// that write parents in opposite orders cannot deadlock through them.
//
// A session claims a number with a named lock, GET_LOCK(name, 0), which
// never waits: the lowest number no live session holds. MySQL and MariaDB
// keep a named lock until the session ends (or RELEASE_LOCK), so the
// number is the session's for its life, and it is kept in the user
// variable @hc_slot. A claim is checked before each use (IS_USED_LOCK),
// so a session whose variable was reset, or whose lock was released,
// claims again. The named locks are the server's, shared by every
// database on it. The session's slot of a counter declared with N slots
// is N + its number: rows 0..N-1 stay the random slots of autocommit
// increments, whose statements hold their row for themselves alone.
//
// Slot rows of a parent grow with the sessions that wrote it (at most as
// many as were ever connected at once); loads add them all, and rollup
// folds them.

const (
	claimLock = "hotcounter.slot."
	// MaxClaims bounds the numbers a session tries: the SMALLINT slot
	// column holds N + MaxClaims for every N up to 1024. A session that
	// finds none free writes the slot its connection id falls on, as
	// before claims, and may wait.
	MaxClaims = 30000
)

// ClaimedSlot writes a query for the number this session has claimed (-1
// if it holds none) and innodb_rollback_on_timeout.
func (d MySQL) ClaimedSlot(w Writer) {
	w.WriteString("SELECT " + claimedNumber + ", @@innodb_rollback_on_timeout")
}

// claimedNumber is the number this session holds, or -1.
const claimedNumber = "IF(IS_USED_LOCK(CONCAT('" + claimLock + "', @hc_slot)) <=> CONNECTION_ID(), @hc_slot, -1)"

// TryClaim writes a query that claims number i for this session without
// waiting and returns i, or -1 if another session holds it.
func (d MySQL) TryClaim(w Writer, i int) {
	n := strconv.Itoa(i)
	w.WriteString("SELECT IF(GET_LOCK('" + claimLock + n + "', 0) = 1, @hc_slot := " + n + ", -1)")
}

// mysqlClaim writes the statements of a trigger body that claim a number
// for the session if it holds none (hc_i is the body's loop variable).
func (d Dialect) mysqlClaim(w Writer) {
	w.WriteString("IF NOT (IS_USED_LOCK(CONCAT('" + claimLock + "', @hc_slot)) <=> CONNECTION_ID()) THEN " +
		"SET @hc_slot = NULL, hc_i = 0; WHILE @hc_slot IS NULL AND hc_i < " + strconv.Itoa(MaxClaims) + " DO " +
		"IF GET_LOCK(CONCAT('" + claimLock + "', hc_i), 0) = 1 THEN SET @hc_slot = hc_i; END IF; " +
		"SET hc_i = hc_i + 1; END WHILE; END IF; ")
}

// mysqlOwnSlot is the slot expression of a trigger: the session's own
// slot of a counter of `slots` slots, or where it claimed none, the slot
// its connection id falls on.
func mysqlOwnSlot(slots int) string {
	n := strconv.Itoa(slots)
	return "IFNULL(" + n + " + @hc_slot, MOD(CONNECTION_ID(), " + n + "))"
}

// OwnSlot is the slot of a counter of `slots` slots that the session
// holding number claimed writes.
func OwnSlot(slots, claimed int) int { return slots + claimed }

// AddToOwnSlot writes one upsert that adds amounts[i] to slot `slot` of
// parent keys[i] (a session's own slot, in a table whose primary key is
// (owner, slot)): a duplicate primary key is locked as a record only, and
// a new row takes no lock that another session's write waits for.
func (d MySQL) AddToOwnSlot(w Writer, t Table, slot int, keys []any, amounts []int64) {
	insertSlotRows(w, t, strconv.Itoa(slot), keys, amounts)
	q(w, " ON DUPLICATE KEY UPDATE % = % + VALUES(%)", ValueColumn, ValueColumn, ValueColumn)
}

// OwnSlotRows writes the first query of a session's write to its own slot
// rows, read without locks: for each of the given parents whose row at
// slot slots + @hc_slot exists, the number the session holds (as
// ClaimedSlot: the rows are the session's only if it is @hc_slot),
// innodb_rollback_on_timeout, the owner, and the row's surrogate key
// (t.RowID) or, where (owner, slot) is the primary key, its slot. The
// user variable is a constant of the statement: the rows are found by
// primary key (or unique index) lookups.
//
// With lock set it reads the rows as they are now, locking them (FOR
// UPDATE): after an UPDATE that missed rows the snapshot still showed
// (deleted since by a Set of the counter), to tell which are gone.
func (d MySQL) OwnSlotRows(w Writer, t Table, slots int, keys []any, lock bool) {
	id := t.RowID
	if id == "" {
		id = SlotColumn
	}
	q(w, "SELECT "+claimedNumber+", @@innodb_rollback_on_timeout, %, % FROM % WHERE % = "+strconv.Itoa(slots)+" + @hc_slot AND %",
		t.Owner, id, t.Slots, SlotColumn, t.Owner)
	d.keyIn(w, keys)
	if lock {
		w.WriteString(" FOR UPDATE")
	}
}

// AddBySlot writes one UPDATE that adds amounts[i] to slot `slot` of
// parent keys[i], rows that exist, matched on the primary key (owner,
// slot): record locks only.
func (d MySQL) AddBySlot(w Writer, t Table, slot int, keys []any, amounts []int64) {
	q(w, "UPDATE % SET % = % + CASE %", t.Slots, ValueColumn, ValueColumn, t.Owner)
	whenThen(w, keys, amounts)
	q(w, " ELSE 0 END WHERE % = "+strconv.Itoa(slot)+" AND %", SlotColumn, t.Owner)
	d.keyIn(w, keys)
}

// NoLockWait writes the statement that makes this session's lock waits
// fail at once, keeping the setting it had in @hc_lwt; RestoreLockWait
// puts it back. A session's first row of a parent is inserted between the
// two: the insert's foreign key check takes a shared lock on the parent,
// which a transaction that has updated the parent holds.
func (d MySQL) NoLockWait(w Writer) {
	w.WriteString("SET @hc_lwt = @@innodb_lock_wait_timeout, innodb_lock_wait_timeout = 0")
}

// RestoreLockWait writes the statement that undoes NoLockWait.
func (d MySQL) RestoreLockWait(w Writer) {
	w.WriteString("SET innodb_lock_wait_timeout = @hc_lwt")
}

// AddByRowID writes one UPDATE that adds amounts[i] to the slot row with
// surrogate key ids[i]: a primary key match locks those records only.
func (d MySQL) AddByRowID(w Writer, t Table, ids []any, amounts []int64) {
	q(w, "UPDATE % SET % = % + CASE %", t.Slots, ValueColumn, ValueColumn, t.RowID)
	whenThen(w, ids, amounts)
	q(w, " ELSE 0 END WHERE %", t.RowID)
	d.keyIn(w, ids)
}

// insertSlotRows writes INSERT INTO slots (owner, slot, n) VALUES with one
// row (keys[i], slot, amounts[i]) per key; slot is SQL (a number or an
// expression).
func insertSlotRows(w Writer, t Table, slot string, keys []any, amounts []int64) {
	q(w, "INSERT INTO % (%, %, %) VALUES ", t.Slots, t.Owner, SlotColumn, ValueColumn)
	for i, k := range keys {
		if i > 0 {
			w.WriteString(", ")
		}
		w.WriteString("(")
		w.Arg(k)
		w.WriteString(", " + slot + ", ")
		w.Arg(amounts[i])
		w.WriteString(")")
	}
}

// A PostgreSQL transaction's own slot rows. Writes that run inside a
// transaction (increments in a caller's transaction, count triggers and
// hooks, recount) go to the slot rows of a number the transaction holds,
// which no other transaction writes meanwhile: they never wait for another
// transaction's row lock, and transactions that write parents in opposite
// orders cannot deadlock through them.
//
// The number is the lowest one whose transaction-level advisory lock,
// pg_try_advisory_xact_lock(ownLockClass, n), the transaction gets; that
// call never waits. The transaction keeps it in the transaction-local
// setting hotcounter.slot (set_config(..., true)), so that its later
// statements find it without a claim. The lock and the setting end with
// the transaction (or with the savepoint that took them, rolled back), so
// nothing is left on the session: a pooler in transaction mode may hand
// the connection to anyone next. One lock per transaction, whatever it
// writes. The numbers tried are bounded by the connections the server
// allows: every one of them could hold one number at a time.
//
// The slot of a counter of N slots is N + the number: rows 0..N-1 stay
// the random slots of autocommit increments. Slot rows of a parent grow
// with the transactions that wrote it at once; loads add them all, and
// rollup folds them.

// ownLockClass is the first key of the advisory locks that hold the
// numbers: "hc" in its high bytes.
const ownLockClass = "1751318528"

// ownNumber is the number this transaction holds, claimed now if it holds
// none: NULL when every number is taken. The claim is an uncorrelated
// subquery, run once per statement and only when the setting is empty.
var ownNumber = "COALESCE(NULLIF(current_setting('hotcounter.slot', true), '')::integer, " +
	"(SELECT hc_own.n FROM generate_series(0, LEAST(current_setting('max_connections')::integer + " +
	"current_setting('max_prepared_transactions')::integer + current_setting('max_worker_processes')::integer, " +
	strconv.Itoa(MaxClaims) + ")) AS hc_own(n) WHERE pg_try_advisory_xact_lock(" + ownLockClass + ", hc_own.n) " +
	"AND set_config('hotcounter.slot', hc_own.n::text, true) IS NOT NULL LIMIT 1))"

// ownSlot writes the slot of a counter of `slots` slots that this
// transaction writes (PostgreSQL): slots + its number, or fallback (an
// integer expression) where it could claim none.
func (d Dialect) ownSlot(w Writer, slots int, fallback func(Writer)) {
	w.WriteString("CAST(COALESCE(" + strconv.Itoa(slots) + " + " + ownNumber + ", ")
	fallback(w)
	w.WriteString(") AS SMALLINT)")
}
