package gormcounter

import (
	"reflect"
	"strings"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/hotcounter/hotcounter/internal/countersql"
	"github.com/hotcounter/hotcounter/internal/engine"
	"github.com/hotcounter/hotcounter/internal/spec"
)

// Every query shape reads a counter's exact value. A sum counter has no
// column, and a rollup counter's column is behind under Live: wherever a
// statement of the model names one (Where, Order, Group, Having, Select,
// Pluck, Distinct, the conditions of Count, an update's or delete's
// Where), the name is replaced by the expression of its value (see
// countersql.ValueOf): one correlated subquery per slot table per row.
// Loads of the model's own structs are filled instead (see fill); other
// destinations (maps, Scan, Pluck, Row) get the value in the select list.

// refs is what one statement replaces: the model's table, its counters
// that a plain reference cannot read, and the SQL of each one's value by
// column name, rendered the first time a reference needs it.
type refs struct {
	db     *gorm.DB
	p      *Plugin
	d      engine.Dialect
	table  string
	m      *model
	cols   []string
	values map[string]string
	err    error // from rendering a value; the statement fails with it
	// qualified is set for a model the statement joins (Joins("Author")):
	// table is then the join's alias, and only references qualified by it
	// are its counters.
	qualified bool
}

// statementRefs returns the replacements for the statement's model, or nil
// when none of its counters needs one.
func (p *Plugin) statementRefs(db *gorm.DB) (*refs, error) {
	stmt := db.Statement
	if db.Error != nil || stmt.Schema == nil || stmt.SQL.Len() > 0 || stmt.Table == "" {
		return nil, nil
	}
	m, err := p.model(db, stmt.Schema)
	if err != nil || m == nil {
		return nil, err
	}
	live := isLive(stmt.Context)
	r := &refs{db: db, p: p, d: p.dialect, table: stmt.Table, m: m, values: map[string]string{}}
	for _, c := range m.counters {
		if c.opts.Mode == spec.Sum || (live && c.opts.Mode.HasColumn()) {
			r.cols = append(r.cols, c.field.DBName) // else the column is the value a plain query reads
		}
	}
	if len(r.cols) == 0 {
		return nil, nil
	}
	return r, nil
}

// joinedRefs returns the replacements for the models the statement joins
// by relation (Joins("Author"), Joins("Author.Company")), under the
// aliases GORM gives them ("Author", "Author__Company"): a condition or an
// order on Author.followers reads the author's exact followers.
func (p *Plugin) joinedRefs(db *gorm.DB) ([]*refs, error) {
	stmt := db.Statement
	if len(stmt.Joins) == 0 || db.Error != nil || stmt.Schema == nil || stmt.SQL.Len() > 0 {
		return nil, nil
	}
	live := isLive(stmt.Context)
	var out []*refs
	for _, j := range stmt.Joins {
		rels := joinedRelations(stmt.Schema, j.Name)
		if rels == nil {
			continue
		}
		jm, err := p.model(db, rels[len(rels)-1].FieldSchema)
		if err != nil {
			return nil, err
		}
		if jm == nil {
			continue
		}
		alias := j.Alias
		if alias == "" {
			alias = strings.ReplaceAll(j.Name, ".", "__")
		}
		r := &refs{db: db, p: p, d: p.dialect, table: alias, m: jm, values: map[string]string{}, qualified: true}
		for _, c := range jm.counters {
			if c.opts.Mode == spec.Sum || (live && c.opts.Mode.HasColumn()) {
				r.cols = append(r.cols, c.field.DBName)
			}
		}
		if len(r.cols) > 0 {
			out = append(out, r)
		}
	}
	return out, nil
}

// value returns the SQL of the value of the counter with column col.
func (r *refs) value(col string) string {
	if v, ok := r.values[col]; ok {
		return v
	}
	c := r.m.lookup(col)
	read, err := r.p.sources(r.db.Statement.Context, gormConn{db: r.db}, c)
	if err != nil {
		r.err = err
		return ""
	}
	t := c.table
	t.Parent = r.table
	table := r.table
	v := renderSQL(r.db, func(w countersql.Writer) { r.d.ValueOf(w, t, read, table) })
	r.values[col] = v
	return v
}

// renderSQL renders a statement that binds no argument as text, quoted
// the dialect's way.
func renderSQL(db *gorm.DB, build func(countersql.Writer)) string {
	s := &gorm.Statement{DB: db, Context: db.Statement.Context, Clauses: map[string]clause.Clause{}}
	build(builderWriter{s})
	return s.SQL.String()
}

// rewriteRefs runs before a query and a Row (Scan, Pluck, Rows) is built,
// and replaces the references to counters, in the select list too where
// the rows are not filled.
func (p *Plugin) rewriteRefs(db *gorm.DB) { p.replaceRefs(db, true) }

// rewriteWriteRefs runs before an update and a delete: their conditions.
func (p *Plugin) rewriteWriteRefs(db *gorm.DB) { p.replaceRefs(db, false) }

func (p *Plugin) replaceRefs(db *gorm.DB, selects bool) {
	r, err := p.statementRefs(db)
	if err != nil {
		db.AddError(err)
		return
	}
	joined, err := p.joinedRefs(db)
	if err != nil {
		db.AddError(err)
		return
	}
	if r != nil {
		r.replace(db, selects)
	}
	for _, j := range joined {
		j.replace(db, selects)
	}
}

// replace replaces r's references in the statement's clauses: its
// conditions; for a query (selects), its order, grouping and, for the
// statement's own model where rows are not filled, its select list.
func (r *refs) replace(db *gorm.DB, selects bool) {
	stmt := db.Statement
	if c, ok := stmt.Clauses["WHERE"]; ok {
		if w, ok := c.Expression.(clause.Where); ok {
			w.Exprs = r.exprs(w.Exprs)
			c.Expression = w
			stmt.Clauses["WHERE"] = c
		}
	}
	if !selects {
		if r.err != nil {
			db.AddError(r.err)
		}
		return
	}
	if c, ok := stmt.Clauses["ORDER BY"]; ok {
		if o, ok := c.Expression.(clause.OrderBy); ok {
			for i, col := range o.Columns {
				o.Columns[i].Column = r.column(col.Column, false)
			}
			o.Expression = r.expr(o.Expression)
			c.Expression = o
			stmt.Clauses["ORDER BY"] = c
		}
	}
	if c, ok := stmt.Clauses["GROUP BY"]; ok {
		if g, ok := c.Expression.(clause.GroupBy); ok {
			byCounter := false
			for i, col := range g.Columns {
				g.Columns[i] = r.column(col, false)
				byCounter = byCounter || g.Columns[i] != col
			}
			if !r.d.MySQL() || !byCounter {
				// Grouped by a counter, MySQL and MariaDB resolve its name
				// in HAVING to the select list's value of that name
				// (selectValues puts each counter there under its name),
				// and refuse the value's correlated subquery: the
				// parent's key is not grouped.
				g.Having = r.exprs(g.Having)
			}
			c.Expression = g
			stmt.Clauses["GROUP BY"] = c
		}
	}
	if _, filled := stmt.Settings.Load(fillPlanKey); !filled && !r.qualified {
		r.selectValues(db)
	}
	if r.err != nil {
		db.AddError(r.err)
	}
}

// selectValues makes the select list of a statement whose rows are not
// filled (maps, Scan, Pluck, Row) return each counter's value under its
// name.
func (r *refs) selectValues(db *gorm.DB) {
	stmt := db.Statement
	if c, ok := stmt.Clauses["SELECT"]; ok {
		sel, ok := c.Expression.(clause.Select)
		if !ok {
			return
		}
		for i, col := range sel.Columns {
			sel.Columns[i] = r.column(col, true)
		}
		sel.Expression = r.expr(sel.Expression)
		c.Expression = sel
		stmt.Clauses["SELECT"] = c
		return
	}
	if len(stmt.Selects) > 0 {
		cols := make([]clause.Column, 0, len(stmt.Selects))
		for _, name := range stmt.Selects {
			if f := stmt.Schema.LookUpField(name); f != nil && r.m.lookup(f.DBName) == nil {
				cols = append(cols, clause.Column{Name: f.DBName})
				continue
			}
			cols = append(cols, r.column(clause.Column{Name: name, Raw: r.m.lookup(name) == nil}, true))
		}
		stmt.AddClause(clause.Select{Distinct: stmt.Distinct, Columns: cols})
		return
	}
	// Every column, and the counters' values beside them.
	table := r.table
	cols := []clause.Column{{Name: renderSQL(db, func(w countersql.Writer) { w.Ident(table); w.WriteString(".*") }), Raw: true}}
	for _, name := range r.cols {
		cols = append(cols, r.column(clause.Column{Name: name}, true))
	}
	stmt.AddClause(clause.Select{Distinct: stmt.Distinct, Columns: cols})
}

// column returns col with its references to counters replaced; in a
// select list (as) a lone counter keeps its name as the value's.
func (r *refs) column(col clause.Column, as bool) clause.Column {
	if !col.Raw {
		if col.Table != "" && col.Table != clause.CurrentTable && col.Table != r.table || r.qualified && col.Table != r.table {
			return col
		}
		c := r.m.lookup(col.Name)
		if c == nil || !containsCol(r.cols, c.field.DBName) {
			return col
		}
		name := r.value(c.field.DBName)
		if as {
			alias := col.Alias
			if alias == "" {
				alias = c.field.DBName
			}
			name += " AS " + r.d.Quote(alias)
		}
		return clause.Column{Name: name, Raw: true}
	}
	if !as {
		if text, n := r.rewrite(col.Name); n > 0 {
			return clause.Column{Name: text, Raw: true, Alias: col.Alias}
		}
		return col
	}
	// A select list: an item that is a counter alone keeps its name.
	items := r.d.SplitList(col.Name)
	changed := false
	for i, item := range items {
		text, n := r.rewrite(item)
		if n == 0 {
			continue
		}
		changed = true
		if c := r.m.lookup(strings.TrimSpace(item)); c != nil {
			text += " AS " + r.d.Quote(c.field.DBName)
		}
		items[i] = text
	}
	if !changed {
		return col
	}
	return clause.Column{Name: strings.Join(items, ","), Raw: true, Alias: col.Alias}
}

// rewrite returns sql with each reference to a counter replaced by its
// value, and how many it replaced.
func (r *refs) rewrite(sql string) (string, int) {
	var b strings.Builder
	n := 0
	pieces := r.d.ColumnRefs
	if r.qualified {
		pieces = r.d.QualifiedColumnRefs
	}
	for _, piece := range pieces(sql, r.table, r.cols) {
		if piece.Column == "" {
			b.WriteString(piece.Text)
			continue
		}
		b.WriteString(r.value(piece.Column))
		n++
	}
	return b.String(), n
}

func (r *refs) exprs(es []clause.Expression) []clause.Expression {
	if len(es) == 0 {
		return es
	}
	out := make([]clause.Expression, len(es))
	for i, e := range es {
		out[i] = r.expr(e)
	}
	return out
}

// expr returns e with its references to counters replaced: in SQL text
// (Where("likes > ?")), in the columns of struct and map conditions
// (Where(&Post{Likes: 5}) is an Eq), and inside AND, OR and NOT.
func (r *refs) expr(e clause.Expression) clause.Expression {
	switch v := e.(type) {
	case clause.Expr:
		if sql, n := r.rewrite(v.SQL); n > 0 {
			v.SQL = sql
		}
		return v
	case clause.NamedExpr:
		if sql, n := r.rewrite(v.SQL); n > 0 {
			v.SQL = sql
		}
		return v
	case clause.Where:
		v.Exprs = r.exprs(v.Exprs)
		return v
	case clause.AndConditions:
		v.Exprs = r.exprs(v.Exprs)
		return v
	case clause.OrConditions:
		v.Exprs = r.exprs(v.Exprs)
		return v
	case clause.NotConditions:
		v.Exprs = r.exprs(v.Exprs)
		return v
	case clause.Eq:
		v.Column = r.anyColumn(v.Column)
		return v
	case clause.Neq:
		v.Column = r.anyColumn(v.Column)
		return v
	case clause.Gt:
		v.Column = r.anyColumn(v.Column)
		return v
	case clause.Gte:
		v.Column = r.anyColumn(v.Column)
		return v
	case clause.Lt:
		v.Column = r.anyColumn(v.Column)
		return v
	case clause.Lte:
		v.Column = r.anyColumn(v.Column)
		return v
	case clause.IN:
		v.Column = r.anyColumn(v.Column)
		return v
	case clause.Like:
		v.Column = r.anyColumn(v.Column)
		return v
	}
	return e
}

// anyColumn is column for the column of a condition, a clause.Column or a
// column name.
func (r *refs) anyColumn(c any) any {
	switch v := c.(type) {
	case clause.Column:
		return r.column(v, false)
	case string:
		if col := r.column(clause.Column{Name: v}, false); col.Raw {
			return col
		}
	}
	return c
}

// keepCounterColumns is dropDerivedColumns for a Row (Scan, Rows): the
// destination struct's columns, the counters among them included, which
// rewriteRefs then selects as their values.
func keepCounterColumns(db *gorm.DB, m *model) {
	stmt := db.Statement
	if !stmt.ReflectValue.IsValid() || !m.hasMode(spec.Sum) || (!db.QueryFields && rowsAreModel(stmt)) {
		return
	}
	if t := rowType(stmt); t == nil || t.Kind() != reflect.Struct {
		return
	}
	if ds := destSchema(db); ds != nil {
		stmt.Selects = append([]string(nil), ds.DBNames...)
	}
}

func containsCol(cols []string, col string) bool {
	for _, c := range cols {
		if c == col {
			return true
		}
	}
	return false
}
