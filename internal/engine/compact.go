package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/hotcounter/hotcounter/internal/countersql"
)

// Compact runs one compaction pass over a sum counter: for every parent
// with more than one slot row holding a value, a batch of parents per
// transaction, it moves the values into one of those rows and deletes the
// others, or sets them to 0 when keep is set (pre-created slots). Totals
// never change, as any reader sees them. On PostgreSQL it locks with SKIP
// LOCKED and never waits: rows that others hold stay as they are until the
// next pass.
//
// MySQL and MariaDB are refused (ErrCompactMySQL): under their default
// REPEATABLE READ, a transaction that reads a counter, increments it and
// reads it again sees its own slot row as it is now and the others as of
// its snapshot, so values a pass moved in between would count twice or
// not at all.
//
// It returns how many parents the committed batches compacted.
func Compact(ctx context.Context, conn Conn, d countersql.Dialect, t countersql.Table, keep bool, batch int, stop func() bool,
	inTx func(ctx context.Context, fn func(Conn) error) error) (int64, error) {
	if d.MySQL() {
		return 0, ErrCompactMySQL
	}
	owners := func(after any) ([]any, error) {
		return QueryKeys(ctx, conn, func(w countersql.Writer) { d.CrowdedOwners(w, t, after, batch) })
	}
	return walk(ctx, batch, stop, inTx, owners, func(tx Conn, owners []any) error {
		for _, step := range d.Compact(t, owners, keep) {
			if _, err := tx.Exec(ctx, step); err != nil {
				return err
			}
		}
		return nil
	})
}

// ErrCompactMySQL is Compact's error on MySQL and MariaDB. It wraps
// errors.ErrUnsupported.
var ErrCompactMySQL = fmt.Errorf("%w on MySQL/MariaDB: under REPEATABLE READ a transaction that reads a counter, "+
	"increments it and reads it again would see the values a pass moved meanwhile twice or not at all", errors.ErrUnsupported)
