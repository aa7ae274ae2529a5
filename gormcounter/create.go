package gormcounter

import (
	"fmt"
	"reflect"

	"gorm.io/gorm"

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

// precreate runs after gorm:create, inside its transaction: it inserts every
// slot row of the new parents for each counter that pre-creates its slots
// (tagged precreate), so that later increments only
// update existing rows and never run the foreign key check that would wait
// for a transaction holding the parent FOR UPDATE.
func (p *Plugin) precreate(db *gorm.DB) {
	stmt := db.Statement
	if db.Error != nil || db.DryRun || stmt.Schema == nil || !stmt.ReflectValue.IsValid() || !rowsAreModel(stmt) {
		return
	}
	m, err := p.model(db, stmt.Schema)
	if err != nil || m == nil {
		return
	}
	var keys []any
	for _, c := range m.counters {
		if !c.precreate {
			continue
		}
		if keys == nil {
			for _, r := range structsOf(stmt.ReflectValue) {
				if k, zero := m.key.ValueOf(stmt.Context, r); !zero {
					keys = append(keys, k)
				}
			}
			if len(keys) == 0 {
				return
			}
		}
		for start := 0; start < len(keys); start += engine.FillChunk {
			chunk := keys[start:min(start+engine.FillChunk, len(keys))]
			t := c.table
			err := execSQL(db, "", func(w countersql.Writer) {
				p.dialect.PrecreateSlots(w, t, c.opts.Slots, p.dialect.KeyIn(t, chunk))
			}).Error
			if err != nil {
				db.AddError(fmt.Errorf("gormcounter: create slot rows of %s: %w", c.name(), err))
				return
			}
		}
	}
}
