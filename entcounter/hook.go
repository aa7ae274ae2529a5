package entcounter

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"entgo.io/ent"

	"github.com/hotcounter/hotcounter"
	"github.com/hotcounter/hotcounter/internal/combine"
	"github.com/hotcounter/hotcounter/internal/countersql"
	"github.com/hotcounter/hotcounter/internal/dberr"
	"github.com/hotcounter/hotcounter/internal/engine"
	"github.com/hotcounter/hotcounter/internal/entrt"
)

// mutation is what the extension generates on the mutations of schemas
// with counters.
type mutation interface {
	ent.Mutation
	Source
	HotCounterKeys(ctx context.Context) ([]any, error)
	HotCounterID() (any, bool)
	HotCounterNotFound() error
	HotCounterUpsert() bool
	HotCounterBulkUpsert() bool
	// HotCounterBulk is the CreateBulk the create is one row of, or nil.
	HotCounterBulk() *entrt.Bulk
	// HotCounterByIDOnly reports whether an UpdateOne names its row by id
	// alone; HotCounterEntity reads the entity with that id as Get does.
	// Together they let an increment of counters alone skip ent's empty
	// update ([write.incrementOne]).
	HotCounterByIDOnly() bool
	HotCounterEntity(ctx context.Context, id any) (any, error)
	// HotCounterStub is the entity of an UpdateOne whose add went to a
	// write-behind buffer: its id alone.
	HotCounterStub(id any) (ent.Value, error)
}

// counterHook moves a counter's part of a mutation into the slot table:
// adds become a slot upsert, sets replace the slot rows, and creation of a
// sum counter's parent writes its initial value to a slot.
func counterHook(field string, ann annotation) ent.Hook {
	return func(next ent.Mutator) ent.Mutator {
		var self ent.MutateFunc
		self = func(ctx context.Context, em ent.Mutation) (_ ent.Value, err error) {
			m, ok := em.(mutation)
			if !ok {
				// Without the extension's code, ent would write and read the
				// sum counter's column, which does not exist.
				return nil, fmt.Errorf("%s.%s: %w", em.Type(), field, errNotGenerated)
			}
			if !ann.Rollup && em.Op().Is(ent.OpCreate) {
				defer func() { err = upsertWroteColumn(m, field, err) }()
			}
			if p, ok := em.(interface{ HotCounterPin(context.Context) error }); ok {
				// An update or delete whose predicates read a counter
				// without a column writes the rows they select, by id.
				if err := p.HotCounterPin(ctx); err != nil {
					return nil, fmt.Errorf("entcounter: %s: read the rows whose counters the write's predicates name: %w", em.Type(), err)
				}
			}
			if id, hasID := m.HotCounterID(); em.Op().Is(ent.OpUpdateOne) {
				if b, ok := entrt.BufferedFor(ctx, em.Type(), id, hasID); ok {
					if b.Field != field {
						return next.Mutate(ctx, em) // to the hook of the buffered counter
					}
					return bufferAdd(ctx, m, field, ann, b)
				}
			}
			if em.Op().Is(ent.OpUpdateOne) && ctx.Value(fillAfterKey{}) != em {
				// The outermost counter hook of an UpdateOne: the entity it
				// returns shows every counter as a load would.
				return fillAfter(context.WithValue(ctx, fillAfterKey{}, em), m, self)
			}
			added, hasAdd := em.AddedField(field)
			value, hasSet := em.Field(field)
			cleared := em.FieldCleared(field)
			if !hasAdd && !hasSet && !cleared {
				return untouched(ctx, m, next, field)
			}
			if err := refused(em, field, ann, hasAdd, hasSet, cleared, entrt.ToInt64(added), entrt.ToInt64(value)); err != nil {
				return nil, err
			}
			if ann.Counts != "" {
				return countCreated(ctx, m, next, field, ann)
			}
			w, err := newWrite(ctx, m, field)
			if err != nil {
				return nil, err
			}
			d := w.d
			add, set := entrt.ToInt64(added), entrt.ToInt64(value)
			if hasAdd && !hasSet && !cleared && m.Op().Is(ent.OpUpdateOne|ent.OpUpdate) {
				start, obs := time.Now(), w.r.Observer()
				defer func() {
					obs.Increment(ctx, d.Table, d.Field, time.Since(start), err)
					if id, ok := m.HotCounterID(); ok && err == nil && m.Op().Is(ent.OpUpdateOne) {
						obs.CountWrite(d.Table, d.Tables().Column, engine.KeyText(id), true)
					}
				}()
			}
			switch {
			case m.Op().Is(ent.OpCreate):
				return w.create(ctx, m, next, set)
			case m.Op().Is(ent.OpUpdateOne | ent.OpUpdate):
				return w.mutateUpdate(ctx, m, next, field, hasSet || cleared, set, add)
			}
			return next.Mutate(ctx, m)
		}
		return self
	}
}

// upsertWroteColumn explains the error of an upsert whose conflict update
// (OnConflict(...).AddLikes, SetLikes, UpdateLikes, UpdateNewValues after a
// hook set it) wrote a sum counter's column, which does not exist: ent
// writes that update in the INSERT itself, past the hooks.
func upsertWroteColumn(m mutation, field string, err error) error {
	if err == nil || !m.HotCounterUpsert() || !dberr.UndefinedColumn(err) || !strings.Contains(err.Error(), field) {
		return err
	}
	return fmt.Errorf("entcounter: %s.%s: the upsert's conflict update writes the counter's column, and a sum counter has none "+
		"(OnConflict(...).Add, Set or Update of the field: ent writes them in the INSERT, past the hooks); "+
		"nothing was written: increment it after the upsert (UpdateOneID(id).Add...), or declare it Rollup(), whose column takes them: %w",
		m.Type(), field, err)
}

// bufferAdd hands an UpdateOne's add to a write-behind buffer (a Buffer's
// Increment, under entrt.WithBuffered), now that the hooks before this one
// (the client's, the privacy policy, mixins listed first) have let it
// through: it refuses what the counter does not take, reads the row
// through the query interceptors and the mutation's predicates when there
// are any (HotCounterKeys; none: the id is the row), and returns the
// entity with its id alone. Nothing is written to the database.
func bufferAdd(ctx context.Context, m mutation, field string, ann annotation, b *entrt.Buffered) (ent.Value, error) {
	added, hasAdd := m.AddedField(field)
	_, hasSet := m.Field(field)
	if !hasAdd || hasSet || m.FieldCleared(field) {
		return nil, fmt.Errorf("entcounter: %s.%s: a hook changed a buffered add into an assignment, which a buffer cannot take", m.Type(), field)
	}
	add := entrt.ToInt64(added)
	if err := refused(m, field, ann, true, false, false, add, 0); err != nil {
		return nil, err
	}
	keys, err := m.HotCounterKeys(ctx)
	switch {
	case err != nil:
		return nil, err
	case len(keys) == 0:
		// The row is missing or the interceptors hide it.
		return nil, m.HotCounterNotFound()
	}
	if err := b.Sink(ctx, keys[0], add); err != nil {
		return nil, err
	}
	return m.HotCounterStub(keys[0])
}

// newWrite returns the write of m's counter field.
func newWrite(ctx context.Context, m mutation, field string) (*write, error) {
	w := &write{r: m.HotCounter()}
	d, ok := w.r.Def(m.Type(), field)
	if !ok {
		return nil, fmt.Errorf("entcounter: %s.%s is not in the generated counter list: run go generate", m.Type(), field)
	}
	dl, err := w.r.Dialect(ctx)
	if err != nil {
		return nil, err
	}
	w.d, w.dl = d, dl
	return w, nil
}

// untouched runs a mutation that does not write field, and explains the
// error when a hook that runs after this one wrote it after all. A row of
// a CreateBulk that does not write field tells the bulk so, and writes the
// other rows' starts if it is the last to finish.
func untouched(ctx context.Context, m mutation, next ent.Mutator, field string) (ent.Value, error) {
	em := ent.Mutation(m)
	v, err := next.Mutate(ctx, em)
	if bulk := m.HotCounterBulk(); err == nil && bulk != nil {
		if keys, values, last := bulk.Skip(field); last && len(keys) > 0 {
			w, err := newWrite(ctx, m, field)
			if err != nil {
				return v, err
			}
			return v, w.start(ctx, keys, values)
		}
	}
	if err != nil && touched(em, field) {
		// A hook that runs after this one (the schema's own Hooks: ent
		// runs a mixin's hooks first) wrote the counter, and ent sent the
		// write to a column the counter may not have (code generated
		// before writes of later hooks were taken out, or a bulk create).
		return v, fmt.Errorf("entcounter: %s.%s was written by a hook that runs after entcounter's (ent runs a mixin's hooks "+
			"before the schema's own Hooks): regenerate the ent code, or write counters from a hook registered with client.%s.Use, which runs first: %w",
			em.Type(), field, em.Type(), err)
	}
	return v, err
}

// countCreated runs the create of a parent with a count (the only write
// of a count that refused lets through): its default 0 is the count's
// start, and a sum count has no column; a later hook's non-zero start is
// refused.
func countCreated(ctx context.Context, m mutation, next ent.Mutator, field string, ann annotation) (ent.Value, error) {
	if !ann.Rollup {
		m.ResetField(field)
	}
	v, err := next.Mutate(ctx, m)
	if late, ok := lateStart(m, field); ok && err == nil && late != 0 {
		err = refused(m, field, ann, false, true, false, 0, late)
	}
	return v, err
}

// mutateUpdate runs an Update or UpdateOne that adds add to the counter,
// or sets it to set (assigned: SetX or ClearX), writing the counter to its
// slots and the rest through ent.
func (w *write) mutateUpdate(ctx context.Context, m mutation, next ent.Mutator, field string, assigned bool, set, add int64) (ent.Value, error) {
	// The keys are read before the update: its predicates may depend on
	// the columns it changes.
	keys, err := updateKeys(ctx, m)
	if err != nil {
		return nil, err
	}
	ctx = withUpdateKeys(ctx, m, keys)
	one := m.Op().Is(ent.OpUpdateOne)
	if one && len(keys) == 0 {
		// The row is missing, does not match the predicates, or the
		// user's query interceptors hide it: nothing is written.
		return nil, m.HotCounterNotFound()
	}
	m.ResetField(field)
	counterOnly := isEmpty(m)
	if _, locks := w.dl.OnRowLocks(); locks && counterOnly && one && !assigned && m.HotCounterByIDOnly() {
		// ent would run an empty update (BEGIN, a read of the row,
		// COMMIT) for the entity alone: the increment is the only write,
		// and the entity is read after it. (Not on SQLite: one writer at
		// a time, nothing to gain, and a database without foreign keys
		// would keep the slot row of a parent that ent's read would have
		// found missing.)
		return w.incrementOne(ctx, m, keys[0], add)
	}
	res, err := next.Mutate(ctx, m)
	if err != nil {
		return res, err
	}
	if one && !assigned {
		// The entity shows the new total: read back with the increment
		// where the database can, else loaded.
		total, hasTotal, err := w.incrementShowing(ctx, keys[0], add)
		switch {
		case err != nil:
			return res, err
		case hasTotal:
			return res, setNodeField(res, w.d.StructField, total)
		}
		return res, w.refresh(ctx, res, keys[0], false, add)
	}
	n, err := w.update(ctx, keys, assigned, set+add)
	if err != nil {
		return res, err
	}
	switch {
	case !one && counterOnly:
		res = int(n) // ent ran no UPDATE: the rows written are the counter's
	case one:
		err = w.refresh(ctx, res, keys[0], assigned, set+add)
	}
	return res, err
}

// keysRead is what the counter hook of an update that read its rows' keys
// hands the counter hooks inside it (next.Mutate): they run before any of
// them writes, so each would read the same rows again, one query per
// counter of the update. An inner hook takes the keys only for the same
// mutation, with the same predicates (HotCounterWhere), under the very
// context they were handed with (a hook between that wrapped it may have
// changed what the query interceptors show).
type keysRead struct {
	ctx   context.Context
	m     ent.Mutation
	where any
	keys  []any
}

type keysReadKey struct{}

// updateKeys returns the keys of the rows the update m writes: those a
// counter hook outside this one read, when they still hold, else read.
func updateKeys(ctx context.Context, m mutation) ([]any, error) {
	where, ok := whereOf(m)
	if r, _ := ctx.Value(keysReadKey{}).(*keysRead); ok && r != nil && r.ctx == ctx && r.m == ent.Mutation(m) && r.where == where {
		return r.keys, nil
	}
	return m.HotCounterKeys(ctx)
}

// withUpdateKeys hands keys, read for the update m, to the counter hooks
// inside this one (code generated before HotCounterWhere: each reads
// its own).
func withUpdateKeys(ctx context.Context, m mutation, keys []any) context.Context {
	where, ok := whereOf(m)
	if !ok {
		return ctx
	}
	r := &keysRead{m: m, where: where, keys: keys}
	r.ctx = context.WithValue(ctx, keysReadKey{}, r)
	return r.ctx
}

// whereOf returns m's HotCounterWhere, and false for a mutation generated
// before it.
func whereOf(m mutation) (any, bool) {
	w, ok := ent.Mutation(m).(interface{ HotCounterWhere() any })
	if !ok {
		return nil, false
	}
	return w.HotCounterWhere(), true
}

// refused returns the error of a write that the counter does not take: a
// bad declaration, a write of a count, an assignment or a decrement of a
// guarded counter (add and set are the values of the mutation's AddX and
// SetX). A new parent's count may start at 0 only.
func refused(em ent.Mutation, field string, ann annotation, hasAdd, hasSet, cleared bool, add, set int64) error {
	if ann.Err != "" {
		return fmt.Errorf("entcounter: %s.%s: %w%s", em.Type(), field, hotcounter.ErrInvalidCounter, strings.TrimPrefix(ann.Err, hotcounter.ErrInvalidCounter.Error()))
	}
	create := em.Op().Is(ent.OpCreate)
	if ann.Counts != "" {
		if create && !hasAdd && !cleared && set == 0 {
			return nil
		}
		return fmt.Errorf("entcounter: %s.%s: %w: it counts the rows of edge %q and changes only when they do (entcounter.Recount corrects it)",
			em.Type(), field, hotcounter.ErrNotIncrement, ann.Counts)
	}
	if !ann.Guarded {
		return nil
	}
	what := ""
	switch {
	case (hasSet || cleared) && !create:
		what = "an assignment could take the stock down; AddX restocks and entcounter.Take sells"
	case hasSet && set+add < 0:
		what = fmt.Sprintf("a Set to %d is below zero", set+add)
	case hasAdd && add < 0:
		what = fmt.Sprintf("an Add of %d could take it below zero; use entcounter.Take, which refuses when less is left", add)
	}
	if what != "" {
		return fmt.Errorf("entcounter: %s.%s: %w: %s", em.Type(), field, hotcounter.ErrNegativeGuarded, what)
	}
	return nil
}

// lateMutation is what the extension generates on mutations since a hook
// that ent runs after entcounter's (the schema's own Hooks) may write a
// counter.
type lateMutation interface {
	HotCounterKeep(field string)
	HotCounterLate(field string) (int64, bool)
}

// lateStart returns the starting total of a new parent's sum counter that
// a hook ent ran after entcounter's wrote: the generated create took it out
// of the row's columns.
func lateStart(m ent.Mutation, field string) (int64, bool) {
	if lm, ok := m.(lateMutation); ok {
		return lm.HotCounterLate(field)
	}
	return 0, false
}

func init() { entrt.Late = writeLate }

// writeLate runs the counter hooks of the counters m writes around save,
// the generated update's own write: a hook that ent ran after entcounter's
// (the schema's own Hooks) wrote them, and the update sends them as an
// update written with them from the start would. The hooks take them out
// of m, so save then runs without them.
func writeLate(ctx context.Context, r entrt.Runtime, m ent.Mutation, save func(context.Context) (ent.Value, error)) (ent.Value, error) {
	var run ent.Mutator = ent.MutateFunc(func(ctx context.Context, _ ent.Mutation) (ent.Value, error) { return save(ctx) })
	for _, d := range r.Defs {
		if d.Type == m.Type() && touched(m, d.Field) {
			run = counterHook(d.Field, annotationOfDef(d))(run)
		}
	}
	return run.Mutate(ctx, m)
}

// annotationOfDef returns what counterHook reads of a counter's annotation,
// from its generated description.
func annotationOfDef(d entrt.Def) annotation {
	a := annotation{Slots: d.Slots, AutoSlots: d.AutoSlots, Rollup: d.Rollup, Append: d.Append, Precreate: d.Precreate,
		SkipLocked: d.SkipLocked, KeepColumn: d.KeepColumn, Guarded: d.Guarded}
	if c := d.Count; c != nil {
		a.Counts, a.Where, a.Hooks = c.Edge, c.Where, c.Hooks
	}
	return a
}

// touched reports whether the mutation adds to, sets or clears field.
func touched(m ent.Mutation, field string) bool { return entrt.Touched(m, field) }

// fillAfterKey marks, in the context of an UpdateOne, the mutation whose
// outermost counter hook fills the entity.
type fillAfterKey struct{}

// fillAfter runs an UpdateOne through the counter hooks and fills, in the
// entity ent returns, the sum counters it did not write (ent read the row
// back, and a sum counter has no column): one load for all of them. A
// counter the update wrote was refreshed by its own hook.
func fillAfter(ctx context.Context, m mutation, run ent.MutateFunc) (ent.Value, error) {
	r := m.HotCounter()
	var fields []string
	structField := map[string]string{}
	for _, d := range r.Defs {
		if d.Type != m.Type() || d.Rollup {
			continue
		}
		_, added := m.AddedField(d.Field)
		_, set := m.Field(d.Field)
		if !added && !set && !m.FieldCleared(d.Field) {
			fields = append(fields, d.Field)
			structField[d.Field] = d.StructField
		}
	}
	res, err := run(ctx, m)
	id, ok := m.HotCounterID()
	if err != nil || len(fields) == 0 || !ok {
		return res, err
	}
	var setErr error
	err = entrt.Load(ctx, r, m.Type(), fields, 1, func(int) any { return id }, func(_ int, f string, v int64) {
		if e := setNodeField(res, structField[f], v); e != nil && setErr == nil {
			setErr = e
		}
	})
	if err == nil {
		err = setErr
	}
	return res, err
}

// incrementOne writes an UpdateOneID(id).AddX(n) that changes nothing but
// the counter: the increment (outside a transaction, together with
// concurrent increments of the same row, in one statement, as
// gormcounter's), then the entity, read as Get reads it (counters filled,
// the increment included: on PostgreSQL the increment returns the new
// total, and the read leaves this counter to it). The entity is read once
// per statement, and every increment that statement carried gets a copy.
// A row that does not exist is ent's NotFound.
func (w *write) incrementOne(ctx context.Context, m mutation, key any, delta int64) (ent.Value, error) {
	s := entrt.NewSession(w.r)
	run := func(ctx context.Context, delta int64) (int64, any, error) {
		n, total, hasTotal, err := w.one(ctx, s, key, delta, true)
		switch {
		case dberr.ForeignKeyViolation(err), err == nil && n == 0 && delta != 0:
			return 0, nil, errNoParent
		case err != nil:
			return 0, nil, err
		}
		read := ctx
		if hasTotal {
			read = entrt.WithoutFill(ctx, w.d.Type, w.d.Field)
		}
		v, err := m.HotCounterEntity(read, key)
		if err == nil && hasTotal {
			err = setNodeField(v, w.d.StructField, total)
		}
		return n, v, err
	}
	return w.sharedEntity(ctx, s, m, key, delta, run)
}

// sharedEntity runs run, an increment of one parent by delta that returns
// the entity read after it: outside a transaction through the client's
// combining group, so that concurrent increments of the parent share the
// write and the read, each caller getting a copy of the entity; inside one,
// and for an append counter (one delta row per increment), alone.
func (w *write) sharedEntity(ctx context.Context, s engine.Session, m mutation, key any, delta int64, run combine.RunValue) (ent.Value, error) {
	var (
		v   any
		err error
	)
	if w.alone(s, delta) {
		_, v, err = run(ctx, delta)
	} else {
		group := w.r.Combined()
		if im, ok := m.(interface{ HotCounterReadShared() bool }); ok && im.HotCounterReadShared() {
			group = w.r.CombinedAfterRead()
		}
		_, v, err = group.DoValue(ctx, w.combineKey(key)+"\x00entity", delta, run)
		v, err = copyNode(v), w.left(ctx, err)
	}
	if errors.Is(err, errNoParent) {
		return nil, m.HotCounterNotFound()
	}
	return v, err
}

// errNoParent is what a combined increment of a row that does not exist
// hands its callers.
var errNoParent = errors.New("no such row")

// create runs the creation of a parent. A rollup counter's initial value
// goes to its column with the row. A sum counter has no column: its value
// is written to a slot once the row exists. In an upsert (ON CONFLICT) the
// row may have existed, so a non-zero value sets the total instead of
// adding to it.
func (w *write) create(ctx context.Context, m mutation, next ent.Mutator, v int64) (ent.Value, error) {
	if !w.d.Rollup {
		// A sum counter has no column, unless it was adopted over one: then
		// the new row's column starts at 0 (not NULL, and whatever its
		// default), and the value goes to a slot. An upsert leaves an
		// existing row's column alone.
		st, err := w.storage(ctx)
		if err != nil {
			return nil, err
		}
		m.ResetField(w.d.Field)
		if st.Column && st.Integer() && !m.HotCounterUpsert() {
			if err := m.SetField(w.d.Field, int64(0)); err != nil {
				return nil, err
			}
			if lm, ok := m.(lateMutation); ok {
				lm.HotCounterKeep(w.d.Field)
			}
		}
	}
	res, err := next.Mutate(ctx, m)
	if err != nil {
		return res, err
	}
	if late, ok := lateStart(m, w.d.Field); ok {
		// A later hook wrote the starting total: it is v, checked as v is.
		if err := refused(m, w.d.Field, annotation{Guarded: w.d.Guarded}, false, true, false, 0, late); err != nil {
			return res, fmt.Errorf("%w (the %s was created without it)", err, m.Type())
		}
		v = late
	}
	upsert := m.HotCounterUpsert() && v != 0
	if upsert && w.dl.MySQL() && m.HotCounterBulkUpsert() {
		// ent numbers the rows of a batch from LastInsertId, which is wrong
		// for rows that met a conflict: the value could go to another row.
		return res, fmt.Errorf("entcounter: %s: a counter value in a bulk upsert on MySQL/MariaDB cannot be written "+
			"(ent does not know the ids of rows that met a conflict); the rows were written without it: set it with an update", w.d.Name())
	}
	if w.d.Rollup && !upsert {
		return res, nil // the column took the initial value
	}
	id, ok := m.HotCounterID()
	if !ok {
		return res, fmt.Errorf("entcounter: %s: the created %s has no id", w.d.Name(), m.Type())
	}
	if upsert {
		// The row may have existed: the value is its new total.
		_, err = w.update(ctx, []any{id}, true, v)
	} else {
		err = w.created(ctx, m.HotCounterBulk(), id, v)
	}
	if err == nil {
		err = setNodeField(res, w.d.StructField, v)
	}
	return res, err
}

// refresh makes the entity an UpdateOne returns show the counter as a load
// would right after the write: the total that was set, the new sum of a sum
// counter, the cached column of a rollup counter (which ent read back).
func (w *write) refresh(ctx context.Context, node ent.Value, key any, set bool, v int64) error {
	switch {
	case set:
		return setNodeField(node, w.d.StructField, v)
	case w.d.Rollup:
		return nil
	}
	var total int64
	err := entrt.Load(ctx, w.r, w.d.Type, []string{w.d.Field}, 1, func(int) any { return key }, func(_ int, f string, n int64) {
		if f == w.d.Field {
			total = n
		}
	})
	if err != nil {
		return err
	}
	return setNodeField(node, w.d.StructField, total)
}

// setNodeField sets the int64 field name of the entity (a pointer to the
// generated struct) to v.
func setNodeField(node ent.Value, name string, v int64) error {
	rv := reflect.ValueOf(node)
	if rv.Kind() != reflect.Pointer || rv.IsNil() || rv.Elem().Kind() != reflect.Struct {
		return nil // not an entity (a bulk update's count, an upsert's id)
	}
	f := rv.Elem().FieldByName(name)
	if !f.IsValid() || !f.CanSet() || f.Kind() != reflect.Int64 {
		return fmt.Errorf("entcounter: %T has no int64 field %s", node, name)
	}
	f.SetInt(v)
	return nil
}

// write applies one counter's change for some parents.
type write struct {
	r  entrt.Runtime
	d  entrt.Def
	dl engine.Dialect
}

// storage returns where the counter's values live (an adopted column, a
// table a change of mode left).
func (w *write) storage(ctx context.Context) (engine.Storage, error) {
	st, err := w.r.Storages().Get(ctx, entrt.NewSession(w.r), w.dl, w.d.Tables())
	return st, w.wrap(ctx, err)
}

// sources returns what adds up to the counter's value (its errors name the
// counter).
func (w *write) sources(ctx context.Context) (countersql.Sources, error) {
	st, err := w.r.Store(ctx)
	if err != nil {
		return countersql.Sources{}, err
	}
	return st.Sources(ctx, entrt.NewSession(w.r), w.d.Counter(w.dl))
}

// left names the counter in the error of a combined call whose caller
// left while it waited (its context ended): the group returns the bare
// ctx.Err(), and the statement's own errors are wrapped already (one).
func (w *write) left(ctx context.Context, err error) error {
	if err != nil && err == ctx.Err() {
		return w.wrap(ctx, err)
	}
	return err
}

// wrap names the counter in err; a write that failed on its own missing
// table says what makes it (hotcounter.ErrNotMigrated).
func (w *write) wrap(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if st, serr := w.r.Store(ctx); serr == nil && ctx.Err() == nil {
		if named := st.NameMissing(ctx, entrt.NewSession(w.r), w.d.Counter(w.dl), err); named != err {
			return named
		}
	}
	return fmt.Errorf("entcounter: %s: %w", w.d.Name(), err)
}

// increment adds delta to the counter of each parent (engine.Apply; for
// one parent engine.IncrementOne, shared with concurrent increments of it),
// in s's transaction or in autocommit, and returns how many parents it
// incremented.
func (w *write) increment(ctx context.Context, s engine.Session, keys []any, delta int64) (int64, error) {
	if len(keys) == 1 {
		run := func(ctx context.Context, delta int64) (int64, error) {
			n, _, _, err := w.one(ctx, s, keys[0], delta, false)
			return n, err
		}
		if w.alone(s, delta) {
			return run(ctx, delta)
		}
		n, err := w.r.Combined().Do(ctx, w.combineKey(keys[0]), delta, run)
		return n, w.left(ctx, err)
	}
	n, err := engine.Apply(ctx, s, w.dl, w.increments(keys, delta))
	return n, w.wrap(ctx, err)
}

// incrementShowing adds delta to the counter of one parent, shared with
// concurrent increments of it as increment is, and returns the parent's new
// total when the database read it back with the write (hasTotal).
func (w *write) incrementShowing(ctx context.Context, key any, delta int64) (total int64, hasTotal bool, err error) {
	s := entrt.NewSession(w.r)
	type shown struct {
		total int64
		ok    bool
	}
	run := func(ctx context.Context, delta int64) (int64, any, error) {
		n, total, ok, err := w.one(ctx, s, key, delta, true)
		return n, shown{total, ok}, err
	}
	var v any
	if w.alone(s, delta) {
		_, v, err = run(ctx, delta)
	} else {
		_, v, err = w.r.Combined().DoValue(ctx, w.combineKey(key)+"\x00total", delta, run)
		err = w.left(ctx, err)
	}
	got, _ := v.(shown)
	return got.total, got.ok, err
}

// one writes the increment of one parent (engine.IncrementOne): with its
// new total where withTotal, the counter is not a rollup counter's cached
// column (ent read that back) and the database returns it.
func (w *write) one(ctx context.Context, s engine.Session, key any, delta int64, withTotal bool) (n, total int64, hasTotal bool, err error) {
	var (
		read    func(context.Context) (countersql.Sources, error)
		readErr error
	)
	if withTotal && !w.d.Rollup {
		read = func(ctx context.Context) (countersql.Sources, error) {
			src, err := w.sources(ctx)
			readErr = err
			return src, err
		}
	}
	in := w.increments(nil, delta)
	in.Key = key
	n, total, hasTotal, err = engine.IncrementOne(ctx, s, w.dl, in, read)
	if err != nil && err == readErr {
		return 0, 0, false, err // it names the counter
	}
	return n, total, hasTotal, w.wrap(ctx, err)
}

// increments is the increment of the counter of keys by delta.
func (w *write) increments(keys []any, delta int64) engine.Increment {
	return engine.Increment{Table: w.d.Tables(), Mode: w.d.Mode(), Slots: w.d.Slots, Widths: w.r.Widths(w.d),
		SkipLocked: w.d.SkipLocked, Guarded: w.d.Guarded, Keys: keys, Delta: delta}
}

// alone reports whether an increment of one parent by delta runs in a
// statement of its own (engine.Increment.Combines).
func (w *write) alone(s engine.Session, delta int64) bool {
	return !engine.Increment{Mode: w.d.Mode(), Guarded: w.d.Guarded, Delta: delta}.Combines(s.InTx())
}

// combineKey names the increments of the counter of one parent in the
// client's combining group.
func (w *write) combineKey(key any) string {
	return fmt.Sprintf("%s\x00%s\x00%v", w.d.SlotTable, w.d.Field, key)
}

// copyNode returns a copy of the entity v (a pointer to a struct), for one
// caller of a statement that several shared.
func copyNode(v any) any {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return v
	}
	c := reflect.New(rv.Elem().Type())
	c.Elem().Set(rv.Elem())
	return c.Interface()
}

// target is the counter as engine.Start and engine.Set write it.
func (w *write) target(ctx context.Context) (engine.Target, error) {
	st, err := w.r.Store(ctx)
	if err != nil {
		return engine.Target{}, err
	}
	return st.Target(ctx, entrt.NewSession(w.r), w.d.Counter(w.dl), w.r.Widths(w.d))
}

// created writes the starting value of a new parent's sum counter, and its
// pre-created slot rows. Of a row of a CreateBulk it writes nothing until
// the last row's hook, which writes those of every row at once.
func (w *write) created(ctx context.Context, bulk *entrt.Bulk, id any, v int64) error {
	keys, values := []any{id}, []int64{v}
	if bulk != nil {
		var last bool
		if keys, values, last = bulk.Add(w.d.Field, id, v); !last {
			return nil
		}
	}
	return w.start(ctx, keys, values)
}

// start writes the starting values of the new parents keys, and their
// pre-created slot rows.
func (w *write) start(ctx context.Context, keys []any, values []int64) error {
	if !w.d.PrecreateOn(w.dl) && !slices.ContainsFunc(values, func(v int64) bool { return v != 0 }) {
		return nil
	}
	t, err := w.target(ctx)
	if err != nil {
		return err
	}
	return w.wrap(ctx, engine.Start(ctx, entrt.NewSession(w.r), w.dl, t, keys, values))
}

// update adds delta to the parents' counters or, if set, makes delta their
// total. It returns how many parents it wrote.
func (w *write) update(ctx context.Context, keys []any, set bool, delta int64) (int64, error) {
	if len(keys) == 0 {
		return 0, nil
	}
	s := entrt.NewSession(w.r)
	if !set {
		return w.increment(ctx, s, keys, delta)
	}
	t, err := w.target(ctx)
	if err != nil {
		return 0, err
	}
	n, err := engine.Set(ctx, s, w.dl, t, keys, delta)
	return n, w.wrap(ctx, err)
}

// isEmpty reports whether a mutation has nothing left for ent to write.
func isEmpty(m ent.Mutation) bool {
	return len(m.Fields()) == 0 && len(m.AddedFields()) == 0 && len(m.ClearedFields()) == 0 &&
		len(m.AddedEdges()) == 0 && len(m.RemovedEdges()) == 0 && len(m.ClearedEdges()) == 0
}
