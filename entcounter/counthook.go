package entcounter

import (
	"context"
	"fmt"
	"reflect"
	"sort"

	"entgo.io/ent"
	entsql "entgo.io/ent/dialect/sql"

	"github.com/hotcounter/hotcounter/internal/countersql"
	"github.com/hotcounter/hotcounter/internal/engine"
)

// ErrNeedsTx is wrapped by the error for a write to a child table, outside
// a transaction, that changes a count kept by hooks ([ByHooks]).
var ErrNeedsTx = fmt.Errorf("a write that changes a count kept by hooks must run in a transaction (client.Tx)")

// CountHook returns the ent hook that keeps counts declared with [ByHooks].
// The extension registers it on the child schemas of such counts in the
// generated config, so every client and transaction runs it; users do not
// call it.
//
// Around an update or delete of child rows, in the mutation's transaction,
// it reads the ids the mutation targets, locks those rows (FOR UPDATE) and
// reads the parents they count for, pins the mutation to those ids (so a
// row inserted meanwhile is neither written nor miscounted), and after the
// write reads the rows again and adds the difference to the parents'
// slots, in one order for every writer. After a create it reads the new
// row's parents.
func CountHook() ent.Hook {
	return func(next ent.Mutator) ent.Mutator {
		return ent.MutateFunc(func(ctx context.Context, m ent.Mutation) (ent.Value, error) {
			src, ok := m.(Source)
			if !ok {
				return next.Mutate(ctx, m)
			}
			r := src.HotCounter()
			counts := r.hookCounts(m.Type())
			if len(counts) == 0 {
				return edgeHook(ctx, m, r, next)
			}
			if !r.inTx() {
				return nil, fmt.Errorf("entcounter: %s %s: %w", m.Op(), m.Type(), ErrNeedsTx)
			}
			dl, err := r.dialect()
			if err != nil {
				return nil, err
			}
			c := conn{ex: r.Driver, dialect: r.Driver.Dialect()}
			var before []engine.CountedRow
			var keys []any
			create := m.Op().Is(ent.OpCreate)
			if !create {
				if keys, err = mutationIDs(ctx, m); err != nil {
					return nil, err
				}
				if len(keys) == 0 {
					return next.Mutate(ctx, m)
				}
				if len(keys) > engine.MaxHookRows {
					return nil, fmt.Errorf("entcounter: a write to %d %s rows at once: counts kept by hooks allow %d per statement; write in batches",
						len(keys), m.Type(), engine.MaxHookRows)
				}
				if before, err = engine.ReadCounted(ctx, c, dl, counts, dl.ChildKeyIn(counts[0], keys), true); err != nil {
					return nil, fmt.Errorf("entcounter: read the %s rows whose counts a write changes: %w", m.Type(), err)
				}
				keys = keys[:0]
				for _, row := range before {
					keys = append(keys, row.Key)
				}
				if err := pin(m, counts[0].ChildKey, keys); err != nil {
					return nil, err
				}
			}
			v, err := next.Mutate(ctx, m)
			if err != nil {
				return v, err
			}
			if create {
				id, ok := mutationID(m)
				if !ok {
					return v, fmt.Errorf("entcounter: the created %s has no id", m.Type())
				}
				keys = []any{id}
			}
			if len(keys) == 0 {
				return v, nil
			}
			after, err := engine.ReadCounted(ctx, c, dl, counts, dl.ChildKeyIn(counts[0], keys), false)
			if err == nil {
				err = engine.ApplyCounts(ctx, c, dl, counts, before, after)
			}
			if err != nil {
				return v, fmt.Errorf("entcounter: count the %s rows written: %w", m.Type(), err)
			}
			return v, nil
		})
	}
}

// hookCounts returns the counts kept by hooks whose child is typ, in one
// order for every writer (by slot table).
func (r Runtime) hookCounts(typ string) []countersql.Count {
	var out []countersql.Count
	for _, d := range r.Defs {
		if d.Count != nil && d.Count.Hooks && d.Count.Type == typ {
			out = append(out, d.count())
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Slots < out[j].Slots })
	return out
}

// mutationIDs calls the generated mutation's IDs(ctx): the id of an
// UpdateOne or DeleteOne, or the ids a bulk mutation's predicates match.
func mutationIDs(ctx context.Context, m ent.Mutation) ([]any, error) {
	method := reflect.ValueOf(m).MethodByName("IDs")
	if !method.IsValid() {
		return nil, fmt.Errorf("entcounter: %s mutation has no IDs method", m.Type())
	}
	out := method.Call([]reflect.Value{reflect.ValueOf(ctx)})
	if err, _ := out[1].Interface().(error); err != nil {
		return nil, err
	}
	ids := make([]any, out[0].Len())
	for i := range ids {
		ids[i] = out[0].Index(i).Interface()
	}
	return ids, nil
}

// mutationID calls the generated mutation's ID(): the id a create wrote.
func mutationID(m ent.Mutation) (any, bool) {
	method := reflect.ValueOf(m).MethodByName("ID")
	if !method.IsValid() {
		return nil, false
	}
	out := method.Call(nil)
	return out[0].Interface(), out[1].Bool()
}

// pin adds "id IN (keys)" to the mutation's predicates.
func pin(m ent.Mutation, column string, keys []any) error {
	w, ok := m.(interface {
		WhereP(...func(*entsql.Selector))
	})
	if !ok {
		return fmt.Errorf("entcounter: %s mutation has no WhereP method", m.Type())
	}
	w.WhereP(func(s *entsql.Selector) { s.Where(entsql.In(s.C(column), keys...)) })
	return nil
}

// edgeHook keeps counts kept by hooks through a parent's edge setters
// (AddItemIDs, RemoveItemIDs, ClearItems), which write the child rows'
// reference without a child mutation: it locks and reads the children the
// mutation names (and, for a clear, the children of its parents) before the
// write, reads them again after it, and adds the difference.
func edgeHook(ctx context.Context, m ent.Mutation, r Runtime, next ent.Mutator) (ent.Value, error) {
	var (
		ids     []any // children named by the mutation
		cleared []string
		child   string
	)
	for _, d := range r.Defs {
		if d.Count == nil || !d.Count.Hooks || d.Type != m.Type() {
			continue
		}
		e := d.Count.Edge
		if len(m.AddedIDs(e)) == 0 && len(m.RemovedIDs(e)) == 0 && !m.EdgeCleared(e) {
			continue
		}
		child = d.Count.Type
		for _, id := range append(m.AddedIDs(e), m.RemovedIDs(e)...) {
			ids = append(ids, id)
		}
		if m.EdgeCleared(e) {
			cleared = append(cleared, d.Count.Ref)
		}
	}
	if child == "" {
		return next.Mutate(ctx, m)
	}
	if !r.inTx() {
		return nil, fmt.Errorf("entcounter: %s %s edges: %w", m.Op(), m.Type(), ErrNeedsTx)
	}
	dl, err := r.dialect()
	if err != nil {
		return nil, err
	}
	counts := r.hookCounts(child)
	c := conn{ex: r.Driver, dialect: r.Driver.Dialect()}
	var parents []any
	if len(cleared) > 0 && !m.Op().Is(ent.OpCreate) {
		if parents, err = mutationIDs(ctx, m); err != nil {
			return nil, err
		}
	}
	cond := func(w countersql.Writer) {
		w.WriteString("(")
		if len(ids) > 0 {
			dl.ChildKeyIn(counts[0], ids)(w)
		} else {
			w.WriteString("1=0")
		}
		if len(parents) > 0 {
			for _, ref := range cleared {
				w.WriteString(" OR ")
				dl.ChildColumnIn(counts[0], ref, parents)(w)
			}
		}
		w.WriteString(")")
	}
	before, err := engine.ReadCounted(ctx, c, dl, counts, cond, true)
	if err != nil {
		return nil, fmt.Errorf("entcounter: read the %s rows whose counts a write changes: %w", child, err)
	}
	if len(before) > engine.MaxHookRows {
		return nil, fmt.Errorf("entcounter: an edge write to %d %s rows at once: counts kept by hooks allow %d per statement", len(before), child, engine.MaxHookRows)
	}
	v, err := next.Mutate(ctx, m)
	if err != nil {
		return v, err
	}
	keys := append([]any(nil), ids...) // a created parent's added children may not have been read as theirs
	for _, row := range before {
		keys = append(keys, row.Key)
	}
	if len(keys) == 0 {
		return v, nil
	}
	after, err := engine.ReadCounted(ctx, c, dl, counts, dl.ChildKeyIn(counts[0], keys), false)
	if err == nil {
		err = engine.ApplyCounts(ctx, c, dl, counts, before, after)
	}
	if err != nil {
		return v, fmt.Errorf("entcounter: count the %s rows an edge write moved: %w", child, err)
	}
	return v, nil
}
