package gormcounter

import (
	"fmt"
	"reflect"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/hotcounter/hotcounter"
)

// Recount recomputes a count of child rows (a counter declared with
// counts=) from the child table, for every parent that db targets (all of
// them without conditions), a batch of Config.RollupBatchSize parents at a
// time, and corrects the parents whose count was off. It returns how many
// it corrected.
//
//	n, err := gormcounter.Recount(db.Model(&Category{}), "ObjectCount")
//	n, err := gormcounter.Recount(db.Model(&Category{}).Where("id < ?", 100), "ObjectCount")
//
// Writes may go on meanwhile: each batch reads the child rows and the
// counter in one statement (one snapshot) and adds the difference to a
// slot, and a write that commits after that snapshot is counted by its own
// trigger or hook. Counts drift only where a write bypassed both (raw SQL
// under counts kept by hooks, triggers disabled, a TRUNCATE); Recount is the
// repair. Cancelling db's context stops it between batches.
func Recount(db *gorm.DB, field string) (int64, error) {
	p, err := pluginOf(db)
	if err != nil {
		return 0, err
	}
	stmt := db.Statement
	if stmt.Model == nil {
		return 0, fmt.Errorf("gormcounter: Recount(%q): name the model, as in Recount(db.Model(&Category{}), %q)", field, field)
	}
	m, err := p.modelOf(db, stmt.Model)
	if err != nil {
		return 0, err
	}
	c := m.lookup(field)
	if c == nil || c.count == nil {
		return 0, fmt.Errorf("gormcounter: Recount %T.%s: %w: it is not a count of child rows (tag it `gorm:\"counter:counts=<relation>\"`)",
			stmt.Model, field, hotcounter.ErrNotCounter)
	}
	cs, err := p.countSpec(db, c)
	if err != nil {
		return 0, err
	}
	var where clause.Where
	if cl, ok := stmt.Clauses["WHERE"]; ok {
		where, _ = cl.Expression.(clause.Where)
	}
	if rv := reflect.Indirect(reflect.ValueOf(stmt.Model)); rv.Kind() == reflect.Struct {
		if v, zero := m.key.ValueOf(stmt.Context, rv); !zero {
			where.Exprs = append(where.Exprs[:len(where.Exprs):len(where.Exprs)],
				clause.Eq{Column: clause.Column{Table: clause.CurrentTable, Name: m.key.DBName}, Value: v})
		}
	}
	return p.store().Recount(stmt.Context, gormSession{gormConn{db: db, table: c.table.Parent}}, c.engine(), cs, whereCond(where))
}
