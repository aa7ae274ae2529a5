package entcounter

import (
	"embed"
	"encoding/json"
	"fmt"
	"strings"
	"text/template"

	"entgo.io/ent/entc"
	"entgo.io/ent/entc/gen"
	"entgo.io/ent/schema/field"

	"github.com/hotcounter/hotcounter/internal/countersql"
	"github.com/hotcounter/hotcounter/internal/entrt"
	"github.com/hotcounter/hotcounter/internal/spec"
)

//go:embed template/hotcounter.tmpl
var templates embed.FS

// Extension returns the entc extension that generates what counters need:
// a HotCounter method on the generated config (the driver and the list of
// counters), the fill after every load, and the omission of sum counters
// (which have no column) from selects. At generation it checks every
// counter's declaration and its slot schema, and prints the schema to add
// when one is missing.
//
//	entc.Generate("./schema", &gen.Config{}, entc.Extensions(entcounter.Extension()))
func Extension() entc.Extension { return &extension{hooked: map[string]bool{}} }

// extension is one generation's extension. hooked holds the names of the
// types of the graph being generated whose writes change a count (see
// hookedTypes): type-scoped templates cannot reach the graph, so the
// generation hook fills it before the templates run.
type extension struct {
	entc.DefaultExtension
	hooked map[string]bool
}

func (e *extension) Templates() []*gen.Template {
	hooked := e.hooked
	return []*gen.Template{
		gen.MustParse(gen.NewTemplate("hotcounter").
			Funcs(template.FuncMap{
				"hotCounterDefs":     graphDefs,
				"hotCounterHooked":   hookedTypes,
				"hotCounterIsHooked": func(t *gen.Type) bool { return hooked[t.Name] },
				"hotCounterMarks":    func(t *gen.Type) bool { return len(counterFields(t)) > 0 || hooked[t.Name] },
				"hotCounterFields":   counterFields,
				"hotCounterHasSum":   hasSum,
				"hotCounterIsRollup": func(f *gen.Field) bool {
					a, _ := annotationOfField(f)
					return a.Rollup
				},
				"hotCounterHasRollup": func(t *gen.Type) bool {
					for _, f := range counterFields(t) {
						if a, _ := annotationOfField(f); a.Rollup {
							return true
						}
					}
					return false
				},
				"hotCounterDefsOf": defsOfType,
				"hotCounterBuffers": func(g *gen.Graph, t *gen.Type) bool {
					for _, d := range defsOfType(g, t) {
						if d.Count == nil {
							return true
						}
					}
					return false
				},
				"hotCounterIDImports": idImports,
			}).
			ParseFS(templates, "template/hotcounter.tmpl")),
	}
}

func (e *extension) Hooks() []gen.Hook {
	return []gen.Hook{func(next gen.Generator) gen.Generator {
		return gen.GenerateFunc(func(orig *gen.Graph) error {
			g, err := withSlotSchemas(orig)
			if err != nil {
				return err
			}
			if _, err := defsOf(g); err != nil {
				return err
			}
			clear(e.hooked)
			for _, name := range hookedTypes(g) {
				e.hooked[name] = true
			}
			if err := next.Generate(g); err != nil {
				return err
			}
			requireSumCounters(orig)
			return nil
		})
	}}
}

// requireSumCounters marks the sum counters of g required, once ent's code
// is generated, for the extensions whose hooks run before this one and
// read the graph after generating (entgql writes its GraphQL schema then).
// A sum counter is Optional in the schema only so that a create may leave
// it out (its hook takes the value out of the create, and ent checks
// required fields after hooks); every load has its value. So entgql, when
// listed before this extension, types it Int!, with no isNil predicate
// and no clear in its update input.
func requireSumCounters(g *gen.Graph) {
	for _, n := range g.Nodes {
		for _, f := range counterFields(n) {
			if a, _ := annotationOfField(f); !a.Rollup && !a.KeepColumn {
				f.Optional = false
			}
		}
	}
}

func annotationOfField(f *gen.Field) (annotation, bool) {
	raw, ok := f.Annotations[annotation{}.Name()]
	if !ok {
		return annotation{}, false
	}
	var a annotation
	b, _ := json.Marshal(raw)
	if err := json.Unmarshal(b, &a); err != nil {
		return annotation{}, false
	}
	return a, true
}

// gqlOrderField is the GraphQL order field entgql's annotation gives f
// (entgql.OrderField), if any.
func gqlOrderField(f *gen.Field) string {
	raw, ok := f.Annotations[gqlSkip{}.Name()]
	if !ok {
		return ""
	}
	var a struct{ OrderField string }
	b, _ := json.Marshal(raw)
	_ = json.Unmarshal(b, &a)
	return a.OrderField
}

func slotsAnnotationOf(t *gen.Type) (slotsAnnotation, bool) {
	raw, ok := t.Annotations[slotsAnnotation{}.Name()]
	if !ok {
		return slotsAnnotation{}, false
	}
	var a slotsAnnotation
	b, _ := json.Marshal(raw)
	if err := json.Unmarshal(b, &a); err != nil {
		return slotsAnnotation{}, false
	}
	return a, true
}

// defsOfType returns the counters of t, for its typed methods.
func defsOfType(g *gen.Graph, t *gen.Type) []entrt.Def {
	var out []entrt.Def
	for _, d := range graphDefs(g) {
		if d.Type == t.Name {
			out = append(out, d)
		}
	}
	return out
}

// idImports returns the packages of the id types of the schemas with
// counters, which their typed methods name (uuid.UUID), each once.
func idImports(g *gen.Graph) []string {
	var out []string
	seen := map[string]bool{}
	for _, n := range g.Nodes {
		if len(counterFields(n)) == 0 || n.ID == nil || n.ID.Type == nil {
			continue
		}
		if pkg := n.ID.Type.PkgPath; pkg != "" && !seen[pkg] {
			seen[pkg] = true
			out = append(out, pkg)
		}
	}
	return out
}

// counterFields returns the counter fields of t.
func counterFields(t *gen.Type) []*gen.Field {
	var out []*gen.Field
	for _, f := range t.Fields {
		if _, ok := annotationOfField(f); ok {
			out = append(out, f)
		}
	}
	return out
}

func hasSum(t *gen.Type) bool {
	for _, f := range t.Fields {
		if a, ok := annotationOfField(f); ok && !a.Rollup {
			return true
		}
	}
	return false
}

// hookedTypes returns the schemas whose writes change a count: kept by
// hooks, the child and the parent (whose edge setters move children); kept
// by triggers, the child (both sides of an M2M edge), whose writes the hook
// refuses while the triggers are missing. The generated config registers
// CountHook on each.
func hookedTypes(g *gen.Graph) []string {
	var out []string
	seen := map[string]bool{}
	for _, d := range graphDefs(g) {
		if d.Count == nil {
			continue
		}
		// A count kept by triggers too: its hook refuses a write of its
		// rows while its triggers are missing (Runtime.ChildCountsMigrated),
		// but not an edge schema's (a composite id has no row keys).
		types := []string{d.Count.Type}
		if d.Count.Hooks || d.Count.Across != nil {
			types = append(types, d.Type)
		}
		for _, t := range types {
			if !d.Count.Hooks && !singleID(g, t) {
				continue
			}
			if !seen[t] {
				seen[t] = true
				out = append(out, t)
			}
		}
	}
	return out
}

// singleID reports whether the schema named name has one id field.
func singleID(g *gen.Graph, name string) bool {
	for _, n := range g.Nodes {
		if n.Name == name {
			return n.ID != nil && !n.HasCompositeID()
		}
	}
	return false
}

func graphDefs(g *gen.Graph) []entrt.Def {
	defs, _ := defsOf(g)
	return defs
}

// defsOf resolves every counter of the graph to its tables, or explains
// what is wrong with a declaration.
func defsOf(g *gen.Graph) ([]entrt.Def, error) {
	var (
		defs []entrt.Def
		errs []string
	)
	for _, n := range g.Nodes {
		for _, f := range counterFields(n) {
			a, _ := annotationOfField(f)
			where := n.Name + "." + f.Name
			if a.Err != "" {
				errs = append(errs, fmt.Sprintf("%s: %s", where, a.Err))
				continue
			}
			if !n.HasOneFieldID() {
				errs = append(errs, fmt.Sprintf("%s: counters need a schema with a single id field", where))
				continue
			}
			if order := gqlOrderField(f); order != "" && !a.Rollup {
				errs = append(errs, fmt.Sprintf("%s: entgql.OrderField(%q) on a sum counter: ordering a GraphQL page by it sums the slot rows of every row the database sorts; declare it Rollup() to order by its column, which takes an index", where, order))
				continue
			}
			prefix := spec.Singular(n.Table())
			d := entrt.Def{
				Type: n.Name, Field: f.Name, StructField: f.StructField(), Table: n.Table(), Key: n.ID.StorageKey(),
				SlotTable: prefix + "_" + f.Name + tableSuffix(a.Append), Owner: prefix + "_id",
				Slots: a.Slots, AutoSlots: a.AutoSlots, Rollup: a.Rollup, Append: a.Append, Precreate: a.Precreate, SkipLocked: a.SkipLocked, KeepColumn: a.KeepColumn, Guarded: a.Guarded,
			}
			if a.Counts != "" {
				c, err := countDefOf(n, a)
				if err != nil {
					errs = append(errs, fmt.Sprintf("%s: %v", where, err))
					continue
				}
				if bad := countersql.UnknownColumns(a.Where, c.Columns); len(bad) > 0 {
					errs = append(errs, fmt.Sprintf("%s: Where(%q) names %s, which the rows it counts (table %s) do not have; their columns: %s",
						where, a.Where, strings.Join(bad, ", "), c.Table, strings.Join(c.Columns, ", ")))
					continue
				}
				d.Count = c
			}
			var slot *gen.Type
			for _, s := range g.Nodes {
				if sa, ok := slotsAnnotationOf(s); ok && sa.Owner == n.Name && sa.Field == f.Name && sa.Deltas == a.Append {
					slot = s
				}
			}
			switch {
			case slot == nil:
				kind, typ, mixin := "slot", n.Name+pascal(f.Name)+"Slot", "SlotsOf"
				if a.Append {
					kind, typ, mixin = "delta", n.Name+pascal(f.Name)+"Delta", "DeltasOf"
				}
				errs = append(errs, fmt.Sprintf("%s: the counter has no %s table schema; add this file to the schema package:\n\n"+
					"\ttype %[3]s struct{ ent.Schema }\n\n"+
					"\tfunc (%[3]s) Mixin() []ent.Mixin { return []ent.Mixin{entcounter.%[4]s(%[5]s.Type, %[6]q)} }\n",
					where, kind, typ, mixin, n.Name, f.Name))
				continue
			case slot.Table() != d.SlotTable:
				errs = append(errs, fmt.Sprintf("%s: its slot schema %s uses table %q, but the counter expects %q (the singular parent table, the field, \"slots\")",
					where, slot.Name, slot.Table(), d.SlotTable))
				continue
			}
			defs = append(defs, d)
		}
	}
	errs = append(errs, orphanSlots(g)...)
	if len(errs) > 0 {
		return nil, fmt.Errorf("entcounter: %s", strings.Join(errs, "\nentcounter: "))
	}
	return defs, nil
}

// orphanSlots explains every slot (or delta) table schema whose counter
// does not exist: a SlotsOf for a field that is no counter, or one of
// another mode.
func orphanSlots(g *gen.Graph) []string {
	var errs []string
	for _, s := range g.Nodes {
		sa, ok := slotsAnnotationOf(s)
		if !ok {
			continue
		}
		mixin := "SlotsOf"
		if sa.Deltas {
			mixin = "DeltasOf"
		}
		found, otherMode := false, false
		for _, n := range g.Nodes {
			if n.Name != sa.Owner {
				continue
			}
			for _, f := range counterFields(n) {
				if a, _ := annotationOfField(f); f.Name == sa.Field {
					found = found || a.Append == sa.Deltas
					otherMode = otherMode || a.Append != sa.Deltas
				}
			}
		}
		switch {
		case !found && otherMode:
			kind, table := "an Append counter, whose table is a delta table", "slot"
			if sa.Deltas {
				kind, table = "not an Append counter: its table is a slot table", "delta"
			}
			errs = append(errs, fmt.Sprintf("%s.%s is %s, but %s declares a %s table with %s(%s.Type, %q): remove the schema (the extension generates the right one)",
				sa.Owner, sa.Field, kind, s.Name, table, mixin, sa.Owner, sa.Field))
		case !found:
			errs = append(errs, fmt.Sprintf("%s: %s(%s.Type, %q) declares the table of a counter that %s does not declare "+
				"(no entcounter.Counter(%q%s) in its Mixin): remove the schema, or declare the counter", s.Name, mixin, sa.Owner, sa.Field,
				sa.Owner, sa.Field, map[bool]string{true: ", entcounter.Append()", false: ""}[sa.Deltas]))
		}
	}
	return errs
}

func pascal(s string) string {
	var b strings.Builder
	for _, part := range strings.Split(s, "_") {
		if part != "" {
			b.WriteString(strings.ToUpper(part[:1]) + part[1:])
		}
	}
	return b.String()
}

// tableSuffix ends the name of a counter's table: slots, or deltas for an
// append counter.
func tableSuffix(deltas bool) string {
	if deltas {
		return "_deltas"
	}
	return "_slots"
}

// countDefOf resolves a Counts declaration to the child table its O2M edge
// reaches, to the join table of its M2M edge, or through two O2M edges
// ("children.products") to the rows of the second.
func countDefOf(n *gen.Type, a annotation) (*entrt.CountDef, error) {
	if first, second, ok := strings.Cut(a.Counts, "."); ok {
		return viaCountDef(n, a, first, second)
	}
	var e *gen.Edge
	var countable []string
	for _, ed := range n.Edges {
		if ed.O2M() || ed.M2M() {
			countable = append(countable, ed.Name)
		}
		if ed.Name == a.Counts {
			e = ed
		}
	}
	switch {
	case e == nil:
		return nil, fmt.Errorf("Counts(%q): %s has no edge %q (its O2M and M2M edges: %s)", a.Counts, n.Name, a.Counts, strings.Join(countable, ", "))
	case e.M2M():
		return m2mCountDef(n, e, a)
	case !e.O2M():
		return nil, fmt.Errorf("Counts(%q): the edge is %s; a count needs an O2M edge (edge.To with many children) or an M2M one", a.Counts, e.Rel.Type)
	}
	return o2mCountDef(e, a)
}

// o2mCountDef resolves a count of the rows an O2M edge reaches.
func o2mCountDef(e *gen.Edge, a annotation) (*entrt.CountDef, error) {
	child := e.Type
	key := ""
	switch {
	case child.HasOneFieldID():
		key = child.ID.StorageKey()
	case a.Hooks:
		// The hooks name the rows a write changes by their id.
		return nil, fmt.Errorf("Counts(%q): a count kept by hooks needs %s to have a single id field; "+
			"keep it by triggers (remove ByHooks()), which count rows of any key", a.Counts, child.Name)
	}
	c := &entrt.CountDef{Edge: e.Name, Type: child.Name, Hooks: a.Hooks, Table: child.Table(), Key: key, Ref: e.Rel.Column(), Where: a.Where, Total: a.Total,
		SoftDelete: softDeleteColumn(child)}
	seen := map[string]bool{}
	add := func(col string) {
		if !seen[col] {
			seen[col] = true
			c.Columns = append(c.Columns, col)
		}
	}
	if c.Key != "" {
		add(c.Key)
	}
	for _, f := range child.Fields {
		if ca, ok := annotationOfField(f); ok && !ca.Rollup {
			continue // a sum counter has no column
		}
		add(f.StorageKey())
	}
	for _, fk := range child.ForeignKeys {
		add(fk.Field.StorageKey())
	}
	if a.Total != "" && !seen[a.Total] {
		return nil, fmt.Errorf("Total(%q): %s has no field %q (name its column)", a.Total, child.Name, a.Total)
	}
	return c, nil
}

// softDeleteField is the field by which a count recognises ent's
// documented soft-delete mixin (https://entgo.io/docs/interceptors#soft-delete):
// an optional time field of this name on the child schema marks a row
// soft-deleted when it is set, and such a row is not counted, as GORM's
// gorm.DeletedAt is not.
const softDeleteField = "delete_time"

// softDeleteColumn returns the column of t's softDeleteField, or "" when t
// has none.
func softDeleteColumn(t *gen.Type) string {
	for _, f := range t.Fields {
		if f.Name == softDeleteField && f.Optional && f.Type.Type == field.TypeTime {
			return f.StorageKey()
		}
	}
	return ""
}

// viaCountDef resolves a count over two O2M edges, Counts("children.products"):
// the rows the second edge reaches from every node the first reaches
// from the parent. Triggers keep it.
func viaCountDef(n *gen.Type, a annotation, first, second string) (*entrt.CountDef, error) {
	o2m := func(t *gen.Type, name string) (*gen.Edge, error) {
		for _, e := range t.Edges {
			if e.Name == name {
				if !e.O2M() {
					return nil, fmt.Errorf("Counts(%q): %s.%s is %s; a count over two levels needs two O2M edges", a.Counts, t.Name, name, e.Rel.Type)
				}
				return e, nil
			}
		}
		return nil, fmt.Errorf("Counts(%q): %s has no edge %q", a.Counts, t.Name, name)
	}
	if a.Hooks {
		return nil, fmt.Errorf("Counts(%q): a count over two levels is kept by triggers; remove ByHooks()", a.Counts)
	}
	e1, err := o2m(n, first)
	if err != nil {
		return nil, err
	}
	e2, err := o2m(e1.Type, second)
	if err != nil {
		return nil, err
	}
	if !e1.Type.HasOneFieldID() {
		return nil, fmt.Errorf("Counts(%q): %s needs a single id field", a.Counts, e1.Type.Name)
	}
	c, err := o2mCountDef(e2, a)
	if err != nil {
		return nil, err
	}
	c.Edge = a.Counts
	c.Via = &countersql.Via{Table: e1.Type.Table(), Key: e1.Type.ID.StorageKey(), Ref: e1.Rel.Column()}
	return c, nil
}

// m2mCountDef resolves a count through an M2M edge: the rows of its join
// table that name the parent (Rel.Columns holds the edge owner's column
// first, the inverse edge's second). Triggers keep it: ent writes the
// join table from the edge setters of both sides, with no mutation of
// its own for a hook. Through an edge schema it is the count of the edge
// schema's rows that name the parent: the O2M edge ent adds to the
// parent for it (edgeSchemaCountDef).
func m2mCountDef(n *gen.Type, e *gen.Edge, a annotation) (*entrt.CountDef, error) {
	if through := edgeSchemaOf(e); through != nil {
		return edgeSchemaCountDef(n, e, through, a)
	}
	switch {
	case a.Hooks && e.Bidi:
		return nil, fmt.Errorf("Counts(%q): a count through the bidirectional M2M edge %s (join table %s) is kept by triggers; remove ByHooks()", a.Counts, e.Name, e.Rel.Table)
	case a.Total != "":
		return nil, fmt.Errorf("Total(%q): the M2M join table %s has no column but the two keys", a.Total, e.Rel.Table)
	case len(e.Rel.Columns) != 2:
		return nil, fmt.Errorf("Counts(%q): the join table %s needs one column per side", a.Counts, e.Rel.Table)
	}
	own, other := e.Rel.Columns[0], e.Rel.Columns[1]
	if e.IsInverse() {
		own, other = other, own
	}
	back := ""
	if e.Ref != nil {
		back = e.Ref.Name
	}
	return &entrt.CountDef{
		Edge: e.Name, Back: back, Type: e.Type.Name, Hooks: a.Hooks, Table: e.Rel.Table, Ref: own, Columns: []string{own, other}, Where: a.Where, Total: a.Total,
		Across: &countersql.Across{Ref: other, Table: e.Type.Table(), Key: e.Type.ID.StorageKey()},
	}, nil
}

// edgeSchemaOf returns the edge schema an M2M edge goes through, or nil.
func edgeSchemaOf(e *gen.Edge) *gen.Type {
	switch {
	case e.Through != nil:
		return e.Through
	case e.Ref != nil && e.Ref.Through != nil:
		return e.Ref.Through
	}
	return nil
}

// edgeSchemaCountDef resolves a count through the M2M edge e of n that
// goes through the edge schema through: the rows of the edge schema (its
// table is the edge's join table) that name the parent, as the O2M edge
// from n to the edge schema, which ent adds to n, counts them. Triggers
// keep it whatever the edge schema's key (composite ones included): ent
// writes those rows from the M2M edge setters of both sides as well as
// from the edge schema's own mutations, and the setters run no mutation
// of the edge schema for a hook to see.
func edgeSchemaCountDef(n *gen.Type, e *gen.Edge, through *gen.Type, a annotation) (*entrt.CountDef, error) {
	if a.Hooks {
		return nil, fmt.Errorf("Counts(%q): a count through the edge schema %s is kept by triggers: the M2M edge setters write its rows "+
			"with no mutation of %[2]s for a hook to see; remove ByHooks()", a.Counts, through.Name)
	}
	own := e.Rel.Columns[0]
	if e.IsInverse() {
		own = e.Rel.Columns[1]
	}
	for _, o := range n.Edges {
		if o.Type == through && o.O2M() && o.Rel.Column() == own {
			c, err := o2mCountDef(o, a)
			if err != nil {
				return nil, err
			}
			c.Edge = e.Name
			return c, nil
		}
	}
	return nil, fmt.Errorf("Counts(%q): no O2M edge of %s reaches the rows of the edge schema %s by %s", a.Counts, n.Name, through.Name, own)
}
