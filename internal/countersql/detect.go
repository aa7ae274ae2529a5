package countersql

import "strconv"

// Detection of hot rows (the hotcounter command): queries of the lock views
// that name the rows sessions wait on, and of the catalogs that describe
// the counter tables. They read views only and lock nothing.

// LockWaits writes the query of one sample of row lock waits, one row per
// waiting session and the row it waits for:
//
//	session, schema, table, index, key, page, tuple, wait (text telling this wait from others), waited (µs), statement
//
// PostgreSQL (14+): a session queued on a row waits on the row's tuple
// lock, or holds that tuple lock and waits on the holder's transaction id,
// or (most of the queue, once the row has changed hands) waits on the
// holder's transaction id alone; the tuple lock of the one that has it
// gives the place (page, tuple) of the row the whole queue waits for, and
// the same statement turns it into the row's key while that version is
// current (key is empty once it no longer is). A table without a primary
// key is named by place. index is empty; only the current database is
// read.
//
// MariaDB: information_schema.INNODB_LOCK_WAITS and INNODB_LOCKS, whose
// lock_data is the key of the record waited for (in the index named by
// index: PRIMARY for the primary key). MySQL 8 (mysql8 set):
// performance_schema.data_lock_waits and data_locks. lock_data is NULL now
// and then; page and tuple then place the record (MariaDB: space and page,
// and heap number), so that waiters on the same record name it. Both need
// the PROCESS privilege.
func (d RowLocks) LockWaits(w Writer, mysql8 bool) {
	switch {
	case d.kind == postgres:
		// The key is read in the same statement, a moment after the lock
		// table was copied, through query_to_xml (dynamic SQL in an
		// expression): a round trip later the row has usually moved on.
		//
		// pg_locks.waitstart is PostgreSQL 14's: read through to_jsonb, the
		// one statement runs on 13 too, where it is NULL and the wait is
		// counted from the start of the waiter's statement instead.
		w.WriteString(`WITH l AS MATERIALIZED (SELECT locktype, granted, pid, relation, page, tuple, transactionid::text AS xid,
  (to_jsonb(pg_locks) ->> 'waitstart')::timestamptz AS waitstart
  FROM pg_locks WHERE locktype IN ('tuple', 'transactionid')
  AND (database IS NULL OR database = (SELECT oid FROM pg_database WHERE datname = current_database()))),
w AS (SELECT pid, xid, waitstart FROM l WHERE NOT granted),
own AS (SELECT w.pid, t.relation, t.page, t.tuple FROM w JOIN l t ON t.pid = w.pid AND t.locktype = 'tuple'),
queue AS (SELECT DISTINCT ON (w.xid) w.xid, own.relation, own.page, own.tuple FROM w JOIN own ON own.pid = w.pid
  WHERE w.xid IS NOT NULL ORDER BY w.xid, own.pid),
waiter AS (SELECT w.pid, w.waitstart, COALESCE(own.relation, queue.relation) AS relation,
  COALESCE(own.page, queue.page) AS page, COALESCE(own.tuple, queue.tuple) AS tuple
  FROM w LEFT JOIN own ON own.pid = w.pid LEFT JOIN queue ON queue.xid = w.xid),
place AS (SELECT relation, page, tuple, n.nspname, c.relname,
  COALESCE((xpath('//k/text()', query_to_xml(format('SELECT concat_ws('', '', %s) AS k FROM ONLY %I.%I WHERE ctid = %L::tid',
    COALESCE((SELECT string_agg(quote_ident(a.attname) || '::text', ', ' ORDER BY array_position(i.indkey::int2[], a.attnum))
      FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey)
      WHERE i.indrelid = c.oid AND i.indisprimary), 'ctid::text'),
    n.nspname, c.relname, '(' || page || ',' || tuple || ')'), false, false, '')))[1]::text, '') AS k
  FROM (SELECT DISTINCT relation, page, tuple FROM waiter WHERE relation IS NOT NULL) p
  JOIN pg_class c ON c.oid = p.relation JOIN pg_namespace n ON n.oid = c.relnamespace)
SELECT waiter.pid::text, place.nspname::text, place.relname::text, '', place.k, waiter.page::int8, waiter.tuple::int8,
  COALESCE(COALESCE(waiter.waitstart, a.query_start)::text, ''),
  COALESCE((EXTRACT(EPOCH FROM clock_timestamp() - COALESCE(waiter.waitstart, a.query_start)) * 1000000)::int8, 0), COALESCE(a.query, '')
FROM waiter JOIN place USING (relation, page, tuple)
LEFT JOIN pg_stat_activity a ON a.pid = waiter.pid`)
	case mysql8:
		w.WriteString("SELECT CAST(th.PROCESSLIST_ID AS CHAR), l.OBJECT_SCHEMA, l.OBJECT_NAME, COALESCE(l.INDEX_NAME, ''), COALESCE(l.LOCK_DATA, ''), 0, 0, " +
			"COALESCE(CAST(x.trx_wait_started AS CHAR), ''), COALESCE(TIMESTAMPDIFF(MICROSECOND, x.trx_wait_started, NOW(6)), 0), COALESCE(x.trx_query, '') " +
			"FROM performance_schema.data_lock_waits wt " +
			"JOIN performance_schema.data_locks l ON l.ENGINE_LOCK_ID = wt.REQUESTING_ENGINE_LOCK_ID " +
			"JOIN information_schema.INNODB_TRX x ON x.trx_id = wt.REQUESTING_ENGINE_TRANSACTION_ID " +
			"JOIN performance_schema.threads th ON th.THREAD_ID = wt.REQUESTING_THREAD_ID " +
			"WHERE l.LOCK_TYPE = 'RECORD'")
	default:
		// lock_table reads `schema`.`table`; the caller splits it.
		// trx_wait_started counts whole seconds: the wait's length is the
		// statement's time so far (PROCESSLIST.TIME_MS), and the transaction
		// id tells one wait from the next.
		w.WriteString("SELECT DISTINCT CAST(r.trx_mysql_thread_id AS CHAR), '', l.lock_table, COALESCE(l.lock_index, ''), COALESCE(l.lock_data, ''), " +
			"l.lock_space * 4294967296 + l.lock_page, l.lock_rec, CAST(r.trx_id AS CHAR), COALESCE(CAST(p.TIME_MS * 1000 AS SIGNED), 0), COALESCE(r.trx_query, '') " +
			"FROM information_schema.INNODB_LOCK_WAITS wt " +
			"JOIN information_schema.INNODB_TRX r ON r.trx_id = wt.requesting_trx_id " +
			"JOIN information_schema.INNODB_LOCKS l ON l.lock_id = wt.requested_lock_id " +
			"LEFT JOIN information_schema.PROCESSLIST p ON p.ID = r.trx_mysql_thread_id " +
			"WHERE l.lock_type = 'RECORD'")
	}
}

// TableWrites writes the query of the rows written (inserted, updated,
// deleted) so far in one PostgreSQL table, from the statistics collector
// (up to a second behind), or of nothing elsewhere.
func (d Postgres) TableWrites(w Writer, schema, table string) {
	w.WriteString("SELECT n_tup_ins + n_tup_upd + n_tup_del FROM pg_stat_all_tables WHERE schemaname = ")
	w.Arg(schema)
	w.WriteString(" AND relname = ")
	w.Arg(table)
}

// CounterTables writes the query of the tables that look like hotcounter's
// in schema, or where schema is "", in the current database (MySQL) or
// every schema but the system ones (PostgreSQL), one row each: schema,
// table, and its columns joined by ",". A slot table has slot and n besides
// its owner column (and ent's id), a delta table id and n, a ledger batch
// and at.
func (d Dialect) CounterTables(w Writer, schema string) {
	switch d.kind {
	case postgres:
		w.WriteString("SELECT table_schema::text, table_name::text, string_agg(column_name::text, ',' ORDER BY ordinal_position) " +
			"FROM information_schema.columns WHERE table_schema NOT IN ('pg_catalog', 'information_schema')")
		if schema != "" {
			w.WriteString(" AND table_schema = ")
			w.Arg(schema)
		}
		w.WriteString(" GROUP BY table_schema, table_name ORDER BY 1, 2")
	case mysql:
		w.WriteString("SELECT table_schema, table_name, GROUP_CONCAT(column_name ORDER BY ordinal_position SEPARATOR ',') " +
			"FROM information_schema.columns WHERE table_schema = ")
		mysqlSchema(w, schema, arg)
		w.WriteString(" GROUP BY table_schema, table_name ORDER BY 1, 2")
	default:
		w.WriteString("SELECT 'main', m.name, (SELECT group_concat(p.name, ',') FROM pragma_table_info(m.name) p) " +
			"FROM sqlite_master m WHERE m.type = 'table' ORDER BY 2")
	}
}

// SlotTableStatus writes the query of one slot or delta table's figures:
// rows, parents, rows holding a value (n <> 0: what a rollup or append
// fold has yet to move), and the most rows any one parent has.
func (d Dialect) SlotTableStatus(w Writer, table, owner string) {
	q(w, "SELECT COUNT(*), COUNT(DISTINCT %), COALESCE(SUM(CASE WHEN % <> 0 THEN 1 ELSE 0 END), 0), "+
		"COALESCE((SELECT MAX(c) FROM (SELECT COUNT(*) AS c FROM % GROUP BY %) AS hc_w), 0) FROM %",
		owner, ValueColumn, table, owner, table)
}

// WidestParents writes the query of the limit parents with the most rows
// in a slot or delta table, widest first: owner (as text), rows, sum of n.
func (d Dialect) WidestParents(w Writer, table, owner string, limit int) {
	cast := "TEXT"
	if d.kind == mysql {
		cast = "CHAR"
	}
	q(w, "SELECT CAST(% AS "+cast+"), COUNT(*), COALESCE(SUM(%), 0) FROM % GROUP BY % ORDER BY 2 DESC, 1 LIMIT "+strconv.Itoa(limit),
		owner, ValueColumn, table, owner)
}

// LedgerStatus writes the query of a write-behind ledger's figures: batches
// recorded and the time of the newest (Unix milliseconds, 0 when empty).
func (d Dialect) LedgerStatus(w Writer, ledger string) {
	q(w, "SELECT COUNT(*), COALESCE(MAX(at), 0) FROM %", ledger)
}

// The PostgreSQL server log, read through SQL (a superuser, or a role with
// pg_read_server_files): where lock waits are logged (log_lock_waits).

// LogFile writes the query of the server's current log file (NULL without
// the logging collector) and its major version.
func (d Postgres) LogFile(w Writer) {
	w.WriteString("SELECT pg_current_logfile(), split_part(current_setting('server_version'), '.', 1)")
}

// LogSize writes the query of a server file's size (NULL when missing).
func (d Postgres) LogSize(w Writer, path string) {
	w.WriteString("SELECT (pg_stat_file(")
	w.Arg(path)
	w.WriteString(", true)).size")
}

// LogRead writes the query of n bytes of a server file from offset, as
// bytes: an offset may fall inside a multibyte character.
func (d Postgres) LogRead(w Writer, path string, offset, n int64) {
	w.WriteString("SELECT pg_read_binary_file(")
	w.Arg(path)
	w.WriteString(", ")
	w.Arg(offset)
	w.WriteString(", ")
	w.Arg(n)
	w.WriteString(")")
}

// RelationID writes the query of "database oid/relation oid" of a
// PostgreSQL table (schema.table), as the server log names it.
func (d Postgres) RelationID(w Writer, table string) {
	w.WriteString("SELECT (SELECT oid FROM pg_database WHERE datname = current_database())::text || '/' || to_regclass(")
	w.Arg(table)
	w.WriteString(")::oid::text")
}
