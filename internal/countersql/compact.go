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
func (d Upserts) CrowdedOwners(w Writer, t Table, after any, limit int) {
	if d.kind == postgres && !d.citus {
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

// A Compaction is how a dialect gathers the slot values of a batch of
// owners into one row each: either Queries, statements each of whose one
// row is (parents gathered, slot rows removed, the transaction's id for
// [Postgres.OldestHolder] or "", a setting's old value), or Gather and
// Remove, two statements run in that order whose row counts are the first
// two figures.
type Compaction struct {
	Queries        []func(Writer)
	Gather, Remove func(Writer)
}

// CompactSplit is how many transactions of a compaction pass share a
// stretch of owners: a pass lists CompactSplit batches of owners at a
// time and gives owners i, i+k, i+2k... to transaction i. On PostgreSQL
// 32. Moving a parent's values into one row writes a new version of that
// row, and on a full heap page the new version goes to another page and
// adds an entry to every index (no HOT update): that grew a freshly loaded
// table by half. Cut this way, each transaction rewrites few rows per page
// (a thirty-second of a page's rows where the rows kept sit together, as a
// load written slot by slot leaves them: within the tenth of a page that
// SlotFillFactor keeps free, less the line pointer each rewritten row
// leaves behind), and the rows the earlier ones removed or rewrote, once
// committed and older than every open transaction, are room on the page
// for the later ones. Elsewhere 1.
func (d Upserts) CompactSplit() int {
	if d.kind == postgres {
		return 32
	}
	return 1
}

// Compact returns how to move the slot values of each of the given owners
// into one of its slot rows, deleting the other rows. The caller runs it
// inside one transaction it owns. PostgreSQL and SQLite only (see
// engine.Compact).
//
// PostgreSQL does it in one statement that locks the slot rows holding a
// value with SKIP LOCKED, in key order, and moves what it locked into the
// lowest of them: it never waits, so it can neither stall increments nor
// deadlock; rows it skips stay as they are until the next pass. Its
// transaction commits without waiting for the disk
// (synchronous_commit = off): a compaction lost in a crash loses no count,
// it only leaves the rows as they were, and a later commit that builds on
// it flushes it too. SQLite has one writer at a time: the first statement
// takes the write lock, so nothing changes between the two. It moves the
// values into each owner's lowest slot row.
func (d Upserts) Compact(t Table, owners []any) Compaction {
	switch {
	case d.citus:
		// One statement per parent, which Citus runs on the parent's node.
		queries := make([]func(Writer), len(owners))
		for i, k := range owners {
			queries[i] = func(w Writer) { d.compactPostgres(w, t, []any{k}) }
		}
		return Compaction{Queries: queries}
	case d.kind == postgres:
		return Compaction{Queries: []func(Writer){func(w Writer) { d.compactPostgres(w, t, owners) }}}
	}
	// UPDATE slots SET n = (SELECT SUM(s.n) FROM slots s WHERE s.owner = slots.owner)
	//   WHERE owner IN (...) AND slot = (SELECT MIN(s.slot) FROM slots s WHERE s.owner = slots.owner)
	// then DELETE the rows above that lowest slot, which the first
	// statement leaves where it was.
	const s = "hc_s"
	lowest := func(w Writer) {
		q(w, "(SELECT MIN(%.%) FROM % AS % WHERE %.% = %.%)", s, SlotColumn, t.Slots, s, s, t.Owner, t.Slots, t.Owner)
	}
	return Compaction{
		Gather: func(w Writer) {
			q(w, "UPDATE % SET % = (SELECT SUM(%.%) FROM % AS % WHERE %.% = %.%) WHERE %",
				t.Slots, ValueColumn, s, ValueColumn, t.Slots, s, s, t.Owner, t.Slots, t.Owner, t.Owner)
			d.keyIn(w, owners)
			q(w, " AND % = ", SlotColumn)
			lowest(w)
		},
		Remove: func(w Writer) {
			q(w, "DELETE FROM % WHERE %", t.Slots, t.Owner)
			d.keyIn(w, owners)
			q(w, " AND % > ", SlotColumn)
			lowest(w)
		},
	}
}

func (d Dialect) compactPostgres(w Writer, t Table, owners []any) {
	const locked, kept, gone, set = "hc_locked", "hc_kept", "hc_gone", "hc_set"
	// WITH locked AS (SELECT owner, slot, n FROM slots WHERE owner IN (...) AND n <> 0 ORDER BY owner, slot FOR UPDATE SKIP LOCKED),
	q(w, "WITH % AS (SELECT %, %, % FROM % WHERE %", locked, t.Owner, SlotColumn, ValueColumn, t.Slots, t.Owner)
	d.keyIn(w, owners)
	q(w, " AND % <> 0 ORDER BY %, % FOR UPDATE SKIP LOCKED), "+
		// kept AS (SELECT owner, MIN(slot) AS slot, SUM(n) AS n FROM locked GROUP BY owner HAVING COUNT(*) > 1),
		"% AS (SELECT %, MIN(%) AS %, SUM(%) AS % FROM % GROUP BY % HAVING COUNT(*) > 1), ",
		ValueColumn, t.Owner, SlotColumn,
		kept, t.Owner, SlotColumn, SlotColumn, ValueColumn, ValueColumn, locked, t.Owner)
	// gone AS (DELETE FROM slots USING locked, kept
	//   WHERE slots.owner = locked.owner AND slots.slot = locked.slot AND kept.owner = locked.owner AND locked.slot <> kept.slot RETURNING 1),
	q(w, "% AS (DELETE FROM % USING %, % WHERE ", gone, t.Slots, locked, kept)
	q(w, "%.% = %.% AND %.% = %.% AND %.% = %.% AND %.% <> %.%",
		t.Slots, t.Owner, locked, t.Owner, t.Slots, SlotColumn, locked, SlotColumn,
		kept, t.Owner, locked, t.Owner, locked, SlotColumn, kept, SlotColumn)
	// (Citus routes a statement by the owner each table is read by.)
	ownersAgain := func() {
		if d.citus {
			q(w, " AND %.%", t.Slots, t.Owner)
			d.keyIn(w, owners)
		}
	}
	ownersAgain()
	// set AS (UPDATE slots SET n = kept.n FROM kept WHERE slots.owner = kept.owner AND slots.slot = kept.slot RETURNING 1)
	q(w, " RETURNING 1), % AS (UPDATE % SET % = %.% FROM % WHERE %.% = %.% AND %.% = %.%",
		set, t.Slots, ValueColumn, kept, ValueColumn, kept, t.Slots, t.Owner, kept, t.Owner, t.Slots, SlotColumn, kept, SlotColumn)
	ownersAgain()
	if d.citus {
		// The transaction's id on a worker node says nothing of the
		// coordinator's sessions, and its commit is Citus's to make.
		q(w, " RETURNING 1) SELECT (SELECT COUNT(*) FROM %), (SELECT COUNT(*) FROM %), '', ''", set, gone)
		return
	}
	// SELECT (SELECT COUNT(*) FROM set), (SELECT COUNT(*) FROM gone), pg_current_xact_id()::xid::text,
	//   set_config('synchronous_commit', 'off', true)  -- for the commit of this transaction alone
	q(w, " RETURNING 1) SELECT (SELECT COUNT(*) FROM %), (SELECT COUNT(*) FROM %), pg_current_xact_id()::xid::text, "+
		"set_config('synchronous_commit', 'off', true)", set, gone)
}

// OldestHolder writes a query for the session that keeps the rows a
// committed transaction removed from being reused (PostgreSQL): the
// oldest other session of the database, or a replication sender, whose
// snapshot or own transaction is older than that transaction (its id as a
// Compaction's Query returned it), as the server reckons the horizon of
// what it may prune. Its one row, if any, is the session's pid and for how
// many seconds its transaction has been open; none means the space is free
// to reuse. A session running VACUUM (not FULL) holds nothing back (the
// server leaves it out of the horizon) and is left out; an ANALYZE,
// autovacuum's included, holds its snapshot like any query and counts.
func (d Postgres) OldestHolder(w Writer, xid any) {
	w.WriteString("SELECT pid, COALESCE(EXTRACT(EPOCH FROM clock_timestamp() - xact_start), 0)::float8 FROM pg_stat_activity " +
		"WHERE (datname = current_database() OR datname IS NULL) AND pid <> pg_backend_pid() " +
		"AND pid NOT IN (SELECT pid FROM pg_stat_progress_vacuum) " +
		"AND GREATEST(age(backend_xmin), age(backend_xid)) >= age(")
	w.Arg(xid)
	w.WriteString("::xid) ORDER BY GREATEST(age(backend_xmin), age(backend_xid)) DESC LIMIT 1")
}

// TableSize writes a query for the bytes table and its indexes take on
// disk, their data files (the main forks) alone (PostgreSQL).
// On Citus, a distributed table's shards on every node, their indexes
// included (citus_total_relation_size).
func (d Postgres) TableSize(w Writer, table string) {
	local := "pg_relation_size(hc_t.oid) + COALESCE((SELECT SUM(pg_relation_size(i.indexrelid)) FROM pg_index AS i WHERE i.indrelid = hc_t.oid), 0)"
	if d.citus {
		w.WriteString("SELECT CASE WHEN EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = hc_t.oid) THEN citus_total_relation_size(hc_t.oid) ELSE " + local + " END FROM (SELECT ")
		w.Arg(table)
		w.WriteString("::regclass::oid AS oid) AS hc_t")
		return
	}
	w.WriteString("SELECT " + local + " FROM (SELECT ")
	w.Arg(table)
	w.WriteString("::regclass::oid AS oid) AS hc_t")
}
