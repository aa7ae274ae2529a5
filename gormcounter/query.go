package gormcounter

import (
	"context"
	"fmt"
	"reflect"
	"strings"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
	"gorm.io/gorm/schema"

	"github.com/hotcounter/hotcounter"
	"github.com/hotcounter/hotcounter/internal/countersql"
	"github.com/hotcounter/hotcounter/internal/engine"
	"github.com/hotcounter/hotcounter/internal/spec"
)

// fillPlanKey carries, from adjustSelect to fill, the counters of the
// statement's model that the caller asked for.
const fillPlanKey = "gormcounter:fill_plan"

// adjustSelect runs before a query (Find, First, ...) is built. A sum counter
// has no column, so when the rows are structs that the fill will complete,
// the counter comes out of an explicit Select (the key goes in, the fill
// needs it) and out of the column list GORM derives from another destination
// struct. It records which counters the caller asked for.
func (p *Plugin) adjustSelect(db *gorm.DB) {
	stmt := db.Statement
	if db.Error != nil || stmt.Schema == nil || stmt.SQL.Len() > 0 || !rowsAreStructs(stmt) {
		return
	}
	m, err := p.model(db, stmt.Schema)
	if err != nil || m == nil {
		return
	}
	live := isLive(stmt.Context)
	wanted := make([]*counter, 0, len(m.counters))
	if len(stmt.Selects) == 0 {
		for _, c := range m.counters {
			if !omitted(stmt, c) {
				wanted = append(wanted, c)
			}
		}
		dropDerivedColumns(db, m)
		stmt.Settings.Store(fillPlanKey, p.inlineTotals(db, wanted))
		return
	}
	var kept []string
	all, hasKey, changed, needKey := false, false, false, false
	for _, sel := range stmt.Selects {
		names := simpleList(sel)
		if names == nil {
			kept = append(kept, sel)
			continue
		}
		keep := names[:0:0]
		for _, n := range names {
			switch bare := bareName(n); {
			case bare == "*":
				all = true
			case bare == m.key.Name || strings.EqualFold(bare, m.key.DBName):
				hasKey = true
			}
			if c := m.lookup(n); c != nil {
				wanted = append(wanted, c)
				needKey = needKey || c.opts.Mode == spec.Sum || live
				if c.opts.Mode == spec.Sum {
					changed = true
					continue
				}
			}
			keep = append(keep, n)
		}
		if len(keep) == len(names) {
			kept = append(kept, sel)
		} else {
			kept = append(kept, keep...)
		}
	}
	if all {
		wanted = append(wanted[:0], m.counters...)
	} else if needKey && !hasKey {
		kept, changed = append(kept, m.key.DBName), true // the fill needs the key of every row
	}
	if changed {
		stmt.Selects = kept
	}
	stmt.Settings.Store(fillPlanKey, wanted)
}

// inlineTotals makes a load of the model's rows (First, Find, a Preload
// level) select its sum counters' totals beside its columns, one
// correlated subquery each over the row's slot rows (on PostgreSQL, for
// rows named by many keys, one grouped sum per counter joined to them: see
// manyKeys), so that it is one statement, not a load and a fill; it
// returns the counters left to the fill. Loads with Joins, a Table
// expression, Distinct or grouping, an Offset, QueryFields, or a
// write-behind buffer's Live (its pending amounts are added by the fill)
// keep the fill's one grouped query; so do counters
// adopted over a column (the column would be selected twice) and unsigned
// fields, and then all the model's counters go to the fill, as they do
// under Live when the model has a rollup counter.
func (p *Plugin) inlineTotals(db *gorm.DB, wanted []*counter) []*counter {
	stmt := db.Statement
	if !stmt.ReflectValue.IsValid() || !rowsAreModel(stmt) ||
		len(stmt.Joins) > 0 || stmt.TableExpr != nil || stmt.Distinct || db.QueryFields || stmt.Table == "" {
		return wanted
	}
	if _, ok := stmt.Clauses["GROUP BY"]; ok {
		return wanted
	}
	if c, ok := stmt.Clauses["LIMIT"]; ok {
		if l, ok := c.Expression.(clause.Limit); ok && l.Offset > 0 {
			// The database computes the select list of every row an
			// OFFSET skips (PostgreSQL projects below the Limit node):
			// subqueries there would sum the slots of every skipped row.
			// The fill sums those of the rows returned.
			return wanted
		}
	}
	if _, ok := stmt.Context.Value(bufferKey{}).(*Buffer); ok {
		return wanted
	}
	var (
		inline []countersql.Inline
		rest   []*counter
	)
	for _, c := range wanted {
		if c.opts.Mode != spec.Sum || isUnsigned(c.field) {
			// An unsigned field cannot take a negative total: the fill
			// says so, naming the counter.
			rest = append(rest, c)
			continue
		}
		read, err := p.sources(stmt.Context, gormConn{db: db}, c)
		if err != nil {
			return wanted // the fill reports it
		}
		if read.Column {
			rest = append(rest, c)
			continue
		}
		t := c.table
		t.Parent = stmt.Table
		inline = append(inline, countersql.Inline{Table: t, Read: read, As: c.field.DBName})
	}
	if len(inline) == 0 {
		return wanted
	}
	live := isLive(stmt.Context)
	for _, c := range rest {
		if c.opts.Mode == spec.Sum || live {
			// A fill runs anyway (a Live rollup counter, an adopted
			// column): it reads every counter in its one statement, which
			// costs less than subqueries beside it.
			return wanted
		}
	}
	table := stmt.Table
	if p.dialect.Citus() {
		if keys, ok := namedKeys(stmt, true); ok {
			for i := range inline {
				inline[i].Keys = keys
			}
		}
	}
	if keys, ok := p.manyKeys(stmt); ok {
		// Many rows named by key: one grouped SUM per counter over those
		// keys, joined to the rows, costs less than a subquery per row.
		stmt.AddClause(clause.Select{Expression: sqlExpr(func(w countersql.Writer) { p.dialect.SelectJoinedTotals(w, table, inline) })})
		stmt.AddClause(clause.From{Joins: []clause.Join{{Expression: sqlExpr(func(w countersql.Writer) {
			p.dialect.JoinTotals(w, table, inline, keys)
		})}}})
		return rest
	}
	stmt.AddClause(clause.Select{Expression: sqlExpr(func(w countersql.Writer) { p.dialect.SelectWithTotals(w, table, inline) })})
	return rest
}

// rawOr reports whether raw SQL holds OR in any case, as a word or not.
func rawOr(sql string) bool { return strings.Contains(strings.ToUpper(sql), "OR") }

// derefKeys returns keys with every pointer replaced by what it points to;
// false if one is nil.
func derefKeys(keys []any) ([]any, bool) {
	out := make([]any, len(keys))
	for i, k := range keys {
		rv := reflect.ValueOf(k)
		for rv.Kind() == reflect.Pointer {
			if rv.IsNil() {
				return nil, false
			}
			rv = rv.Elem()
		}
		if !rv.IsValid() {
			return nil, false
		}
		out[i] = rv.Interface()
	}
	return out, true
}

// keysOfKind reports whether every key is an integer where the key field
// is one, or a string where it is one: keys bound as one array take the
// array's type (a bigint key compared with a text array is an error).
func keysOfKind(field reflect.Type, keys []any) bool {
	class := func(k reflect.Kind) int {
		switch k {
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
			reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			return 1
		case reflect.String:
			return 2
		}
		return 0
	}
	for field.Kind() == reflect.Pointer {
		field = field.Elem()
	}
	want := class(field.Kind())
	if want == 0 {
		return false
	}
	for _, k := range keys {
		if k == nil || class(reflect.TypeOf(k).Kind()) != want {
			return false
		}
	}
	return true
}

// manyKeys returns the keys of a load that names its rows by a list of at
// least countersql.JoinedFrom primary keys (Find(&posts, ids), a
// belongs-to Preload), ANDed with any other conditions (none joined by
// OR), on PostgreSQL, with no FROM clause of the caller's and no row lock,
// where the keys are of the key field's kind (integers or strings) and
// bind as one array: the loads whose totals JoinTotals reads.
func (p *Plugin) manyKeys(stmt *gorm.Statement) ([]any, bool) {
	if _, ok := p.dialect.OnPostgres(); !ok {
		return nil, false
	}
	keys, ok := namedKeys(stmt, false)
	if !ok || len(keys) < countersql.JoinedFrom || !p.dialect.KeysBindAsOneArray(keys) {
		return nil, false
	}
	return keys, true
}

// namedKeys returns the primary keys a load names its rows by: those of
// an IN (or =) on the primary key among the conditions of its WHERE that
// AND together, when the WHERE holds no OR and the load has no FROM or
// FOR clause of the caller's, and the keys are integers or strings of the
// key's kind (dereferenced), or of any kind where anyKind is set (UUIDs,
// bound one by one). Every row the load returns has one of them.
func namedKeys(stmt *gorm.Statement, anyKind bool) ([]any, bool) {
	if len(stmt.Schema.PrimaryFields) != 1 {
		return nil, false
	}
	for _, name := range []string{"FROM", "FOR"} {
		// The caller's FROM, or a row lock (PostgreSQL refuses FOR UPDATE
		// beside a grouped subquery on an outer join's nullable side).
		if _, ok := stmt.Clauses[name]; ok {
			return nil, false
		}
	}
	where, ok := stmt.Clauses["WHERE"].Expression.(clause.Where)
	if !ok {
		return nil, false
	}
	pk := stmt.Schema.PrimaryFields[0].DBName
	// Any OR in the conditions declines: GORM joins an Or to the
	// expression before it with OR, and does not bracket raw SQL whose OR
	// is not spaced as " OR " ("draft\nOR pinned"); the keys would no
	// longer bound the rows. (A raw condition mentioning ORDER or AUTHOR
	// declines too: it only costs the faster statement.)
	var hasOr func(exprs []clause.Expression) bool
	hasOr = func(exprs []clause.Expression) bool {
		for _, e := range exprs {
			switch e := e.(type) {
			case clause.OrConditions:
				return true
			case clause.AndConditions:
				if hasOr(e.Exprs) {
					return true
				}
			case clause.NotConditions:
				if hasOr(e.Exprs) {
					return true
				}
			case clause.Expr:
				if rawOr(e.SQL) {
					return true
				}
			case clause.NamedExpr:
				if rawOr(e.SQL) {
					return true
				}
			}
		}
		return false
	}
	if hasOr(where.Exprs) {
		return nil, false
	}
	onKey := func(column any, values []any) ([]any, bool) {
		col, ok := column.(clause.Column)
		if !ok || len(values) == 0 || col.Raw || col.Alias != "" || col.Name != clause.PrimaryKey && col.Name != pk ||
			col.Table != "" && col.Table != clause.CurrentTable && col.Table != stmt.Table {
			return nil, false
		}
		// A preload of a parent through a *uint foreign key names it by
		// pointers.
		keys, ok := derefKeys(values)
		return keys, ok && (anyKind || keysOfKind(stmt.Schema.PrimaryFields[0].FieldType, keys))
	}
	var find func(exprs []clause.Expression) ([]any, bool)
	find = func(exprs []clause.Expression) ([]any, bool) {
		for _, e := range exprs {
			switch e := e.(type) {
			case clause.IN:
				if keys, ok := onKey(e.Column, e.Values); ok {
					return keys, true
				}
			case clause.Eq:
				if keys, ok := onKey(e.Column, []any{e.Value}); ok {
					return keys, true
				}
			case clause.AndConditions:
				if keys, ok := find(e.Exprs); ok {
					return keys, true
				}
			}
		}
		return nil, false
	}
	return find(where.Exprs)
}

// dropAbsentColumns runs before Row, Rows, Scan and Pluck. They never fill:
// when GORM would derive the column list from a destination struct, it
// lists the struct's columns, and rewriteRefs selects the value of each
// counter among them.
func (p *Plugin) dropAbsentColumns(db *gorm.DB) {
	stmt := db.Statement
	if db.Error != nil || stmt.Schema == nil || stmt.SQL.Len() > 0 || len(stmt.Selects) > 0 {
		return
	}
	if m, err := p.model(db, stmt.Schema); err == nil && m != nil {
		keepCounterColumns(db, m)
	}
}

// dropDerivedColumns handles a statement without Select whose columns GORM
// takes from the destination struct (another struct, or QueryFields): it
// selects those columns itself, minus sum counters, which have no column.
func dropDerivedColumns(db *gorm.DB, m *model) {
	stmt := db.Statement
	if !stmt.ReflectValue.IsValid() || !m.hasMode(spec.Sum) || (!db.QueryFields && rowsAreModel(stmt)) {
		return
	}
	ds := destSchema(db)
	if ds == nil {
		return
	}
	cols := make([]string, 0, len(ds.DBNames))
	dropped := false
	for _, n := range ds.DBNames {
		if c := m.lookup(n); c != nil && c.opts.Mode == spec.Sum {
			dropped = true
			continue
		}
		cols = append(cols, n)
	}
	if dropped {
		stmt.Selects = cols
	}
}

func omitted(stmt *gorm.Statement, c *counter) bool {
	for _, o := range stmt.Omits {
		if c.namedBy(o) {
			return true
		}
	}
	return false
}

// simpleList splits "id, title" into names; nil when sel is an expression.
func simpleList(sel string) []string {
	if strings.ContainsAny(sel, "()?@'") {
		return nil
	}
	parts := strings.Split(sel, ",")
	out := make([]string, 0, len(parts))
	for _, p := range parts {
		p = strings.TrimSpace(p)
		if p == "" || strings.ContainsAny(p, " \t\n") {
			return nil
		}
		out = append(out, p)
	}
	return out
}

// rowType is the element type the statement scans into (nil if none).
func rowType(stmt *gorm.Statement) reflect.Type {
	if !stmt.ReflectValue.IsValid() {
		return nil
	}
	t := stmt.ReflectValue.Type()
	for t.Kind() == reflect.Slice || t.Kind() == reflect.Array || t.Kind() == reflect.Ptr {
		t = t.Elem()
	}
	return t
}

// rowsAreModel reports whether the statement scans into the model type itself.
func rowsAreModel(stmt *gorm.Statement) bool { return rowType(stmt) == stmt.Schema.ModelType }

// rowsAreStructs reports whether the statement scans into structs (not maps
// or plain values), which the fill can complete.
func rowsAreStructs(stmt *gorm.Statement) bool {
	t := rowType(stmt)
	return t != nil && t.Kind() == reflect.Struct
}

// destSchema parses the destination struct type when it is not the model.
func destSchema(db *gorm.DB) *schema.Schema {
	if db.Statement.Dest == nil {
		return nil
	}
	ds := &gorm.Statement{DB: db}
	if err := ds.Parse(db.Statement.Dest); err != nil {
		return nil
	}
	return ds.Schema
}

// fillJob sets one counter on some loaded rows.
type fillJob struct {
	c    *counter
	key  *schema.Field // the parent key in the rows' struct
	dst  *schema.Field // the counter in the rows' struct
	rows []reflect.Value
}

// fill runs after gorm:query (and before preload and AfterFind) on every
// query statement: Find, First, Take, Last, FindInBatches, Raw().Find and
// each Preload level. It sets the counters of the loaded rows, and of rows
// brought in by Joins, with one grouped query for the whole statement.
func (p *Plugin) fill(db *gorm.DB) {
	stmt := db.Statement
	plan, planned := stmt.Settings.LoadAndDelete(fillPlanKey)
	if db.Error != nil || db.DryRun || stmt.Schema == nil || !stmt.ReflectValue.IsValid() {
		return
	}
	live := isLive(stmt.Context)
	rows := structsOf(stmt.ReflectValue)
	if len(rows) == 0 {
		return
	}
	var jobs []fillJob

	if m, _ := p.model(db, stmt.Schema); m != nil {
		if err := p.countsMigrated(db, m.counters); err != nil {
			db.AddError(err)
			return
		}
		wanted := m.counters // Raw SQL: every counter
		if planned {
			wanted = plan.([]*counter)
		}
		rs := stmt.Schema
		if !rowsAreModel(stmt) {
			rs = destSchema(db)
		}
		if rs != nil {
			if key := rs.LookUpField(m.key.DBName); key != nil {
				for _, c := range wanted {
					if c.opts.Mode.HasColumn() && !live {
						continue
					}
					if dst := rs.LookUpField(c.field.DBName); dst != nil && dst.FieldType.Kind() != reflect.Struct {
						jobs = append(jobs, fillJob{c: c, key: key, dst: dst, rows: rows})
					}
				}
			}
		}
	}

	for _, j := range stmt.Joins {
		rels := joinedRelations(stmt.Schema, j.Name)
		if rels == nil {
			continue
		}
		values := rows
		for _, rel := range rels {
			values = nested(stmt, values, rel.Field)
		}
		last := rels[len(rels)-1]
		jm, _ := p.model(db, last.FieldSchema)
		if jm == nil || len(values) == 0 {
			continue
		}
		for _, c := range jm.counters {
			if c.opts.Mode.HasColumn() && !live {
				continue
			}
			jobs = append(jobs, fillJob{c: c, key: jm.key, dst: c.field, rows: values})
		}
	}
	if len(jobs) > 0 {
		if err := p.runFill(db, jobs, live); err != nil {
			db.AddError(err)
		}
	}
}

// joinedRelations resolves a Joins name ("Author" or "Author.Company").
func joinedRelations(s *schema.Schema, name string) []*schema.Relationship {
	var out []*schema.Relationship
	for _, part := range strings.Split(name, ".") {
		s.Relationships.Mux.RLock()
		rel, ok := s.Relationships.Relations[part]
		s.Relationships.Mux.RUnlock()
		if !ok {
			return nil
		}
		out = append(out, rel)
		s = rel.FieldSchema
	}
	return out
}

// structsOf returns the addressable structs held by a loaded value.
func structsOf(rv reflect.Value) []reflect.Value { return appendStructs(nil, rv) }

// appendStructs appends the addressable structs held by rv to out.
func appendStructs(out []reflect.Value, rv reflect.Value) []reflect.Value {
	for rv.Kind() == reflect.Ptr || rv.Kind() == reflect.Interface {
		if rv.IsNil() {
			return out
		}
		rv = rv.Elem()
	}
	switch rv.Kind() {
	case reflect.Struct:
		return append(out, rv)
	case reflect.Slice, reflect.Array:
		if out == nil {
			out = make([]reflect.Value, 0, rv.Len())
		}
		for i := 0; i < rv.Len(); i++ {
			out = appendStructs(out, rv.Index(i))
		}
	}
	return out
}

func nested(stmt *gorm.Statement, rows []reflect.Value, f *schema.Field) []reflect.Value {
	out := make([]reflect.Value, 0, len(rows))
	for _, r := range rows {
		out = appendStructs(out, f.ReflectValueOf(stmt.Context, r))
	}
	return out
}

type fillTarget struct {
	row reflect.Value
	dst *schema.Field
}

// fillGroup is one counter's keys and the rows each key fills.
type fillGroup struct {
	c    *counter
	keys []any
	by   map[string][]fillTarget
}

func (p *Plugin) runFill(db *gorm.DB, jobs []fillJob, live bool) error {
	ctx := db.Statement.Context
	var groups []*fillGroup
	byCounter := map[*counter]*fillGroup{}
	for _, j := range jobs {
		g := byCounter[j.c]
		if g == nil {
			g = &fillGroup{c: j.c, by: map[string][]fillTarget{}}
			byCounter[j.c] = g
			groups = append(groups, g)
		}
		isSum := j.c.opts.Mode == spec.Sum || !live
		for _, r := range j.rows {
			k, zero := j.key.ValueOf(ctx, r)
			if zero {
				continue
			}
			text := engine.KeyText(k)
			if _, seen := g.by[text]; !seen {
				g.keys = append(g.keys, k)
			}
			g.by[text] = append(g.by[text], fillTarget{row: r, dst: j.dst})
			if isSum {
				// No slot rows means zero; also clears whatever the struct held.
				if err := j.dst.Set(ctx, r, int64(0)); err != nil {
					return fmt.Errorf("gormcounter: fill %s: %w", j.c.name(), err)
				}
			}
		}
	}

	set := func(gi int, key string, val int64) error {
		g := groups[gi]
		for _, t := range g.by[key] {
			if !fitsField(t.dst.FieldType, val) {
				return fmt.Errorf("gormcounter: %s: %w: the total is %d, beyond what a %s holds (written by other code, or by concurrent increments near the bound)",
					g.c.name(), hotcounter.ErrOverflow, val, t.dst.FieldType)
			}
			if err := t.dst.Set(ctx, t.row, val); err != nil {
				return fmt.Errorf("gormcounter: fill %s: %w", g.c.name(), err)
			}
		}
		return nil
	}
	// The counters are read where the rows were; what the database holds
	// (an adopted column, a table a change of mode left) is probed on the
	// primary, once.
	conn := gormConn{db: db, follow: true}
	probe := conn
	probe.follow = false
	loads := make([]engine.LoadGroup, len(groups))
	for i, g := range groups {
		loads[i] = engine.LoadGroup{Counter: g.c.engine(), Keys: g.keys}
	}
	_, inTx := db.Statement.ConnPool.(gorm.TxCommitter)
	err := p.store().Fill(ctx, conn, probe, inTx, loads, set)
	if buf, ok := ctx.Value(bufferKey{}).(*Buffer); ok && err == nil && buf.p == p {
		err = buf.addPending(ctx, groups)
	}
	return err
}

// sources returns what adds up to counter c's value in this database (its
// tables and the column it was adopted over), probed once. A dry run
// probes nothing: it takes what was last found (engine.Store.DrySources),
// so that the statement it shows reads the totals as a load would.
func (p *Plugin) sources(ctx context.Context, conn gormConn, c *counter) (countersql.Sources, error) {
	if conn.db.DryRun {
		return p.store().DrySources(c.engine())
	}
	return p.store().Sources(ctx, conn, c.engine())
}

// fitsField reports whether v fits an integer field of type t (any other
// type is for the field's setter to judge).
func fitsField(t reflect.Type, v int64) bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch k := t.Kind(); {
	case k >= reflect.Int && k <= reflect.Int64:
		return !reflect.New(t).Elem().OverflowInt(v)
	case k >= reflect.Uint && k <= reflect.Uintptr:
		return v >= 0 && !reflect.New(t).Elem().OverflowUint(uint64(v))
	}
	return true
}

func isUnsigned(f *schema.Field) bool {
	switch f.FieldType.Kind() {
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return true
	}
	return false
}

// countsMigrated checks, once per plugin and count, that the triggers
// that keep the counts among cs kept by triggers exist, so that a
// database whose schema another tool migrated fails at its first load
// naming what is missing, instead of reading counts no trigger kept.
// AutoMigrate installs them. A count found migrated is not read again;
// one found missing is read again at the next load.
func (p *Plugin) countsMigrated(db *gorm.DB, cs []*counter) error {
	return p.countsMigratedFor(db, cs, "load "+modelName(cs))
}

// modelName names the model of the first of cs, for countsMigrated's
// error.
func modelName(cs []*counter) string {
	if len(cs) == 0 || cs[0].model == nil {
		return ""
	}
	return cs[0].model.schema.Name
}

// childCountsMigrated refuses a create, update or delete of a child whose
// count, kept by triggers, has none (countsMigrated, once per count): the
// write would succeed uncounted.
func (p *Plugin) childCountsMigrated(db *gorm.DB) {
	if db.Error != nil || db.DryRun || db.Statement.Schema == nil {
		return
	}
	cs := p.countsOn(db.Statement.Schema.Table)
	if len(cs) == 0 {
		return
	}
	if err := p.countsMigratedFor(db, cs, "write "+db.Statement.Schema.Name); err != nil {
		db.AddError(err)
	}
}

// countsMigratedFor is countsMigrated; what names the statement refused.
func (p *Plugin) countsMigratedFor(db *gorm.DB, cs []*counter, what string) error {
	for _, c := range cs {
		if c.count == nil || c.opts.Hooks {
			continue
		}
		if _, ok := p.migrated.Load(c.table.Slots); ok {
			continue
		}
		count, err := p.countSpec(db, c)
		if err != nil {
			return err
		}
		missing, err := engine.CountTriggersMissing(db.Statement.Context, gormConn{db: db, follow: true}, p.dialect, count)
		if err != nil {
			return fmt.Errorf("gormcounter: read the triggers that keep %s: %w", c.name(), err)
		}
		if missing {
			return fmt.Errorf("gormcounter: %s: the triggers that keep %s (on %s) are missing: run AutoMigrate of %s with the plugin registered, which installs them and counts the rows there, or apply the statements of gormcounter.SchemaSQL (docs/migrations.md): %w",
				what, c.name(), count.Child, c.model.schema.Name, hotcounter.ErrNotMigrated)
		}
		p.migrated.Store(c.table.Slots, true)
	}
	return nil
}

// nameOverflow names model and counter in the error of a load whose
// counter value, written by other code, does not fit the field:
// database/sql's scan error names only the column ("sql: Scan error on
// column index 6, name \"votes\": converting ... value out of range", or
// "invalid syntax" for a negative value of an unsigned field). The error
// then wraps hotcounter.ErrOverflow and the scan error.
func (p *Plugin) nameOverflow(db *gorm.DB) {
	stmt := db.Statement
	if db.Error == nil || stmt.Schema == nil {
		return
	}
	msg := db.Error.Error()
	const scan = "Scan error on column index "
	i := strings.Index(msg, scan)
	if i < 0 || !(strings.Contains(msg, "out of range") || strings.Contains(msg, "invalid syntax")) {
		return
	}
	rest := msg[i+len(scan):]
	j := strings.Index(rest, `name "`)
	if j < 0 {
		return
	}
	col, _, ok := strings.Cut(rest[j+len(`name "`):], `"`)
	m, _ := p.model(db, stmt.Schema)
	if !ok || m == nil {
		return
	}
	for _, c := range m.counters {
		if c.field.DBName == col {
			db.Error = fmt.Errorf("gormcounter: %s: %w: a loaded value is beyond what a %s holds (written by other code, or by concurrent increments near the bound): %w",
				c.name(), hotcounter.ErrOverflow, c.field.FieldType, db.Error)
			return
		}
	}
}
