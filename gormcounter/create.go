package gormcounter

import (
	"fmt"

	"gorm.io/gorm"

	"github.com/hotcounter/hotcounter/internal/countersql"
)

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
		for start := 0; start < len(keys); start += fillChunk {
			chunk := keys[start:min(start+fillChunk, len(keys))]
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
