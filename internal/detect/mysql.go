package detect

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/hotcounter/hotcounter/internal/countersql"
)

// innodbViewsIdle is the least time between samples on MySQL/MariaDB:
// InnoDB refreshes its information_schema lock views only after they have
// gone unread for 100 ms, so reading them more often shows one snapshot
// over and over.
const innodbViewsIdle = 150 * time.Millisecond

// innodbViews samples InnoDB's lock views: information_schema's on
// MariaDB, performance_schema.data_locks on MySQL 8 (mysql8). A wait names
// its record by the lock data of the index it waits on; a wait on the
// primary key names the row.
type innodbViews struct {
	db     *DB
	locks  countersql.RowLocks
	mysql8 bool
}

// begin: at least innodbViewsIdle between samples, and the DSN's database
// when o names no schema.
func (v innodbViews) begin(ctx context.Context, o Options) (time.Duration, string, []string, func(context.Context, *Report), error) {
	schema := o.Schema
	if schema == "" {
		if err := v.db.SQL.QueryRowContext(ctx, "SELECT COALESCE(DATABASE(), '')").Scan(&schema); err != nil {
			return 0, "", nil, nil, err
		}
	}
	return max(o.Every, innodbViewsIdle), schema, nil, func(context.Context, *Report) {}, nil
}

// sample: MariaDB names a waiter's table `schema`.`table`, split here.
func (v innodbViews) sample(ctx context.Context) ([]sampled, error) {
	query, args := v.db.build(func(w countersql.Writer) { v.locks.LockWaits(w, v.mysql8) })
	waits, err := scanWaits(ctx, v.db, query, args)
	for i, s := range waits {
		if s.schema == "" {
			waits[i].schema, waits[i].table = splitQuoted(s.table)
		}
	}
	return waits, err
}

func (innodbViews) tableWrites(context.Context, string, string) int64 { return -1 }

func (innodbViews) relationID(context.Context, string) string { return "" }

// privilege: the PROCESS privilege for InnoDB's views, and on MySQL 8
// SELECT on performance_schema.
func (v innodbViews) privilege(err error) error {
	msg := strings.ToLower(err.Error())
	switch {
	case strings.Contains(msg, "1227") || strings.Contains(msg, "process privilege"):
		return fmt.Errorf("%w: reading InnoDB's lock views needs the PROCESS privilege (GRANT PROCESS ON *.* TO <user>): %v", ErrPrivilege, err)
	case v.mysql8 && (strings.Contains(msg, "1142") || strings.Contains(msg, "performance_schema")):
		return fmt.Errorf("%w: reading performance_schema.data_locks needs SELECT on performance_schema and performance_schema = ON: %v", ErrPrivilege, err)
	}
	return privilege(err)
}

// splitQuoted splits MariaDB's `schema`.`table`.
func splitQuoted(s string) (string, string) {
	parts := strings.SplitN(s, "`.`", 2)
	if len(parts) != 2 {
		return "", strings.Trim(s, "`")
	}
	return strings.TrimPrefix(parts[0], "`"), strings.TrimSuffix(parts[1], "`")
}
