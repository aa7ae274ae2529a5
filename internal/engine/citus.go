package engine

import (
	"context"
	"fmt"

	"github.com/hotcounter/hotcounter/internal/countersql"
	"github.com/hotcounter/hotcounter/internal/spec"
)

// WithCitus returns d as the database behind c takes it: on PostgreSQL
// with the Citus extension, d.OnCitus(); else d.
func WithCitus(ctx context.Context, c Conn, d Dialect) (Dialect, error) {
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
// distributed distributes its counters' tables too. A table keyed by a
// column of its own (ent's slot tables, delta tables) is keyed by its
// owner and that column first (keyBesideOwner). On any other database it
// does nothing.
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
	for _, cn := range counters {
		t := cn.Table
		if cn.Options.Mode == spec.Append {
			// A delta table is keyed by a delta row's id.
			t.RowID = countersql.IDColumn
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
