package gormcounter

import (
	"database/sql"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"sync"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
	"gorm.io/gorm/schema"

	"github.com/hotcounter/hotcounter/internal/countersql"
	"github.com/hotcounter/hotcounter/internal/engine"
	"github.com/hotcounter/hotcounter/internal/spec"
)

// Counts of child rows: `gorm:"counter:counts=Objects"` on Category.ObjectCount
// makes the counter the number of Object rows whose CategoryID is the
// category's key, through the has-many relation Objects. See countersql.Count
// for the storage and the lock order.

// countOf is what a count counter needs besides its storage, resolved once.
type countOf struct {
	rel  *schema.Relationship
	once sync.Once
	spec countersql.Count
	err  error
}

// MaxHookRows bounds the child rows that one statement may touch under a
// count kept by hooks: the hook restricts the statement to the rows it read
// and locked, by key. Triggers have no bound.
const MaxHookRows = engine.MaxHookRows

// resolveCount finds the has-many relation that a counts= declaration names.
func resolveCount(s *schema.Schema, opts spec.Options, key *schema.Field) (*countOf, error) {
	s.Relationships.Mux.RLock()
	defer s.Relationships.Mux.RUnlock()
	var rel *schema.Relationship
	var hasMany []string
	for name, r := range s.Relationships.Relations {
		if r.Type == schema.HasMany {
			hasMany = append(hasMany, name)
		}
		if strings.EqualFold(name, opts.Counts) {
			rel = r
		}
	}
	sort.Strings(hasMany)
	switch {
	case rel == nil:
		return nil, fmt.Errorf("%w: counts=%s: %s has no relation %s (has-many relations: %s); add a field such as %s []%s",
			spec.ErrInvalid, opts.Counts, s.Name, opts.Counts, strings.Join(hasMany, ", "), opts.Counts, strings.TrimSuffix(opts.Counts, "s"))
	case rel.Type != schema.HasMany:
		return nil, fmt.Errorf("%w: counts=%s: %s.%s is a %s relation; a count needs has many", spec.ErrInvalid, opts.Counts, s.Name, rel.Name, rel.Type)
	case rel.Polymorphic != nil:
		return nil, fmt.Errorf("%w: counts=%s: polymorphic relations are not counted", spec.ErrInvalid, opts.Counts)
	case len(rel.References) != 1 || rel.References[0].PrimaryKey != key:
		return nil, fmt.Errorf("%w: counts=%s: the relation must reference %s's primary key through one foreign key", spec.ErrInvalid, opts.Counts, s.Name)
	case opts.Hooks && rel.FieldSchema.PrioritizedPrimaryField == nil:
		return nil, fmt.Errorf("%w: counts=%s,hooks: %s needs one primary key for hooks to find the rows a write touches",
			spec.ErrInvalid, opts.Counts, rel.FieldSchema.Name)
	}
	return &countOf{rel: rel}, nil
}

var deletedAtType = reflect.TypeOf(gorm.DeletedAt{})

// countSpec returns c's count, resolving the child's columns once (after
// the child's own counters are settled: a sum counter has no column).
func (p *Plugin) countSpec(db *gorm.DB, c *counter) (countersql.Count, error) {
	co := c.count
	co.once.Do(func() {
		child := co.rel.FieldSchema
		if _, err := p.model(db, child); err != nil {
			co.err = err
			return
		}
		s := countersql.Count{
			Table:     c.table,
			SlotCount: c.opts.Slots,
			Child:     child.Table,
			Ref:       co.rel.References[0].ForeignKey.DBName,
			Columns:   columnsOf(child),
			Where:     c.opts.Where,
		}
		if pf := child.PrioritizedPrimaryField; pf != nil {
			s.ChildKey = pf.DBName
		}
		for _, f := range child.Fields {
			if f.FieldType == deletedAtType && f.DBName != "" {
				s.SoftDelete = f.DBName
			}
		}
		co.spec = s
	})
	return co.spec, co.err
}

// columnsOf returns the columns a table of s has: its fields with a column
// that migrations create (not read-only `->;-:migration` fields, not sum
// counters).
func columnsOf(s *schema.Schema) []string {
	var out []string
	seen := map[string]bool{}
	for _, f := range s.Fields {
		if f.DBName == "" || f.IgnoreMigration || seen[f.DBName] {
			continue
		}
		seen[f.DBName] = true
		out = append(out, f.DBName)
	}
	return out
}

// registerCount records a count under its child table, so that writes to
// the child find it (hooks) and migrating the child installs its triggers.
func (p *Plugin) registerCount(c *counter) {
	p.countsMu.Lock()
	defer p.countsMu.Unlock()
	if p.counts == nil {
		p.counts = map[string][]*counter{}
	}
	child := c.count.rel.FieldSchema.Table
	for _, have := range p.counts[child] {
		if have.table.Slots == c.table.Slots {
			return
		}
	}
	list := append(p.counts[child][:len(p.counts[child]):len(p.counts[child])], c)
	// One order for every writer: slot tables are locked in this order.
	sort.Slice(list, func(i, j int) bool { return list[i].table.Slots < list[j].table.Slots })
	p.counts[child] = list
}

// countsOn returns the counts registered on a child table.
func (p *Plugin) countsOn(table string) []*counter {
	p.countsMu.Lock()
	defer p.countsMu.Unlock()
	return p.counts[table]
}

// installCounts (re)creates the triggers of the counts that models declare
// or that count rows of models, after their tables are migrated. A count
// kept by hooks gets its triggers removed. A count whose child table does
// not exist yet is installed when the child is migrated.
//
// A count whose slot table the migration just created (created) is then
// recounted from the child table, so that children written before the
// count was declared are counted; it says how many parents it set.
func (m counterMigrator) installCounts(values []any, models []*model, created map[*counter]bool) error {
	var todo []*counter
	seen := map[*counter]bool{}
	add := func(c *counter) {
		if c.count != nil && !seen[c] {
			seen[c] = true
			todo = append(todo, c)
		}
	}
	for _, md := range models {
		for _, c := range md.counters {
			add(c)
		}
	}
	for _, v := range values {
		if _, isName := v.(string); isName {
			continue
		}
		stmt := &gorm.Statement{DB: m.db}
		if err := stmt.Parse(v); err != nil {
			continue
		}
		for _, c := range m.plugin.countsOn(stmt.Schema.Table) {
			add(c)
		}
	}
	d := m.plugin.dialect
	for _, c := range todo {
		cs, err := m.plugin.countSpec(m.db, c)
		if err != nil {
			return err
		}
		if exists, err := m.tableExists(cs.Child); err != nil || !exists {
			if err != nil {
				return err
			}
			continue
		}
		steps := d.DropCountTriggers(cs)
		if !c.opts.Hooks {
			steps = d.InstallCountTriggers(cs)
		}
		run := func(tx *gorm.DB) error {
			for _, step := range steps {
				if err := execSQL(tx, "", step).Error; err != nil {
					return err
				}
			}
			return nil
		}
		if d.MySQL() { // DDL commits anyway
			err = run(m.db)
		} else {
			err = m.db.Transaction(run)
		}
		if err != nil {
			return fmt.Errorf("gormcounter: install the triggers that keep %s (counts %s): %w", c.name(), cs.Child, err)
		}
		if created[c] {
			ctx := m.db.Statement.Context
			n, err := engine.Recount(ctx, gormConn{db: m.db, table: c.table.Parent}, d, cs, c.opts.Mode.HasColumn(), m.plugin.cfg.RollupBatchSize,
				func(w countersql.Writer) { w.WriteString("1=1") }, func() bool { return false })
			if err != nil {
				return fmt.Errorf("gormcounter: count the existing %s rows of %s: %w", cs.Child, c.name(), err)
			}
			if n > 0 {
				m.db.Logger.Warn(ctx, "gormcounter: %s: counted the %s rows that existed before the count: %d parents set", c.name(), cs.Child, n)
			}
		}
	}
	return nil
}

// guardRebuild runs fn, a migration of the tables of values, with the
// migrator it must use. SQLite's migrator recreates a table to alter it
// (create a copy, drop the table, rename the copy), which needs two
// guards:
//   - the whole rebuild runs on one connection: the migrator turns foreign
//     keys off for it with a PRAGMA, which holds for one connection only,
//     and with them on, dropping the old table cascades to its slot tables
//     and deletes every count;
//   - the count triggers that went with the old table are put back. They
//     are read from the database, so this works in a process that never
//     saw the parent model.
//
// fn gets the session to migrate with: inner(conn) is GORM's own migrator
// on it.
func (m counterMigrator) guardRebuild(values []any, fn func(conn *gorm.DB) error) error {
	d := m.plugin.dialect
	if !d.RecreatesTables() {
		return fn(m.db)
	}
	type trigger struct{ name, sql string }
	var saved []trigger
	for _, v := range values {
		table, ok := v.(string)
		if !ok {
			stmt := &gorm.Statement{DB: m.db}
			if stmt.Parse(v) != nil {
				continue
			}
			table = stmt.Schema.Table
		}
		rows, err := querySQL(m.db, "", func(w countersql.Writer) { d.CountTriggersOn(w, table) }).Rows()
		if err != nil {
			return err
		}
		for rows.Next() {
			var t trigger
			if err := rows.Scan(&t.name, &t.sql); err != nil {
				rows.Close()
				return err
			}
			saved = append(saved, t)
		}
		rows.Close()
	}
	if _, pinned := m.db.Statement.ConnPool.(*sql.Conn); pinned {
		if err := fn(m.db); err != nil { // inside a rebuild already
			return err
		}
	} else if err := m.db.Connection(func(conn *gorm.DB) error {
		// Not every rebuild of GORM's SQLite migrator turns foreign keys
		// off (DropColumn does not).
		var on int
		if err := querySQL(conn, "", d.ForeignKeysOn).Scan(&on).Error; err != nil {
			return err
		}
		if on == 1 {
			if err := execSQL(conn, "", func(w countersql.Writer) { d.SetForeignKeys(w, false) }).Error; err != nil {
				return err
			}
			defer execSQL(conn, "", func(w countersql.Writer) { d.SetForeignKeys(w, true) })
		}
		return fn(conn)
	}); err != nil {
		return err
	}
	for _, t := range saved {
		if err := execSQL(m.db, "", func(w countersql.Writer) { w.WriteString(recreate(t.sql)) }).Error; err != nil {
			return fmt.Errorf("gormcounter: put back trigger %s after a migration: %w", t.name, err)
		}
	}
	return nil
}

// recreate turns a saved CREATE TRIGGER into one that leaves an existing
// trigger alone.
// inner returns GORM's own migrator (not the plugin's) on db.
func inner(db *gorm.DB) gorm.Migrator {
	d := db.Dialector
	if w, ok := d.(*dialector); ok {
		d = w.Dialector
	}
	return d.Migrator(db)
}

func recreate(sql string) string {
	const prefix = "CREATE TRIGGER "
	if strings.HasPrefix(sql, prefix) {
		return "CREATE TRIGGER IF NOT EXISTS " + sql[len(prefix):]
	}
	return sql
}

// tableExists reports whether a table exists, schema-qualified or not.
func (m counterMigrator) tableExists(table string) (bool, error) {
	keys, err := engine.QueryKeys(m.db.Statement.Context, gormConn{db: m.db}, func(w countersql.Writer) { m.plugin.dialect.TableExists(w, table) })
	return len(keys) > 0, err
}

// dropCountTriggers removes the triggers of md's counts, before its slot
// tables go: a trigger left behind would fail every write to the child.
func (m counterMigrator) dropCountTriggers(md *model) error {
	for _, c := range md.counters {
		if c.count == nil {
			continue
		}
		cs, err := m.plugin.countSpec(m.db, c)
		if err != nil {
			return err
		}
		if exists, err := m.tableExists(cs.Child); err != nil || !exists {
			if err != nil {
				return err
			}
			continue
		}
		for _, step := range m.plugin.dialect.DropCountTriggers(cs) {
			if err := execSQL(m.db, "", step).Error; err != nil {
				return fmt.Errorf("gormcounter: drop the triggers that keep %s: %w", c.name(), err)
			}
		}
	}
	return nil
}

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

// countsBefore is where a hooked write leaves the rows it read before the
// write (a countState).
const countsBefore = "gormcounter:counts_before"

// countState is what a hooked write read before it: the rows, and the keys
// to read again after it.
type countState struct {
	before []engine.CountedRow
	keys   []any
}

// startedTx marks a statement for which the hooks opened the transaction.
const startedTx = "gormcounter:started_transaction"

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

// whereCond renders a GORM WHERE as a countersql condition.
func whereCond(where clause.Where) func(countersql.Writer) {
	return func(w countersql.Writer) {
		if len(where.Exprs) == 0 {
			w.WriteString("1=1")
			return
		}
		where.Build(w.(builderWriter).b)
	}
}

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
			stmt.Model, field, ErrNotCounter)
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
	ctx := stmt.Context
	n, err := engine.Recount(ctx, gormConn{db: db, table: c.table.Parent}, p.dialect, cs, c.opts.Mode.HasColumn(), p.cfg.RollupBatchSize,
		whereCond(where), func() bool { return ctx.Err() != nil })
	if err != nil {
		return n, fmt.Errorf("gormcounter: recount %s: %w", c.name(), err)
	}
	return n, nil
}
