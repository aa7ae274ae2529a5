package gormcounter

import (
	"fmt"
	"reflect"
	"strings"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
	"gorm.io/gorm/schema"

	"github.com/hotcounter/hotcounter/internal/countersql"
	"github.com/hotcounter/hotcounter/internal/engine"
)

// Counts kept by hooks (counts=...,hooks): GORM callbacks read the child
// rows a write touches before and after it, and add the difference to the
// parents' slots, in the write's transaction.

// hookCounts returns the counts kept by hooks on the statement's table.
func (p *Plugin) hookCounts(db *gorm.DB) ([]countersql.Count, error) {
	stmt := db.Statement
	if stmt.Schema == nil || (stmt.Table != "" && stmt.Table != stmt.Schema.Table && !strings.HasSuffix(stmt.Schema.Table, "."+stmt.Table)) {
		return nil, nil // another table than the model's (db.Table)
	}
	var out []countersql.Count
	for _, c := range p.countsOn(stmt.Schema.Table) {
		if !c.opts.Hooks {
			continue
		}
		cs, err := p.countSpec(db, c)
		if err != nil {
			return nil, err
		}
		out = append(out, cs)
	}
	return out, nil
}

// countState is what a hooked write read before it: the rows, and the keys
// to read again after it.
type countState struct {
	before []engine.CountedRow
	keys   []any
}

// countBegin runs after gorm:begin_transaction: a hooked write needs its
// reads, its statement and its slot upserts in one transaction, and under
// SkipDefaultTransaction GORM opens none, so the hooks open one (committed
// or rolled back by countCommit).
func (p *Plugin) countBegin(db *gorm.DB) {
	if db.Error != nil || db.DryRun {
		return
	}
	if _, inTx := db.Statement.ConnPool.(gorm.TxCommitter); inTx {
		return
	}
	counts, err := p.hookCounts(db)
	if err != nil || len(counts) == 0 {
		return
	}
	tx := db.Session(&gorm.Session{NewDB: true}).Begin()
	if tx.Error != nil {
		db.AddError(tx.Error)
		return
	}
	db.InstanceSet(startedTx, db.Statement.ConnPool)
	db.Statement.ConnPool = tx.Statement.ConnPool
}

// countCommit commits or rolls back the transaction countBegin opened.
func (p *Plugin) countCommit(db *gorm.DB) {
	v, ok := db.InstanceGet(startedTx)
	if !ok {
		return
	}
	if db.Error != nil {
		db.Rollback()
	} else {
		db.Commit()
	}
	db.Statement.ConnPool = v.(gorm.ConnPool)                                 // the pool, or the connection of db.Connection
	db.Statement.Settings.Delete(fmt.Sprintf("%p", db.Statement) + startedTx) // as InstanceSet keys it
}

// countBeforeUpdate and countBeforeDelete run before a child's update or
// delete: they read and lock the rows the statement targets, with the
// parents they count for, and restrict the statement to those rows by key,
// so that a row inserted meanwhile is neither written nor miscounted.
func (p *Plugin) countBeforeUpdate(db *gorm.DB) {
	if _, countersOnly := db.Statement.Settings.Load(skipParentUpdate); countersOnly {
		return // an increment of the child's own counters: the row is not written
	}
	p.countBefore(db, true)
}

func (p *Plugin) countBeforeDelete(db *gorm.DB) { p.countBefore(db, false) }

func (p *Plugin) countBefore(db *gorm.DB, update bool) {
	stmt := db.Statement
	if db.Error != nil || db.DryRun {
		return
	}
	counts, err := p.hookCounts(db)
	if err != nil {
		db.AddError(err)
		return
	}
	if len(counts) == 0 || (update && !touchesCounts(stmt, counts)) {
		return
	}
	where, ok := targetConditions(db)
	if !ok && !db.AllowGlobalUpdate {
		return // GORM reports the missing WHERE
	}
	rows, err := engine.ReadCounted(stmt.Context, gormConn{db: db, table: stmt.Table, schema: stmt.Schema}, p.dialect, counts, whereCond(where), true)
	if err != nil {
		db.AddError(fmt.Errorf("gormcounter: read the %s rows whose counts a write changes: %w", stmt.Schema.Name, err))
		return
	}
	if len(rows) > MaxHookRows {
		db.AddError(fmt.Errorf("gormcounter: a write to %d %s rows at once: counts kept by hooks allow %d per statement; write in batches or keep the counts with triggers",
			len(rows), stmt.Schema.Name, MaxHookRows))
		return
	}
	keys := make([]any, len(rows))
	for i, r := range rows {
		keys[i] = r.Key
	}
	stmt.AddClause(clause.Where{Exprs: []clause.Expression{
		clause.IN{Column: clause.Column{Table: clause.CurrentTable, Name: counts[0].ChildKey}, Values: keys},
	}})
	stmt.Settings.Store(countsBefore, countState{before: rows, keys: keys})
}

// countBeforeCreate runs before a child's create. Rows created with their
// key set may exist already: an upsert (Clauses(clause.OnConflict{...}),
// Save of a slice, GORM saving loaded associations, Save falling back to a
// create) updates them, possibly moving them to another parent. Those rows
// are read and locked first, so that the count changes by what the write
// changed, not by one per row. An upsert of rows without keys is refused:
// the rows it would update are unknown.
func (p *Plugin) countBeforeCreate(db *gorm.DB) {
	stmt := db.Statement
	if db.Error != nil || db.DryRun {
		return
	}
	counts, err := p.hookCounts(db)
	if err != nil {
		db.AddError(err)
		return
	}
	if len(counts) == 0 {
		return
	}
	keys, missing, ok := createKeys(stmt)
	switch {
	case !ok && missing > 0:
		db.AddError(fmt.Errorf("gormcounter: a Create of %s rows from a map under counts kept by hooks: create %s structs, whose keys GORM fills in",
			stmt.Schema.Name, stmt.Schema.Name))
		return
	case !p.upsertByKey(stmt):
		db.AddError(fmt.Errorf("gormcounter: an upsert (ON CONFLICT) of %s rows that may match another unique key than the primary key: counts kept by hooks cannot tell which rows it updates; keep the counts with triggers",
			stmt.Schema.Name))
		return
	case len(keys)+missing > MaxHookRows:
		db.AddError(fmt.Errorf("gormcounter: a create of %d %s rows at once: counts kept by hooks allow %d per statement; use CreateInBatches",
			len(keys)+missing, stmt.Schema.Name, MaxHookRows))
		return
	case len(keys) == 0:
		return
	}
	rows, err := engine.ReadCounted(stmt.Context, gormConn{db: db, table: stmt.Table, schema: stmt.Schema}, p.dialect, counts, p.dialect.ChildKeyIn(counts[0], keys), true)
	if err != nil {
		db.AddError(fmt.Errorf("gormcounter: read the %s rows an upsert may change: %w", stmt.Schema.Name, err))
		return
	}
	stmt.Settings.Store(countsBefore, countState{before: rows, keys: keys})
}

// countAfterCreate and countAfterWrite run after a child's create, or an
// update or delete that countBefore saw, in its transaction: they read the
// rows again and add what changed to the parents' slots.
func (p *Plugin) countAfterCreate(db *gorm.DB) { p.countAfter(db, true) }

func (p *Plugin) countAfterWrite(db *gorm.DB) { p.countAfter(db, false) }

func (p *Plugin) countAfter(db *gorm.DB, create bool) {
	stmt := db.Statement
	v, hadBefore := stmt.Settings.LoadAndDelete(countsBefore)
	if db.Error != nil || db.DryRun || (!create && !hadBefore) {
		return
	}
	counts, err := p.hookCounts(db)
	if err != nil {
		db.AddError(err)
		return
	}
	if len(counts) == 0 {
		return
	}
	state, _ := v.(countState)
	keys := state.keys
	if create {
		created, missing, _ := createKeys(stmt)
		if missing > 0 {
			db.AddError(fmt.Errorf("gormcounter: %d created %s rows have no key to count them by", missing, stmt.Schema.Name))
			return
		}
		seen := map[string]bool{}
		for _, k := range keys {
			seen[engine.KeyText(k)] = true
		}
		for _, k := range created {
			if !seen[engine.KeyText(k)] {
				keys = append(keys, k)
			}
		}
	}
	conn := gormConn{db: db, table: stmt.Table, schema: stmt.Schema}
	if err := engine.CountWritten(stmt.Context, conn, p.dialect, counts, state.before, keys); err != nil {
		db.AddError(fmt.Errorf("gormcounter: count the %s rows written: %w", stmt.Schema.Name, err))
	}
}

// upsertByKey reports whether a create either is no upsert, or can update
// only rows that its primary keys name: its conflict target is the primary
// key (MySQL's ON DUPLICATE KEY matches any unique key, so there only if
// the table has no other), or the table has no other unique key. Rows
// without a key are then new rows. GORM saves associations this way (ON
// CONFLICT (id)).
func (p *Plugin) upsertByKey(stmt *gorm.Statement) bool {
	c, upsert := stmt.Clauses["ON CONFLICT"]
	if !upsert {
		return true
	}
	if !p.otherUniqueKeys(stmt.Schema) {
		return true
	}
	oc, _ := c.Expression.(clause.OnConflict)
	if p.dialect.MySQL() || len(oc.Columns) != len(stmt.Schema.PrimaryFieldDBNames) {
		return false
	}
	for i, col := range oc.Columns {
		if col.Name != stmt.Schema.PrimaryFieldDBNames[i] {
			return false
		}
	}
	return true
}

// otherUniqueKeys reports whether s declares a unique key besides its
// primary key (cached per schema).
func (p *Plugin) otherUniqueKeys(s *schema.Schema) bool {
	if v, ok := p.uniques.Load(s); ok {
		return v.(bool)
	}
	found := false
	for _, f := range s.Fields {
		if f.Unique && !f.PrimaryKey {
			found = true
		}
	}
	for _, idx := range s.ParseIndexes() {
		if strings.EqualFold(idx.Class, "UNIQUE") {
			found = true
		}
	}
	p.uniques.Store(s, found)
	return found
}

// createKeys returns the primary keys a create names: those of its struct
// rows that are set (before the insert: given by the caller; after it: all
// that GORM filled in), or those of its maps. missing counts the rows
// without one; ok is false for rows that are neither structs of the model
// nor maps.
func createKeys(stmt *gorm.Statement) (keys []any, missing int, ok bool) {
	pf := stmt.Schema.PrioritizedPrimaryField
	if pf == nil {
		return nil, 0, false
	}
	var maps []map[string]any
	switch d := stmt.Dest.(type) {
	case map[string]any:
		maps = []map[string]any{d}
	case *map[string]any:
		maps = []map[string]any{*d}
	case []map[string]any:
		maps = d
	case *[]map[string]any:
		maps = *d
	}
	if maps != nil {
		for _, m := range maps {
			v, has := m[pf.DBName]
			if !has {
				v, has = m[pf.Name]
			}
			if !has || v == nil || reflect.ValueOf(v).IsZero() {
				missing++
				continue
			}
			keys = append(keys, v)
		}
		return keys, missing, missing == 0
	}
	if !stmt.ReflectValue.IsValid() || !rowsAreModel(stmt) {
		return nil, 1, false
	}
	for _, rv := range structsOf(stmt.ReflectValue) {
		if v, zero := pf.ValueOf(stmt.Context, rv); !zero {
			keys = append(keys, v)
		} else {
			missing++
		}
	}
	return keys, missing, true
}

// touchesCounts reports whether an update may change what counts: always,
// unless it assigns a map of columns that names neither a reference, a
// soft delete column, nor anything when a count has a condition.
func touchesCounts(stmt *gorm.Statement, counts []countersql.Count) bool {
	dest, isMap := stmt.Dest.(map[string]any)
	if pm, ok := stmt.Dest.(*map[string]any); ok && pm != nil {
		dest, isMap = *pm, true
	}
	if !isMap {
		return true
	}
	if _, hasSet := stmt.Clauses["SET"]; hasSet {
		return true
	}
	for _, c := range counts {
		if c.Where != "" {
			return true
		}
		for k := range dest {
			name := bareName(k)
			if f := stmt.Schema.LookUpField(name); f != nil {
				name = f.DBName
			}
			if strings.EqualFold(name, c.Ref) || strings.EqualFold(name, c.SoftDelete) {
				return true
			}
		}
	}
	return false
}
