package engine

import (
	"context"
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
// distributed distributes its counters' tables too. An append counter's
// delta table, keyed by a column of its own, which Citus cannot distribute
// by the parent's, is left as it is. On any other database it does
// nothing.
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
			continue
		}
		_, err := c.Exec(ctx, func(w countersql.Writer) { pg.DistributeBeside(w, t) })
		switch {
		case err != nil && t.RowID != "":
			return fmt.Errorf("%s: %s: its slot table %s is keyed by a column of its own (%s), and Citus distributes a table only by a column of "+
				"each of its unique keys: a counter whose slot table has such a key (ent's) cannot live beside a distributed parent yet: %w",
				st.Pkg, cn.Name, t.Slots, t.RowID, err)
		case err != nil:
			return fmt.Errorf("%s: %s: distribute %s beside %s (Citus): %w", st.Pkg, cn.Name, t.Slots, t.Parent, err)
		}
	}
	return nil
}
