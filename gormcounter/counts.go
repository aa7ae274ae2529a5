package gormcounter

import (
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
func resolveCount(s *schema.Schema, f *schema.Field, opts spec.Options, key *schema.Field) (*countOf, error) {
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
			Columns:   child.DBNames,
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
func (m counterMigrator) installCounts(values []any, models []*model) error {
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
		if !m.Migrator.HasTable(cs.Child) {
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
	}
	return nil
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
		if !m.Migrator.HasTable(cs.Child) {
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
	if stmt.Schema == nil || (stmt.Table != "" && stmt.Table != stmt.Schema.Table) {
		return nil, nil
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

// countsBefore is where a hooked update or delete leaves the rows it read.
const countsBefore = "gormcounter:counts_before"

// countBeforeUpdate and countBeforeDelete run before a child's update or
// delete: they read and lock the rows the statement targets, with the
// parents they count for, and restrict the statement to those rows by key,
// so that a row inserted meanwhile is neither written nor miscounted.
func (p *Plugin) countBeforeUpdate(db *gorm.DB) { p.countBefore(db, true) }

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
	stmt.Settings.Store(countsBefore, rows)
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
	var before []engine.CountedRow
	var keys []any
	if !create {
		before = v.([]engine.CountedRow)
		for _, r := range before {
			keys = append(keys, r.Key)
		}
	} else if keys = createdKeys(stmt); len(keys) > MaxHookRows {
		db.AddError(fmt.Errorf("gormcounter: a create of %d %s rows at once: counts kept by hooks allow %d per statement; use CreateInBatches",
			len(keys), stmt.Schema.Name, MaxHookRows))
		return
	}
	if len(keys) == 0 {
		return
	}
	conn := gormConn{db: db, table: stmt.Table, schema: stmt.Schema}
	after, err := engine.ReadCounted(stmt.Context, conn, p.dialect, counts, p.dialect.ChildKeyIn(counts[0], keys), false)
	if err == nil {
		err = engine.ApplyCounts(stmt.Context, conn, p.dialect, counts, before, after)
	}
	if err != nil {
		db.AddError(fmt.Errorf("gormcounter: count the %s rows written: %w", stmt.Schema.Name, err))
	}
}

// createdKeys returns the primary keys of the rows a create wrote.
func createdKeys(stmt *gorm.Statement) []any {
	pf := stmt.Schema.PrioritizedPrimaryField
	if pf == nil || !stmt.ReflectValue.IsValid() || !rowsAreModel(stmt) {
		return nil
	}
	var keys []any
	for _, rv := range structsOf(stmt.ReflectValue) {
		if v, zero := pf.ValueOf(stmt.Context, rv); !zero {
			keys = append(keys, v)
		}
	}
	return keys
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
