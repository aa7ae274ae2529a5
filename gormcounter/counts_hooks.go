package gormcounter

import (
	"fmt"
	"reflect"
	"sort"
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
	if _, own := db.Get(ownInsert); own {
		return nil, nil // insertJoinRows' own insert, which it counts
	}
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
func (p *Plugin) countBegin(db *gorm.DB) { p.begin(db, false) }

// countBeginDelete is countBegin for a delete, which may also take join
// rows counted by hooks with it (acrossBefore).
func (p *Plugin) countBeginDelete(db *gorm.DB) { p.begin(db, true) }

func (p *Plugin) begin(db *gorm.DB, del bool) {
	if db.Error != nil || db.DryRun {
		return
	}
	if _, inTx := db.Statement.ConnPool.(gorm.TxCommitter); inTx {
		return
	}
	counts, err := p.hookCounts(db)
	if err != nil {
		return
	}
	if len(counts) == 0 {
		if joins, _, _ := p.acrossCounts(db); len(joins) == 0 || !del {
			return
		}
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

func (p *Plugin) countBeforeDelete(db *gorm.DB) {
	p.countBefore(db, false)
	p.acrossBefore(db)
}

// acrossCounts returns, per join table, the counts kept by hooks through
// a many-to-many join table whose rows name the statement's table's rows
// as the other side: deleting those rows takes their join rows with them
// (the join's cascade), and the counts of the rows they were attached to
// change.
//
// refs[i] is the column of join table i that names the statement's rows:
// the other side's reference of the count that reaches them, whatever
// count comes first in the join table's list (a join table may carry a
// count on each side).
func (p *Plugin) acrossCounts(db *gorm.DB) (joins [][]countersql.Count, refs []string, err error) {
	stmt := db.Statement
	if stmt.Schema == nil || stmt.Schema.PrioritizedPrimaryField == nil {
		return nil, nil, nil
	}
	type found struct {
		list []*counter
		via  *counter
	}
	p.countsMu.Lock()
	var lists []found
	for _, list := range p.counts {
		for _, c := range list {
			if c.opts.Hooks && c.count.rel.JoinTable != nil && c.count.rel.FieldSchema.Table == stmt.Schema.Table {
				lists = append(lists, found{list, c})
				break
			}
		}
	}
	p.countsMu.Unlock()
	sort.Slice(lists, func(i, j int) bool {
		return lists[i].list[0].count.rel.JoinTable.Table < lists[j].list[0].count.rel.JoinTable.Table
	})
	for _, f := range lists {
		var counts []countersql.Count
		ref := ""
		for _, c := range f.list {
			if !c.opts.Hooks {
				continue
			}
			cs, err := p.countSpec(db, c)
			if err != nil {
				return nil, nil, err
			}
			counts = append(counts, cs)
			if c == f.via {
				ref = cs.Across.Ref
			}
		}
		joins, refs = append(joins, counts), append(refs, ref)
	}
	return joins, refs, nil
}

// acrossState is what acrossBefore read: the keys of the rows deleted,
// and per join table the join rows naming them.
type acrossState struct {
	keys   []any
	counts [][]countersql.Count
	refs   []string // per join table, the column naming the deleted rows
	before [][]engine.CountedRow
}

const acrossBefore = "gormcounter:across_before"

// acrossBefore runs before a delete of rows that are the other side of
// many-to-many counts kept by hooks (acrossCounts): it locks those rows
// (FOR UPDATE: a transaction attaching one of them holds it through the
// join's foreign key check, so the lock waits for it, and none can start
// until this one commits), pins the statement to them, and reads their
// join rows; acrossAfter reads the join rows again and counts what the
// delete took with it. A soft delete takes nothing.
func (p *Plugin) acrossBefore(db *gorm.DB) {
	stmt := db.Statement
	if db.Error != nil || db.DryRun || (stmt.Schema != nil && softDeletes(stmt.Schema) && !stmt.Unscoped) {
		return
	}
	joins, refs, err := p.acrossCounts(db)
	if err != nil {
		db.AddError(err)
		return
	}
	if len(joins) == 0 {
		return
	}
	where, ok := targetConditions(db)
	if !ok && !db.AllowGlobalUpdate {
		return
	}
	conn := gormConn{db: db, table: stmt.Table, schema: stmt.Schema}
	key := stmt.Schema.PrioritizedPrimaryField.DBName
	keys, err := engine.QueryKeys(stmt.Context, conn, func(w countersql.Writer) { p.dialect.KeysWhere(w, stmt.Table, key, whereCond(where), true) })
	if err != nil {
		db.AddError(fmt.Errorf("gormcounter: lock the %s rows a delete takes with their join rows: %w", stmt.Schema.Name, err))
		return
	}
	if len(keys) > MaxHookRows {
		db.AddError(fmt.Errorf("gormcounter: a delete of %d %s rows at once: counts kept by hooks allow %d per statement; delete in batches or keep the counts with triggers",
			len(keys), stmt.Schema.Name, MaxHookRows))
		return
	}
	stmt.AddClause(clause.Where{Exprs: []clause.Expression{clause.IN{Column: clause.Column{Table: clause.CurrentTable, Name: key}, Values: keys}}})
	state := acrossState{keys: keys, counts: joins, refs: refs}
	for i, counts := range joins {
		rows, err := engine.ReadCounted(stmt.Context, conn, p.dialect, counts, p.dialect.ChildColumnIn(counts[0], refs[i], keys), true)
		if err != nil {
			db.AddError(fmt.Errorf("gormcounter: read the %s rows a delete of %s takes with it: %w", counts[0].Child, stmt.Schema.Name, err))
			return
		}
		state.before = append(state.before, rows)
	}
	stmt.Settings.Store(acrossBefore, state)
}

// acrossAfter finishes what acrossBefore started, after the delete.
func (p *Plugin) acrossAfter(db *gorm.DB) {
	stmt := db.Statement
	v, ok := stmt.Settings.LoadAndDelete(acrossBefore)
	if !ok || db.Error != nil {
		return
	}
	state := v.(acrossState)
	conn := gormConn{db: db, table: stmt.Table, schema: stmt.Schema}
	for i, counts := range state.counts {
		var cond func(countersql.Writer) = func(w countersql.Writer) { w.WriteString("1=0") }
		if len(state.keys) > 0 {
			cond = p.dialect.ChildColumnIn(counts[0], state.refs[i], state.keys)
		}
		if err := engine.CountAgain(stmt.Context, conn, p.dialect, counts, state.before[i], cond); err != nil {
			db.AddError(fmt.Errorf("gormcounter: count the %s rows a delete of %s took with it: %w", counts[0].Child, stmt.Schema.Name, err))
			return
		}
	}
}

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
	if col := assignedReference(stmt, counts[0]); update && col != "" {
		db.AddError(fmt.Errorf("gormcounter: an update of %s.%s under counts kept by hooks: the hooks name a join row by its two references; delete the row and create the new one, or keep the counts with triggers",
			counts[0].Child, col))
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
	stmt.AddClause(clause.Where{Exprs: []clause.Expression{p.keyIn(counts[0], keys)}})
	stmt.Settings.Store(countsBefore, countState{before: rows, keys: keys})
}

// keyIn is the condition that pins a statement to the child rows keys
// name: key IN (...), or for a join table keyed by its two references
// countersql's ChildKeyIn.
func (p *Plugin) keyIn(c countersql.Count, keys []any) clause.Expression {
	cols := c.KeyColumns()
	if len(cols) == 1 {
		return clause.IN{Column: clause.Column{Table: clause.CurrentTable, Name: cols[0]}, Values: keys}
	}
	return sqlExpr(p.dialect.ChildKeyIn(c, keys))
}

// countBeforeCreate runs before a child's create. Rows created with their
// key set may exist already: an upsert (Clauses(clause.OnConflict{...}),
// Save of a slice, GORM saving loaded associations, Save falling back to a
// create) updates them, possibly moving them to another parent. Those rows
// are read and locked first, so that the count changes by what the write
// changed, not by one per row; a plain create (no ON CONFLICT) reads
// nothing first. An upsert of rows without keys is refused: the rows it
// would update are unknown.
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
	keys, missing, ok := createKeys(stmt, counts[0])
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
	_, upsert := stmt.Clauses["ON CONFLICT"]
	if !upsert {
		// A plain create adds rows that did not exist (one that did fails
		// on its key): there is nothing to read first. (On Citus the read,
		// FOR UPDATE by a key that is not the distribution column, was
		// refused: "could not run distributed query with FOR UPDATE".)
		stmt.Settings.Store(countsBefore, countState{keys: keys})
		return
	}
	joinUpsert := upsert && counts[0].Across != nil
	ours, present := map[string]bool{}, map[string]bool{}
	var rows []engine.CountedRow
	for attempt := 0; ; attempt++ {
		if joinUpsert {
			if err := p.insertJoinRows(db, counts[0], ours, present); err != nil {
				db.AddError(fmt.Errorf("gormcounter: insert the %s rows one by one: %w", stmt.Table, err))
				return
			}
		}
		rows, err = engine.ReadCounted(stmt.Context, gormConn{db: db, table: stmt.Table, schema: stmt.Schema}, p.dialect, counts, p.dialect.ChildKeyIn(counts[0], keys), true)
		if err != nil {
			db.AddError(fmt.Errorf("gormcounter: read the %s rows an upsert may change: %w", stmt.Schema.Name, err))
			return
		}
		clear(present)
		for _, r := range rows {
			present[engine.KeyText(r.Key)] = true
		}
		// A join row found by its insert, then deleted by another
		// transaction before the read locked it, would be inserted by
		// the statement, or by a third transaction meanwhile: inserted
		// again here, until every row is this transaction's or locked.
		if !joinUpsert || len(present) == len(keys) {
			break
		}
		if attempt == 10 {
			db.AddError(fmt.Errorf("gormcounter: the %s rows an upsert writes kept being deleted by other transactions; retry", stmt.Table))
			return
		}
	}
	before := rows[:0:0]
	for _, r := range rows {
		if !ours[engine.KeyText(r.Key)] {
			before = append(before, r)
		}
	}
	stmt.Settings.Store(countsBefore, countState{before: before, keys: keys})
}

// insertJoinRows inserts the rows of an upsert of join rows (GORM's
// Association Append, Create with associations, which insert ON CONFLICT
// DO NOTHING) one statement each, doing nothing for a row that exists,
// before the statement, but for those in ours (inserted already) or
// present (read and locked), and adds the keys of those it inserted to
// ours: the count's hooks count those as new, and the statement then
// finds them all. Two transactions attaching the same pair at once: the second's
// insert waits for the first's row and then inserts nothing, so the pair
// counts once (a read before and after the statement would count it in
// both).
func (p *Plugin) insertJoinRows(db *gorm.DB, c countersql.Count, ours, present map[string]bool) error {
	stmt := db.Statement
	for _, rv := range structsOf(stmt.ReflectValue) {
		keys, _, _ := keysOf(stmt, c, []reflect.Value{rv}, nil)
		if len(keys) == 0 || ours[engine.KeyText(keys[0])] || present[engine.KeyText(keys[0])] {
			continue
		}
		one := db.Session(&gorm.Session{NewDB: true, SkipHooks: true}).Table(stmt.Table).
			Clauses(clause.OnConflict{DoNothing: true}).Omit(clause.Associations).Set(ownInsert, true)
		res := one.Create(rv.Addr().Interface())
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected == 1 {
			ours[engine.KeyText(keys[0])] = true
		}
	}
	return nil
}

// ownInsert marks insertJoinRows' own inserts, which its caller counts.
const ownInsert = "gormcounter:own_insert"

// countAfterCreate and countAfterWrite run after a child's create, or an
// update or delete that countBefore saw, in its transaction: they read the
// rows again and add what changed to the parents' slots.
func (p *Plugin) countAfterCreate(db *gorm.DB) { p.countAfter(db, true) }

func (p *Plugin) countAfterWrite(db *gorm.DB) {
	p.countAfter(db, false)
	p.acrossAfter(db)
}

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
		created, missing, _ := createKeys(stmt, counts[0])
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

// createKeys returns the keys (c.KeyColumns) a create names: those of its
// struct rows that are set (before the insert: given by the caller; after
// it: all that GORM filled in), or those of its maps. missing counts the
// rows without one; ok is false for rows that are neither structs of the
// model nor maps.
func createKeys(stmt *gorm.Statement, c countersql.Count) (keys []any, missing int, ok bool) {
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
	if maps == nil && (!stmt.ReflectValue.IsValid() || !rowsAreModel(stmt)) {
		return nil, 1, false
	}
	var structs []reflect.Value
	if maps == nil {
		structs = structsOf(stmt.ReflectValue)
	}
	return keysOf(stmt, c, structs, maps)
}

// keysOf returns the keys (c.KeyColumns: one value, or a Pair) of rows,
// structs of the statement's model or maps, and how many have none (a
// zero value).
func keysOf(stmt *gorm.Statement, c countersql.Count, structs []reflect.Value, maps []map[string]any) (keys []any, missing int, ok bool) {
	cols := c.KeyColumns()
	fields := make([]*schema.Field, len(cols))
	for i, col := range cols {
		if fields[i] = stmt.Schema.LookUpField(col); fields[i] == nil {
			return nil, 0, false
		}
	}
	key := func(value func(f *schema.Field) (any, bool)) {
		vals := make([]any, len(fields))
		for i, f := range fields {
			v, has := value(f)
			if !has || v == nil || reflect.ValueOf(v).IsZero() {
				missing++
				return
			}
			vals[i] = v
		}
		if len(vals) == 2 {
			keys = append(keys, countersql.Pair{vals[0], vals[1]})
		} else {
			keys = append(keys, vals[0])
		}
	}
	for _, m := range maps {
		key(func(f *schema.Field) (any, bool) {
			v, has := m[f.DBName]
			if !has {
				v, has = m[f.Name]
			}
			return v, has
		})
	}
	for _, rv := range structs {
		key(func(f *schema.Field) (any, bool) {
			v, zero := f.ValueOf(stmt.Context, rv)
			return v, !zero
		})
	}
	return keys, missing, maps == nil || missing == 0
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

// softDeletes reports whether s's rows are soft deleted (gorm.DeletedAt).
func softDeletes(s *schema.Schema) bool {
	for _, f := range s.Fields {
		if f.FieldType == deletedAtType && f.DBName != "" {
			return true
		}
	}
	return false
}

// assignedReference returns the reference column of a join table keyed by
// its two references (c.KeyColumns) that an update assigns in a map
// (Update, UpdateColumn, Updates of a map), or "".
func assignedReference(stmt *gorm.Statement, c countersql.Count) string {
	cols := c.KeyColumns()
	if len(cols) != 2 {
		return ""
	}
	dest, isMap := stmt.Dest.(map[string]any)
	if pm, ok := stmt.Dest.(*map[string]any); ok && pm != nil {
		dest, isMap = *pm, true
	}
	if !isMap {
		return ""
	}
	for k := range dest {
		name := bareName(k)
		if f := stmt.Schema.LookUpField(name); f != nil {
			name = f.DBName
		}
		for _, col := range cols {
			if strings.EqualFold(name, col) {
				return col
			}
		}
	}
	return ""
}
