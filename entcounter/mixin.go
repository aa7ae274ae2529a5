package entcounter

import (
	"context"
	"crypto/md5"
	"fmt"
	"reflect"

	"entgo.io/ent"
	"entgo.io/ent/dialect/entsql"
	"entgo.io/ent/entc/gen"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/edge"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/index"
	"entgo.io/ent/schema/mixin"

	"github.com/hotcounter/hotcounter"
	"github.com/hotcounter/hotcounter/internal/countersql"
	"github.com/hotcounter/hotcounter/internal/entrt"
	"github.com/hotcounter/hotcounter/internal/spec"
)

// Counter declares the int64 field name as a sharded counter on the schema
// whose Mixin returns it. Its slot table needs a schema of its own, declared
// with [SlotsOf]; the extension's error message prints it when missing.
//
// A sum counter (the default) has no column on the parent; a [Rollup]
// counter keeps its cached total in a column NOT NULL DEFAULT 0. A bad
// option is reported by the extension at generation, naming the schema and
// the field.
func Counter(name string, opts ...Option) CounterMixin {
	o := spec.Options{Slots: spec.DefaultSlots}
	for i, opt := range opts {
		if opt == nil {
			return CounterMixin{name: name, ann: annotationOf(o, fmt.Errorf("%w: option %d of %d is nil", hotcounter.ErrInvalidCounter, i+1, len(opts)))}
		}
		opt(&o)
	}
	return CounterMixin{name: name, ann: annotationOf(o, o.ValidateAs(spec.EntNames))}
}

// CounterMixin is the mixin [Counter] returns: it adds the counter's field,
// its hooks and its interceptor to the schema whose Mixin returns it.
type CounterMixin struct {
	mixin.Schema
	name  string
	ann   annotation
	extra []schema.Annotation
}

// Annotate returns the counter with anns added to its field, as ent's
// field.Annotations does for a field declared in Fields: the field is
// declared by the mixin, so this is where other extensions' field
// annotations go. With entgql:
//
//	entcounter.Counter("views", entcounter.Rollup()).Annotate(entgql.OrderField("VIEWS"))
//
// The extension refuses entgql.OrderField on a sum counter: ordering a
// GraphQL page by it would sum the slot rows of every row the database
// sorts. Order by a [Rollup] counter, whose column takes an index.
func (m CounterMixin) Annotate(anns ...schema.Annotation) CounterMixin {
	m.extra = append(append([]schema.Annotation(nil), m.extra...), anns...)
	return m
}

// Fields implements ent.Mixin: the counter's int64 field.
func (m CounterMixin) Fields() []ent.Field {
	f := field.Int64(m.name).Default(0).Annotations(append([]schema.Annotation{m.ann}, m.extra...)...)
	switch {
	case m.ann.KeepColumn:
		// The column it was adopted over, kept while it holds counts.
		f = f.Optional()
	case !m.ann.Rollup:
		// No column: the value lives in the slot rows. Optional, so that
		// creating a parent never requires it: the hook takes its value
		// out of the create, and ent checks required fields after hooks.
		f = f.Optional().Annotations(entsql.Skip())
	}
	return []ent.Field{f}
}

// Hooks implements ent.Mixin: the hook that turns the counter's writes
// into slot writes.
func (m CounterMixin) Hooks() []ent.Hook {
	return []ent.Hook{counterHook(m.name, m.ann)}
}

// Interceptors refuses a query of the schema when its code was generated
// without the extension: ent would select the sum counter's column, which
// does not exist, and fail with the database's error.
func (m CounterMixin) Interceptors() []ent.Interceptor {
	return []ent.Interceptor{configuredCheck{field: m.name}}
}

// configuredCheck is the interceptor of Interceptors. It is entcounter's
// own (entrt.Own): an update by id does not read its row through it.
type configuredCheck struct{ field string }

func (configuredCheck) HotCounterOwn() {}

func (c configuredCheck) Intercept(next ent.Querier) ent.Querier {
	return ent.QuerierFunc(func(ctx context.Context, q ent.Query) (ent.Value, error) {
		if _, ok := q.(entrt.Source); !ok {
			return nil, fmt.Errorf("a query of %T, whose schema declares the counter %s: %w", q, c.field, errNotGenerated)
		}
		return next.Query(ctx, q)
	})
}

// SlotsOf declares the slot table of the counter field of the owner schema
// (pass the method value Owner.Type, as in edge.To). The schema that returns
// it needs nothing else:
//
//	type PostLikesSlot struct{ ent.Schema }
//
//	func (PostLikesSlot) Mixin() []ent.Mixin { return []ent.Mixin{entcounter.SlotsOf(Post.Type, "likes")} }
//
// It creates the table <singular owner table>_<field>_slots with the owner
// key column <singular owner table>_id, slot and n, ent's surrogate id, a
// unique index on (owner key, slot) and a foreign key ON DELETE CASCADE:
// the layout gormcounter uses, plus the id ent needs.
func SlotsOf(owner any, fieldName string) ent.Mixin {
	m := slotsMixin{owner: owner, field: fieldName}
	m.ownerName, m.table, m.keyField, m.err = describeOwner(owner)
	m.prefix = spec.Singular(m.table)
	return m
}

// DeltasOf declares the delta table of an [Append] counter, as SlotsOf
// declares a slot table:
//
//	type PostClapsDelta struct{ ent.Schema }
//
//	func (PostClapsDelta) Mixin() []ent.Mixin { return []ent.Mixin{entcounter.DeltasOf(Post.Type, "claps")} }
//
// It creates the table <singular owner table>_<field>_deltas: ent's id
// (the delta's increasing id, by which rollup folds in batches), the owner
// key column <singular owner table>_id with an index, and n, with a
// foreign key ON DELETE CASCADE; the layout gormcounter uses.
func DeltasOf(owner any, fieldName string) ent.Mixin {
	m := slotsMixin{owner: owner, field: fieldName, deltas: true}
	m.ownerName, m.table, m.keyField, m.err = describeOwner(owner)
	m.prefix = spec.Singular(m.table)
	return m
}

type slotsMixin struct {
	deltas bool // a delta table (DeltasOf), not a slot table
	mixin.Schema
	owner     any
	field     string
	ownerName string
	table     string // the owner's table, e.g. posts
	prefix    string // singular owner table, e.g. post
	keyField  ent.Field
	err       error
	dbDefault bool // the value column's default is the database's (a generated schema)
}

func (m slotsMixin) Fields() []ent.Field {
	if m.err != nil {
		// ent reports a field's error at generation (Descriptor.Err).
		return []ent.Field{errField{Field: field.Int16(countersql.SlotColumn),
			err: fmt.Errorf("entcounter: SlotsOf(%s, %q): %w", m.ownerName, m.field, m.err)}}
	}
	if m.deltas {
		return []ent.Field{m.keyField, field.Int64(countersql.ValueColumn).Immutable()}
	}
	var value ent.Field = field.Int64(countersql.ValueColumn).Default(0)
	if m.dbDefault {
		value = dbDefaultValue()
	}
	return []ent.Field{
		m.keyField,
		field.Int16(countersql.SlotColumn).Immutable(),
		value,
	}
}

// errField is a field whose descriptor carries err, which ent's loader
// reports naming the field.
type errField struct {
	ent.Field
	err error
}

func (f errField) Descriptor() *field.Descriptor {
	d := f.Field.Descriptor()
	d.Err = f.err
	return d
}

func (m slotsMixin) Edges() []ent.Edge {
	if m.err != nil {
		return nil // the owner is not a schema: Fields carries the error
	}
	e := edge.To(snake(m.ownerName), m.owner).Field(m.ownerKey()).Unique().Required().Immutable().
		Annotations(entsql.OnDelete(entsql.Cascade))
	if sym := foreignKeySymbol(m.prefix+"_"+m.field+tableSuffix(m.deltas), m.table, snake(m.ownerName)); sym != "" {
		e = e.StorageKey(edge.Symbol(sym))
	}
	return []ent.Edge{e}
}

// foreignKeySymbol returns the name of the slot table's foreign key when
// ent's own (<table>_<owner table>_<edge>) is longer than PostgreSQL's 63
// bytes, else "" (ent's own). ent shortens a long name when it migrates,
// to 64 bytes on MySQL and 63 on PostgreSQL, in the table definitions it
// shares across clients: a process that migrates both (or a test suite)
// then finds a MySQL key named the other way, and renames it at every
// migration. The name given here is ent's PostgreSQL one, on every
// database.
func foreignKeySymbol(table, ownerTable, edgeName string) string {
	name := table + "_" + ownerTable + "_" + edgeName
	if len(name) <= 63 {
		return ""
	}
	return fmt.Sprintf("%s_%x", name[:30], md5.Sum([]byte(name)))
}

func (m slotsMixin) Indexes() []ent.Index {
	if m.deltas {
		return []ent.Index{index.Fields(m.ownerKey())}
	}
	return []ent.Index{index.Fields(m.ownerKey(), countersql.SlotColumn).Unique()}
}

func (m slotsMixin) Annotations() []schema.Annotation {
	return []schema.Annotation{
		entsql.Table(m.prefix + "_" + m.field + tableSuffix(m.deltas)),
		slotsAnnotation{Owner: m.ownerName, Field: m.field, Deltas: m.deltas},
		gqlSkip{Skip: gqlSkipAll},
	}
}

// gqlSkip is entgql's schema annotation ("EntGQL") with Skip set, written
// here so that entcounter does not import entgo.io/contrib: a slot table
// is storage, and a project that generates GraphQL with entgql must not
// get a GraphQL type, a where input or mutation inputs for it.
type gqlSkip struct {
	Skip int `json:"Skip"`
}

// gqlSkipAll is entgql.SkipAll: every mode entgql v0.7 skips (type, enum
// fields, order fields, where input, create and update inputs), and room
// for modes it may add.
const gqlSkipAll = 1<<16 - 1

// Name implements ent's schema.Annotation: entgql reads annotations by it.
func (gqlSkip) Name() string { return "EntGQL" }

func (m slotsMixin) ownerKey() string { return m.prefix + "_id" }

// describeOwner reads the owner schema: its type name, the singular of its
// table name and a field of its key's type for the owner key column.
func describeOwner(owner any) (name, table string, key ent.Field, err error) {
	t := reflect.TypeOf(owner)
	if t == nil || t.Kind() != reflect.Func || t.NumIn() != 1 {
		return fmt.Sprint(owner), "", nil, fmt.Errorf("pass the owner schema's Type method, as in SlotsOf(Post.Type, \"likes\"), not %T", owner)
	}
	st := t.In(0)
	name = st.Name()
	s, ok := reflect.New(st).Elem().Interface().(ent.Interface)
	if !ok {
		return name, "", nil, fmt.Errorf("%s is not an ent schema", name)
	}
	// The table ent names the owner (entsql.Table, or the snake case of the
	// plural type name), singular, as GORM names slot tables after tables.
	table = snakeCase(pluralize(name))
	for _, a := range s.Annotations() {
		if t, ok := a.(entsql.Annotation); ok && t.Table != "" {
			table = t.Table
		}
		if t, ok := a.(*entsql.Annotation); ok && t != nil && t.Table != "" {
			table = t.Table
		}
	}
	col := spec.Singular(table) + "_id"
	key = field.Int(col).Immutable()
	fields := s.Fields()
	for _, m := range s.Mixin() {
		fields = append(fields, m.Fields()...)
	}
	for _, f := range fields {
		if d := f.Descriptor(); d.Name == "id" {
			if key, err = keyField(col, d); err != nil {
				return name, table, nil, fmt.Errorf("%s's id is %w", name, err)
			}
		}
	}
	return name, table, key, nil
}

// snakeCase and pluralize are ent's own (entc/gen's template functions), so
// that the table name is the one ent derives.
var (
	snakeCase = gen.Funcs["snake"].(func(string) string)
	pluralize = func(name string) string {
		p := gen.Funcs["plural"].(func(string) string)(name)
		if p == name+"Slice" { // ent's plural marks a word it cannot pluralize
			return name
		}
		return p
	}
)

// snake is ent's snake case of a Go name: PostLike -> post_like.
func snake(s string) string { return snakeCase(s) }
