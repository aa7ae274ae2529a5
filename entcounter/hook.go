package entcounter

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"

	"entgo.io/ent"

	"github.com/hotcounter/hotcounter/internal/countersql"
	"github.com/hotcounter/hotcounter/internal/engine"
	"github.com/hotcounter/hotcounter/internal/retry"
)

// ErrNotConfigured is returned when a mutation of a schema with counters
// runs without the code that entcounter's extension generates.
var ErrNotConfigured = errors.New("entcounter: the generated code has no HotCounter method: generate with entc.Extensions(entcounter.Extension())")

// counterHook moves a counter's part of a mutation into the slot table:
// adds become a slot upsert, sets replace the slot rows, and creation of a
// sum counter's parent writes its initial value to a slot.
func counterHook(field string, ann Annotation) ent.Hook {
	return func(next ent.Mutator) ent.Mutator {
		return ent.MutateFunc(func(ctx context.Context, m ent.Mutation) (ent.Value, error) {
			added, hasAdd := m.AddedField(field)
			value, hasSet := m.Field(field)
			cleared := m.FieldCleared(field)
			if !hasAdd && !hasSet && !cleared {
				return next.Mutate(ctx, m)
			}
			if ann.Err != "" {
				return nil, fmt.Errorf("entcounter: %s.%s: %s", m.Type(), field, ann.Err)
			}
			src, ok := m.(Source)
			if !ok {
				return nil, fmt.Errorf("%w (%s.%s)", ErrNotConfigured, m.Type(), field)
			}
			w := &write{r: src.HotCounter()}
			d, ok := w.r.def(m.Type(), field)
			if !ok {
				return nil, fmt.Errorf("entcounter: %s.%s is not in the generated counter list: run go generate", m.Type(), field)
			}
			dl, err := w.r.dialect()
			if err != nil {
				return nil, err
			}
			w.d, w.dl = d, dl
			add, set := toInt64(added), toInt64(value)
			switch {
			case m.Op().Is(ent.OpCreate):
				if d.Rollup {
					return next.Mutate(ctx, m) // the column takes the initial value
				}
				m.ResetField(field)
				res, err := next.Mutate(ctx, m)
				if err != nil {
					return res, err
				}
				id, ok := mutationID(m)
				if !ok {
					return res, fmt.Errorf("entcounter: %s.%s: the created %s has no id", m.Type(), field, m.Type())
				}
				return res, w.created(ctx, id, set)
			case m.Op().Is(ent.OpUpdateOne):
				id, ok := mutationID(m)
				if !ok {
					return next.Mutate(ctx, m) // ent reports the missing id
				}
				m.ResetField(field)
				res, err := next.Mutate(ctx, m) // NotFound comes from here, before any slot write
				if err != nil {
					return res, err
				}
				_, err = w.update(ctx, []any{id}, hasSet || cleared, set+add)
				return res, err
			case m.Op().Is(ent.OpUpdate):
				// The keys are read before the update: its predicates may
				// depend on the columns it changes.
				keys, err := mutationIDs(ctx, m)
				if err != nil {
					return nil, err
				}
				m.ResetField(field)
				counterOnly := isEmpty(m)
				res, err := next.Mutate(ctx, m)
				if err != nil {
					return res, err
				}
				n, err := w.update(ctx, keys, hasSet || cleared, set+add)
				if err == nil && counterOnly {
					res = int(n) // ent ran no UPDATE: the parents written are the counter's
				}
				return res, err
			}
			return next.Mutate(ctx, m)
		})
	}
}

// write applies one counter's change for some parents.
type write struct {
	r  Runtime
	d  Def
	dl countersql.Dialect
}

// run runs fn in one transaction: the caller's when the mutation has one,
// else a new one, retried on deadlocks and busy errors.
func (w *write) run(ctx context.Context, fn func(engine.Conn) error) error {
	once := func() error {
		tx, err := w.r.Driver.Tx(ctx) // in a caller's transaction: a wrapper whose Commit is a no-op
		if err != nil {
			return err
		}
		if err := fn(conn{tx, w.r.Driver.Dialect()}); err != nil {
			return errors.Join(err, tx.Rollback())
		}
		return tx.Commit()
	}
	if w.r.inTx() {
		return once()
	}
	return retry.Do(ctx, 8, once)
}

// exec runs one statement, on its own (autocommit) outside a caller's
// transaction.
func (w *write) exec(ctx context.Context, fn func(countersql.Writer)) (int64, error) {
	c := conn{w.r.Driver, w.r.Driver.Dialect()}
	if w.r.inTx() {
		return c.Exec(ctx, fn)
	}
	var n int64
	err := retry.Do(ctx, 8, func() (err error) { n, err = c.Exec(ctx, fn); return err })
	return n, err
}

func (w *write) wrap(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("entcounter: %s: %w", w.d.name(), err)
}

// created writes the initial value of a new parent's sum counter.
func (w *write) created(ctx context.Context, id any, v int64) error {
	t, keys := w.d.table(), []any{id}
	switch {
	case w.d.Precreate:
		return w.wrap(w.run(ctx, func(c engine.Conn) error {
			if _, err := c.Exec(ctx, func(x countersql.Writer) { w.dl.PrecreateSlots(x, t, w.d.Slots, w.dl.KeyIn(t, keys)) }); err != nil || v == 0 {
				return err
			}
			_, err := c.Exec(ctx, w.increment(keys, v))
			return err
		}))
	case v != 0:
		_, err := w.exec(ctx, w.increment(keys, v))
		return w.wrap(err)
	}
	return nil
}

func (w *write) increment(keys []any, delta int64) func(countersql.Writer) {
	t := w.d.table()
	return func(x countersql.Writer) { w.dl.IncrementWhere(x, t, rand.IntN(w.d.Slots), delta, w.dl.KeyIn(t, keys)) }
}

// update adds delta to the parents' counters or, if set, makes delta their
// total. It returns how many parents it wrote.
func (w *write) update(ctx context.Context, keys []any, set bool, delta int64) (int64, error) {
	if len(keys) == 0 {
		return 0, nil
	}
	t := w.d.table()
	var total int64
	chunked := func(c engine.Conn, fn func(keys []any) func(countersql.Writer)) error {
		for start := 0; start < len(keys); start += engine.FillChunk {
			n, err := c.Exec(ctx, fn(keys[start:min(start+engine.FillChunk, len(keys))]))
			if err != nil {
				return err
			}
			total += n
		}
		return nil
	}
	if !set {
		if len(keys) <= engine.FillChunk {
			n, err := w.exec(ctx, w.increment(keys, delta))
			return n, w.wrap(err)
		}
		err := w.run(ctx, func(c engine.Conn) error {
			total = 0
			return chunked(c, func(k []any) func(countersql.Writer) { return w.increment(k, delta) })
		})
		return total, w.wrap(err)
	}
	err := w.run(ctx, func(c engine.Conn) error {
		total = 0
		// The pending slot rows go; rollup: the column takes the total; sum:
		// (the pre-created rows and) one slot row holding the total replace them.
		if err := chunked(c, func(k []any) func(countersql.Writer) {
			return func(x countersql.Writer) { w.dl.DeleteOwners(x, t, k) }
		}); err != nil {
			return err
		}
		switch {
		case w.d.Rollup:
			if err := chunked(c, func(k []any) func(countersql.Writer) {
				return func(x countersql.Writer) { w.dl.SetColumn(x, t, k, delta) }
			}); err != nil {
				return err
			}
		case w.d.Precreate:
			if err := chunked(c, func(k []any) func(countersql.Writer) {
				return func(x countersql.Writer) { w.dl.PrecreateSlots(x, t, w.d.Slots, w.dl.KeyIn(t, k)) }
			}); err != nil {
				return err
			}
		}
		if !w.d.Rollup && delta != 0 {
			return chunked(c, func(k []any) func(countersql.Writer) { return w.increment(k, delta) })
		}
		return nil
	})
	if err != nil {
		return 0, w.wrap(err)
	}
	return int64(len(keys)), nil
}

// isEmpty reports whether a mutation has nothing left for ent to write.
func isEmpty(m ent.Mutation) bool {
	return len(m.Fields()) == 0 && len(m.AddedFields()) == 0 && len(m.ClearedFields()) == 0 &&
		len(m.AddedEdges()) == 0 && len(m.RemovedEdges()) == 0 && len(m.ClearedEdges()) == 0
}

// mutationID calls the generated ID() (T, bool) method.
func mutationID(m ent.Mutation) (any, bool) {
	f := reflect.ValueOf(m).MethodByName("ID")
	if !f.IsValid() || f.Type().NumIn() != 0 || f.Type().NumOut() != 2 {
		return nil, false
	}
	out := f.Call(nil)
	return out[0].Interface(), out[1].Bool()
}

// mutationIDs calls the generated IDs(ctx) ([]T, error) method.
func mutationIDs(ctx context.Context, m ent.Mutation) ([]any, error) {
	f := reflect.ValueOf(m).MethodByName("IDs")
	if !f.IsValid() {
		return nil, fmt.Errorf("entcounter: %s mutation has no IDs method", m.Type())
	}
	out := f.Call([]reflect.Value{reflect.ValueOf(ctx)})
	if err, _ := out[1].Interface().(error); err != nil {
		return nil, err
	}
	ids := out[0]
	keys := make([]any, ids.Len())
	for i := range keys {
		keys[i] = ids.Index(i).Interface()
	}
	return keys, nil
}

func toInt64(v ent.Value) int64 {
	switch x := v.(type) {
	case int64:
		return x
	case nil:
		return 0
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return rv.Int()
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return int64(rv.Uint())
	}
	return 0
}
