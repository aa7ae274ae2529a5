package entrt

import (
	"context"
	"strings"

	"entgo.io/ent/dialect"
	"entgo.io/ent/dialect/sql"

	"github.com/hotcounter/hotcounter/internal/countersql"
	"github.com/hotcounter/hotcounter/internal/spec"
)

// Every query shape reads a counter's exact value, as in gormcounter: a
// query that ent builds for a schema with sum counters (predicates, order,
// GroupBy, Aggregate, Select(...).Scan, Ints, Count) names their columns,
// which do not exist. The generated query builders send their statements
// through Rewriting's driver, which replaces each reference to such a
// column (and, under WithLive, to a rollup or append counter's column) by
// the SQL of its value: one correlated subquery per slot table per row.

// rewriting is a query builder's driver that rewrites the references to
// one schema's counters in the queries it sends.
type rewriting struct {
	dialect.Driver
	r   Runtime // with the driver underneath
	typ string
}

// Rewriting returns drv, the driver of a query of schema typ, wrapped so
// that its queries read the schema's counters' values. Generated code
// calls it on a query builder's own copy of the driver.
func Rewriting(drv dialect.Driver, r Runtime, typ string) dialect.Driver {
	if _, done := drv.(*rewriting); done {
		return drv
	}
	r.Driver = drv
	return &rewriting{Driver: drv, r: r, typ: typ}
}

// driver is the driver under a query builder's rewriting, which the
// library's own statements use as they are.
func (r Runtime) driver() dialect.Driver {
	if w, ok := r.Driver.(*rewriting); ok {
		return w.Driver
	}
	return r.Driver
}

// Query sends query with its references to the counters replaced.
func (w *rewriting) Query(ctx context.Context, query string, args, v any) error {
	q, err := w.r.rewriteRefs(ctx, w.typ, query)
	if err != nil {
		return err
	}
	return w.Driver.Query(ctx, q, args, v)
}

// ReadsCounter returns query, a read of schema typ's rows, with its
// references to counters that have no column (sum counters, counts)
// replaced by their values, and whether it had any.
func (r Runtime) ReadsCounter(ctx context.Context, typ, query string) (string, bool, error) {
	q, err := r.rewriteRefs(ctx, typ, query)
	return q, err == nil && q != query, err
}

// rewriteRefs returns query with the references to counters that have no
// up-to-date column replaced by their values: those of typ, bare or
// qualified by its table, and those of every other schema qualified by
// theirs (a traversal embeds another schema's query).
func (r Runtime) rewriteRefs(ctx context.Context, typ, query string) (string, error) {
	live := isLive(ctx)
	byTable := map[string][]Def{}
	var tables []string
	for _, d := range r.Defs {
		if (d.Mode() == spec.Sum || live) && strings.Contains(query, d.Field) {
			if _, seen := byTable[d.Table]; !seen {
				tables = append(tables, d.Table)
			}
			byTable[d.Table] = append(byTable[d.Table], d)
		}
	}
	if len(tables) == 0 {
		return query, nil
	}
	dl, err := r.Dialect(ctx)
	if err != nil {
		return "", err
	}
	c := Conn{r.driver(), r.driver().Dialect()}
	mysql := r.driver().Dialect() == dialect.MySQL
	for _, table := range tables {
		own := byTable[table][0].Type == typ
		var named []string
		for _, d := range byTable[table] {
			named = append(named, d.Field)
		}
		if !dl.Refers(query, table, named, !own) {
			continue // the name only appears elsewhere (an alias, another table's column)
		}
		values := map[string]string{}
		var cols []string
		for _, d := range byTable[table] {
			read, err := r.sources(ctx, c, dl, d)
			if err != nil {
				return "", err
			}
			t := d.Tables()
			values[d.Field] = render(mysql, func(w countersql.Writer) { dl.ValueOf(w, t, read, t.Parent) })
			cols = append(cols, d.Field)
		}
		if own {
			query = dl.RewriteRefs(query, table, cols, values)
		} else {
			query = dl.RewriteQualifiedRefs(query, table, cols, values)
		}
	}
	return query, nil
}

// render returns the SQL text of a statement that binds no argument.
func render(mysql bool, build func(countersql.Writer)) string {
	b := &sql.Builder{}
	build(writer{b: b, mysql: mysql})
	s, _ := b.Query()
	return s
}
