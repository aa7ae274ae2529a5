package gormcounter

import (
	"context"
	"fmt"
	"reflect"
	"strings"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/hotcounter/hotcounter"
	"github.com/hotcounter/hotcounter/internal/countersql"
	"github.com/hotcounter/hotcounter/internal/engine"
)

// refuseEmptyBatch fails a Create of several rows of a model that has no
// column GORM would write once its counters are left out (an ID and counters
// only). GORM then sends one INSERT ... DEFAULT VALUES, which creates one row
// and leaves the others without a key: rows the caller was told were created
// would not exist. One row at a time works, and so does a model with any
// other column.
func (p *Plugin) refuseEmptyBatch(db *gorm.DB) {
	stmt := db.Statement
	if db.Error != nil || stmt.Schema == nil || !stmt.ReflectValue.IsValid() || !rowsAreModel(stmt) {
		return
	}
	rv := reflect.Indirect(stmt.ReflectValue)
	if (rv.Kind() != reflect.Slice && rv.Kind() != reflect.Array) || rv.Len() < 2 {
		return
	}
	m, err := p.model(db, stmt.Schema)
	if err != nil || m == nil || len(m.counters) == 0 {
		return
	}
	for _, f := range stmt.Schema.Fields {
		if f.DBName != "" && f.Creatable && !(f.HasDefaultValue && f.DefaultValueInterface == nil) {
			return // GORM writes this column, one value per row
		}
	}
	db.AddError(fmt.Errorf("gormcounter: Create of %d %s rows at once: %s has no column to write besides its counters, "+
		"and GORM would insert one row (INSERT ... DEFAULT VALUES) for all of them; create them one at a time, or give the model a column",
		rv.Len(), stmt.Schema.Name, stmt.Schema.Name))
}

// A new row's counter values are its starting totals, as in ent: the
// sum counters' values go to their slots once the rows exist (a guarded
// counter's stock spread over its slots, as a restock is), a rollup or
// append counter's column takes its value with the row. checkStart runs
// before gorm:create, start after it, in its transaction.

// startPlanKey carries, from checkStart to start, what an upsert found:
// the keys of rows that existed, and the counters its DoUpdates assigned.
const startPlanKey = "gormcounter:start_plan"

type startPlan struct {
	existed  map[string]bool
	assigned map[*counter]bool
}

// checkStart refuses starting values that cannot be written: a count of
// child rows (it starts at 0 and follows its rows), a guarded counter
// below zero, and, in an upsert, a value whose row cannot be told new or
// existing. An upsert's rows that exist keep their counters (as Save
// keeps them), unless its DoUpdates assigns the counter from the row
// (clause.AssignmentColumns): then the row's value becomes the total.
func (p *Plugin) checkStart(db *gorm.DB) {
	stmt := db.Statement
	if db.Error != nil || stmt.Schema == nil || !stmt.ReflectValue.IsValid() || !rowsAreModel(stmt) {
		return
	}
	m, err := p.model(db, stmt.Schema)
	if err != nil || m == nil {
		return
	}
	rows := structsOf(stmt.ReflectValue)
	var valued []any // keys of the rows with a counter value (nil: unset)
	for _, c := range m.counters {
		for _, r := range rows {
			v := c.valueOf(stmt.Context, r)
			switch {
			case v == 0:
				continue
			case c.count != nil:
				db.AddError(fmt.Errorf("gormcounter: create %s with %d: %w: it counts %s rows, starts at 0 and changes only when they do",
					c.name(), v, hotcounter.ErrNotIncrement, c.count.rel.FieldSchema.Name))
				return
			case c.opts.Guarded && v < 0:
				db.AddError(fmt.Errorf("gormcounter: create %s with %d: %w: a new row's stock cannot start below zero", c.name(), v, hotcounter.ErrNegativeGuarded))
				return
			}
			k, _ := m.key.ValueOf(stmt.Context, r)
			valued = append(valued, k)
		}
	}
	cl, upsert := stmt.Clauses["ON CONFLICT"]
	if !upsert {
		return
	}
	oc, _ := cl.Expression.(clause.OnConflict)
	plan := startPlan{existed: map[string]bool{}, assigned: map[*counter]bool{}}
	kept := oc.DoUpdates[:0:0]
	for _, a := range oc.DoUpdates {
		c := m.lookup(a.Column.Name)
		if c == nil {
			kept = append(kept, a)
			continue
		}
		if col, ok := a.Value.(clause.Column); !ok || !strings.EqualFold(col.Table, "excluded") || !c.namedBy(col.Name) {
			db.AddError(fmt.Errorf("gormcounter: upsert of %s: %w: DoUpdates may assign it only the row's own value (clause.AssignmentColumns); "+
				"use gormcounter.Increment or Update after the upsert", c.name(), hotcounter.ErrNotIncrement))
			return
		}
		if c.count == nil {
			plan.assigned[c] = true
		}
	}
	if len(kept) != len(oc.DoUpdates) {
		// The counters are written by start; the rest as GORM writes it.
		oc.DoUpdates = kept
		oc.DoNothing = oc.DoNothing || (len(kept) == 0 && !oc.UpdateAll)
		cl.Expression = oc
		stmt.Clauses["ON CONFLICT"] = cl
	}
	if len(valued) == 0 && len(plan.assigned) == 0 {
		return
	}
	for _, k := range valued {
		if k == nil || reflect.ValueOf(k).IsZero() || !p.upsertByKey(stmt) {
			db.AddError(fmt.Errorf("gormcounter: upsert of %s rows with counter values: a row may exist, and only rows named by their "+
				"primary key (with the conflict on it alone) can be told new or existing; set the keys, or write the counters with an update",
				stmt.Schema.Name))
			return
		}
	}
	t := m.counters[0].table
	t.Parent = parentTable(stmt)
	conn := gormConn{db: db.Session(&gorm.Session{NewDB: true}), table: t.Parent}
	existed, err := engine.QueryKeys(stmt.Context, conn, func(w countersql.Writer) { p.dialect.SelectKeys(w, t, p.dialect.KeyIn(t, valued)) })
	if err != nil {
		db.AddError(fmt.Errorf("gormcounter: upsert of %s rows: %w", stmt.Schema.Name, err))
		return
	}
	for _, k := range existed {
		plan.existed[engine.KeyText(k)] = true
	}
	stmt.Settings.Store(startPlanKey, plan)
}

// start runs after gorm:create, inside its transaction: it writes the new
// rows' starting values, and the slot rows of counters that pre-create
// them (so that later increments only update existing rows and never run
// the foreign key check that would wait for a transaction holding the
// parent FOR UPDATE).
func (p *Plugin) start(db *gorm.DB) {
	stmt := db.Statement
	v, planned := stmt.Settings.LoadAndDelete(startPlanKey)
	if db.Error != nil || db.DryRun || stmt.Schema == nil || !stmt.ReflectValue.IsValid() || !rowsAreModel(stmt) {
		return
	}
	m, err := p.model(db, stmt.Schema)
	if err != nil || m == nil {
		return
	}
	plan, _ := v.(startPlan)
	ctx := stmt.Context
	rows := structsOf(stmt.ReflectValue)
	parent := parentTable(stmt)
	s := gormSession{gormConn{db: db.Session(&gorm.Session{NewDB: true}), table: parent}}
	for _, c := range m.counters {
		if c.count != nil {
			continue
		}
		var keys, set []any
		var values, totals []int64
		for _, r := range rows {
			k, zero := m.key.ValueOf(ctx, r)
			if zero {
				continue
			}
			if planned && plan.existed[engine.KeyText(k)] {
				if plan.assigned[c] {
					set, totals = append(set, k), append(totals, c.valueOf(ctx, r))
				}
				continue
			}
			keys, values = append(keys, k), append(values, c.valueOf(ctx, r))
		}
		t := c.table
		t.Parent = parent
		// A column took its value with the row: only pre-created rows, if any.
		starts := len(keys) > 0 && (c.precreate || (!c.opts.Mode.HasColumn() && !allZero(values)))
		if !starts && len(set) == 0 {
			continue
		}
		target, err := p.target(ctx, s.gormConn, c, t)
		if err == nil && starts {
			err = engine.Start(ctx, s, p.dialect, target, keys, values)
		}
		for i := 0; err == nil && i < len(set); i++ {
			_, err = engine.Set(ctx, s, p.dialect, target, set[i:i+1], totals[i])
		}
		if err != nil {
			db.AddError(fmt.Errorf("gormcounter: create %s rows: the starting values of %s: %w", stmt.Schema.Name, c.name(), err))
			return
		}
	}
}

// valueOf returns counter c's value in the struct row r.
func (c *counter) valueOf(ctx context.Context, r reflect.Value) int64 {
	v, _ := c.field.ValueOf(ctx, r)
	n, _ := toInt64(v)
	return n
}

func allZero(values []int64) bool {
	for _, v := range values {
		if v != 0 {
			return false
		}
	}
	return true
}
