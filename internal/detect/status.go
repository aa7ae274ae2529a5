package detect

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/hotcounter/hotcounter/internal/countersql"
)

// Table is one counter table and its figures.
type Table struct {
	// Table is schema.table; Kind "slots" (a sum or rollup counter's slot
	// rows, or a count's), "deltas" (an append counter's rows) or "ledger"
	// (the write-behind buffer's record of applied batches).
	Table string `json:"table"`
	Kind  string `json:"kind"`
	// Owner is the column naming the parent row.
	Owner string `json:"owner,omitempty"`
	Rows  int64  `json:"rows"`
	// Parents is how many parents have rows; Nonzero how many rows hold a
	// value: in a rollup counter's slot table and in a delta table, what
	// the next fold moves into the parent column (pending).
	Parents int64 `json:"parents,omitempty"`
	Nonzero int64 `json:"nonzero,omitempty"`
	// MaxRows is the most rows one parent has; Widest the widest parents.
	MaxRows int64    `json:"max_rows_per_parent,omitempty"`
	Widest  []Parent `json:"widest,omitempty"`
	// NewestBatch is when the ledger recorded its last batch.
	NewestBatch *time.Time `json:"newest_batch,omitempty"`
	// Error is why the table's figures could not be read, such as a
	// parent whose total is beyond int64 (written by other code): the
	// other tables are read all the same.
	Error string `json:"error,omitempty"`
}

// Parent is one parent's rows in a counter table.
type Parent struct {
	Key  string `json:"key"`
	Rows int64  `json:"rows"`
	Sum  int64  `json:"sum"`
}

// Status finds the counter tables of schema by their columns, and reads
// their figures; a table whose figures cannot be read says why in its
// Error, and the others are read all the same. An empty schema is the DSN's database on MySQL/MariaDB and
// every schema on PostgreSQL.
func Status(ctx context.Context, db *DB, schema string, widest int) ([]Table, error) {
	query, args := db.build(func(w countersql.Writer) { db.d.CounterTables(w, schema) })
	rows, err := db.SQL.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, db.privilege(err)
	}
	var found []Table
	for rows.Next() {
		var schema, name, cols string
		if err := rows.Scan(&schema, &name, &cols); err != nil {
			rows.Close()
			return nil, err
		}
		if t, ok := classify(schema, name, strings.Split(cols, ",")); ok {
			found = append(found, t)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for i := range found {
		t := &found[i]
		if err := db.fillStatus(ctx, t, widest); err != nil {
			if ctx.Err() != nil {
				return nil, err // the caller gave up: no table would be read
			}
			t.Error = db.privilege(err).Error()
		}
	}
	return found, nil
}

// classify tells a counter table by its columns.
func classify(schema, name string, cols []string) (Table, bool) {
	t := Table{Table: name}
	if schema != "" && schema != "main" {
		t.Table = schema + "." + name
	}
	has := func(c string) bool { return slices.Contains(cols, c) }
	others := slices.DeleteFunc(slices.Clone(cols), func(c string) bool {
		return c == countersql.SlotColumn || c == countersql.ValueColumn || c == countersql.IDColumn
	})
	switch {
	case len(cols) == 2 && has("batch") && has("at"):
		t.Kind = "ledger"
	case has(countersql.SlotColumn) && has(countersql.ValueColumn) && len(others) == 1:
		t.Kind, t.Owner = "slots", others[0]
	case strings.HasSuffix(name, "_deltas") && has(countersql.IDColumn) && has(countersql.ValueColumn) && len(others) == 1 && len(cols) == 3:
		t.Kind, t.Owner = "deltas", others[0]
	default:
		return t, false
	}
	return t, true
}

func (db *DB) fillStatus(ctx context.Context, t *Table, widest int) error {
	if t.Kind == "ledger" {
		query, args := db.build(func(w countersql.Writer) { db.d.LedgerStatus(w, t.Table) })
		var ms int64
		if err := db.SQL.QueryRowContext(ctx, query, args...).Scan(&t.Rows, &ms); err != nil {
			return err
		}
		if ms > 0 {
			at := time.UnixMilli(ms).UTC()
			t.NewestBatch = &at
		}
		return nil
	}
	query, args := db.build(func(w countersql.Writer) { db.d.SlotTableStatus(w, t.Table, t.Owner) })
	if err := db.SQL.QueryRowContext(ctx, query, args...).Scan(&t.Rows, &t.Parents, &t.Nonzero, &t.MaxRows); err != nil {
		return err
	}
	if widest <= 0 || t.Rows == 0 {
		return nil
	}
	query, args = db.build(func(w countersql.Writer) { db.d.WidestParents(w, t.Table, t.Owner, widest) })
	rows, err := db.SQL.QueryContext(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var p Parent
		if err := rows.Scan(&p.Key, &p.Rows, &p.Sum); err != nil {
			return err
		}
		t.Widest = append(t.Widest, p)
	}
	return rows.Err()
}
