package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/hotcounter/hotcounter/internal/countersql"
	"github.com/hotcounter/hotcounter/internal/spec"
)

// WithCitus returns d as the database behind c takes it: on PostgreSQL
// with the Citus extension, d.OnCitus(); else d.
func WithCitus(ctx context.Context, c Conn, d countersql.Dialect) (countersql.Dialect, error) {
	pg, ok := d.OnPostgres()
	if !ok {
		return d, nil
	}
	n, err := QueryInt(ctx, c, pg.CitusInstalled)
	if err != nil {
		return d, fmt.Errorf("look for the Citus extension: %w", err)
	}
	if n > 0 {
		return d.OnCitus(), nil
	}
	return d, nil
}

// Colocate distributes the side tables of counters beside their parents
// where Citus distributes the parent and not yet the side table
// (countersql.Postgres.DistributeBeside): what a migration does after it
// made the tables, every time, so that the migration after a parent was
// distributed distributes its counters' tables too. A counter of a kind
// Citus cannot keep yet (notOnCitus) on a distributed parent is an error
// wrapping ErrNotOnCitus. On any other database it does nothing.
func (st Store) Colocate(ctx context.Context, c Conn, counters []Counter) error {
	d := st.Dialect
	pg, ok := d.OnPostgres()
	if !ok {
		return nil
	}
	if !d.Citus() {
		var err error
		if d, err = WithCitus(ctx, c, d); err != nil || !d.Citus() {
			return err
		}
	}
	names := spec.TagNames
	if st.Pkg == "entcounter" {
		names = spec.EntNames
	}
	for _, cn := range counters {
		t := cn.Table
		if why := notOnCitus(cn, names); why != "" {
			distributed, err := QueryInt(ctx, c, func(w countersql.Writer) { pg.Distributed(w, t.Parent) })
			if err != nil {
				return fmt.Errorf("%s: %s: %w", st.Pkg, cn.Name, err)
			}
			if distributed > 0 {
				return fmt.Errorf("%s: %s: %w: %s", st.Pkg, cn.Name, ErrNotOnCitus, why)
			}
			continue
		}
		if t.RowID != "" {
			if err := keyBesideOwner(ctx, c, pg, t); err != nil {
				return fmt.Errorf("%s: %s: key %s by %s and %s, for Citus: %w", st.Pkg, cn.Name, t.Slots, t.Owner, t.RowID, err)
			}
		}
		if _, err := c.Exec(ctx, func(w countersql.Writer) { pg.DistributeBeside(w, t) }); err != nil {
			return fmt.Errorf("%s: %s: distribute %s beside %s (Citus): %w", st.Pkg, cn.Name, t.Slots, t.Parent, err)
		}
	}
	return nil
}

// ErrNotOnCitus is wrapped by the migration's error for a counter of a
// kind that Citus cannot keep yet where it distributes the tables
// (docs/scaling.md).
var ErrNotOnCitus = errors.New("Citus cannot keep this counter where it distributes the tables yet")

// notOnCitus says why Citus cannot keep the counter c on a distributed
// parent, or "" when it can (what was run on Citus 13.2 and failed
// there), naming options with n.
func notOnCitus(c Counter, n spec.Names) string {
	switch o := c.Options; {
	case o.Mode == spec.Append:
		return "an append counter's delta table is keyed by a column of its own, which Citus cannot distribute by the parent's key; remove " + n.Append + " (a rollup counter)"
	}
	return ""
}

// keyBesideOwner makes the primary key of t's slot table, keyed by a
// column of its own (ent's), its owner column and that key
// (countersql.Postgres.KeyBesideOwner), when Citus is to distribute it:
// its parent is distributed and it is not yet.
func keyBesideOwner(ctx context.Context, c Conn, pg countersql.Postgres, t countersql.Table) error {
	for _, q := range []struct {
		table string
		want  int64
	}{{t.Parent, 1}, {t.Slots, 0}} {
		n, err := QueryInt(ctx, c, func(w countersql.Writer) { pg.Distributed(w, q.table) })
		if err != nil || n != q.want {
			return err
		}
	}
	names, err := QueryKeys(ctx, c, func(w countersql.Writer) { pg.PrimaryKeyName(w, t.Slots) })
	if err != nil || len(names) == 0 {
		return err
	}
	name, _ := names[0].(string)
	_, err = c.Exec(ctx, func(w countersql.Writer) { pg.KeyBesideOwner(w, t, name) })
	return err
}
