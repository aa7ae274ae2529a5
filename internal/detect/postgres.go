package detect

import (
	"context"
	"database/sql"
	"time"

	"github.com/hotcounter/hotcounter/internal/countersql"
)

// postgresViews samples PostgreSQL's pg_locks and pg_stat_activity. A
// waiter's key is read from the row version it waits on; a row that has
// moved since leaves its waiters unnamed, unless another waiter on the same
// version named it. It counts the table's writes and reads the server log's
// lock waits where the role may.
type postgresViews struct {
	db *DB
	pg countersql.Postgres
}

func (v postgresViews) begin(ctx context.Context, o Options) (time.Duration, string, []string, func(context.Context, *Report), error) {
	notes := postgresNotes(ctx, v.db)
	none := func(context.Context, *Report) {}
	l, err := FindServerLog(ctx, v.db.SQL, "auto")
	if err != nil {
		notes = append(notes, "the server log is not readable by this role (it needs pg_read_server_files): logged lock waits are not counted")
		return o.Every, o.Schema, notes, none, nil
	}
	from, err := l.Size(ctx)
	if err != nil {
		return o.Every, o.Schema, notes, none, nil
	}
	end := func(ctx context.Context, rep *Report) {
		text, err := l.ReadFrom(ctx, from)
		if err != nil {
			rep.Notes = append(rep.Notes, "logged lock waits not counted: "+err.Error())
			return
		}
		lw := ParseLockWaitLog(text, nil)
		rep.Logged = &lw
	}
	return o.Every, o.Schema, notes, end, nil
}

func (v postgresViews) sample(ctx context.Context) ([]sampled, error) {
	query, args := v.db.build(func(w countersql.Writer) { v.pg.LockWaits(w, false) })
	return scanWaits(ctx, v.db, query, args)
}

func (v postgresViews) tableWrites(ctx context.Context, schema, table string) int64 {
	query, args := v.db.build(func(w countersql.Writer) { v.pg.TableWrites(w, schema, table) })
	var n int64
	if err := v.db.SQL.QueryRowContext(ctx, query, args...).Scan(&n); err != nil {
		return -1
	}
	return n
}

// relationID: "database oid/relation oid", as the log names a relation.
func (v postgresViews) relationID(ctx context.Context, table string) string {
	query, args := v.db.build(func(w countersql.Writer) { v.pg.RelationID(w, table) })
	var id sql.NullString
	_ = v.db.SQL.QueryRowContext(ctx, query, args...).Scan(&id)
	return id.String
}

func (postgresViews) privilege(err error) error { return privilege(err) }

// postgresNotes says what the run cannot see on PostgreSQL.
func postgresNotes(ctx context.Context, db *DB) []string {
	var notes []string
	var allStats bool
	if err := db.SQL.QueryRowContext(ctx, "SELECT pg_has_role(current_user, 'pg_read_all_stats', 'MEMBER')").Scan(&allStats); err == nil && !allStats {
		notes = append(notes, "the statements of other roles' sessions are hidden from this role: GRANT pg_read_all_stats TO "+currentUser(ctx, db))
	}
	var statements bool
	if err := db.SQL.QueryRowContext(ctx, "SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'pg_stat_statements')").Scan(&statements); err == nil && !statements {
		notes = append(notes, "pg_stat_statements is not installed: with it (shared_preload_libraries = 'pg_stat_statements', then CREATE EXTENSION pg_stat_statements) the mean time of the hot UPDATE shows how long each write holds the row")
	}
	var lockWaits string
	if err := db.SQL.QueryRowContext(ctx, "SHOW log_lock_waits").Scan(&lockWaits); err == nil && lockWaits != "on" {
		notes = append(notes, "log_lock_waits is off: with it on (ALTER SYSTEM SET log_lock_waits = on; SELECT pg_reload_conf()) every wait longer than deadlock_timeout is logged with the row's place and the statement, a record that outlives this run")
	}
	return notes
}

func currentUser(ctx context.Context, db *DB) string {
	var u string
	_ = db.SQL.QueryRowContext(ctx, "SELECT current_user").Scan(&u)
	return u
}
