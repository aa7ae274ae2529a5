package entrt

import (
	"context"
	"errors"
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
var ErrNeedsTx = errors.New("a write that changes a count kept by hooks must run in a transaction (client.Tx)")

// ErrHookedUpsert is wrapped by the error for an upsert (OnConflict) of
// rows whose count is kept by hooks: it may update rows the hook cannot
// name before the write. The write ran in the caller's transaction, which
// must roll back.
var ErrHookedUpsert = errors.New("an upsert of rows whose count is kept by hooks cannot be counted: roll back, and write without OnConflict or keep the count with triggers")

// hookedMutation is what the generated code adds to the mutations of
// schemas whose writes change counts kept by hooks.
type hookedMutation interface {
	ent.Mutation
	Source
	HotCounterRowKeys(ctx context.Context) ([]any, error)
	HotCounterUpsert() bool
	WhereP(...func(*entsql.Selector))
}

// CountHook returns the ent hook that keeps counts declared with [ByHooks].
// The extension registers it on the child and parent schemas of such
// counts in the generated config, so every client and transaction runs it;
// users do not call it.
//
// Around an update or delete of child rows, in the mutation's transaction,
// it reads the ids the mutation targets (without query interceptors, which
// ent does not apply to writes), locks those rows (FOR UPDATE) and reads
// the parents they count for, pins the mutation to those ids (so a row
// inserted meanwhile is neither written nor miscounted), and after the
// write reads the rows again and adds the difference to the parents'
// slots, in one order for every writer. After a create it reads the new
// row's parents. A parent's edge setters (AddXIDs, RemoveXIDs, ClearX)
// are counted the same way.
func CountHook() ent.Hook {
	return func(next ent.Mutator) ent.Mutator {
		return ent.MutateFunc(func(ctx context.Context, m ent.Mutation) (ent.Value, error) {
			hm, ok := m.(hookedMutation)
			if !ok {
				return next.Mutate(ctx, m)
			}
			r := hm.HotCounter()
			if err := r.ChildCountsMigrated(ctx, m.Type()); err != nil {
				return nil, err
			}
			// The parent side first (its edge setters move children), then
			// the child side, for a schema that is both.
			mut := next
			children := map[string]bool{}
			for _, d := range r.Defs {
				if d.Count != nil && d.Count.Hooks && d.Count.Across == nil && d.Type == m.Type() && !children[d.Count.Type] {
					children[d.Count.Type] = true
					child, inner := d.Count.Type, mut
					mut = ent.MutateFunc(func(ctx context.Context, m ent.Mutation) (ent.Value, error) {
						return edgeHook(ctx, hm, r, child, inner)
					})
				}
			}
			if edges := r.m2mEdges(m.Type()); len(edges) > 0 {
				inner := mut
				mut = ent.MutateFunc(func(ctx context.Context, m ent.Mutation) (ent.Value, error) {
					return m2mHook(ctx, hm, r, edges, inner)
				})
			}
			if counts := r.HookCounts(m.Type()); len(counts) > 0 {
				return childHook(ctx, hm, r, counts, mut)
			}
			return mut.Mutate(ctx, m)
		})
	}
}

// countingKey marks a context in which a childHook counts a mutation (the
// mutation itself is the value).
type countingKey struct{}

// childHook counts a create, update or delete of child rows. A hook below
// it may run the same mutation through the client's hooks again, as ent's
// documented soft-delete mixin does (a delete made an update, passed to
// Client().Mutate): the outer call counts it, reading the rows before and
// after the whole write, and the inner one passes it on, or it would be
// counted twice.
func childHook(ctx context.Context, m hookedMutation, r Runtime, counts []countersql.Count, next ent.Mutator) (ent.Value, error) {
	if outer, _ := ctx.Value(countingKey{}).(ent.Mutation); outer == ent.Mutation(m) {
		return next.Mutate(ctx, m)
	}
	ctx = context.WithValue(ctx, countingKey{}, ent.Mutation(m))
	if !r.InTx() {
		return nil, fmt.Errorf("entcounter: %s %s: %w", m.Op(), m.Type(), ErrNeedsTx)
	}
	dl, err := r.Dialect(ctx)
	if err != nil {
		return nil, err
	}
	c := Conn{Ex: r.driver(), Dialect: r.driver().Dialect()}
	var before []engine.CountedRow
	var keys []any
	create := m.Op().Is(ent.OpCreate)
	if !create {
		if keys, err = m.HotCounterRowKeys(ctx); err != nil {
			return nil, err
		}
		if len(keys) > engine.MaxHookRows {
			return nil, fmt.Errorf("entcounter: a write to %d %s rows at once: counts kept by hooks allow %d per statement; write in batches",
				len(keys), m.Type(), engine.MaxHookRows)
		}
		if len(keys) > 0 {
			if before, err = engine.ReadCounted(ctx, c, dl, counts, dl.ChildKeyIn(counts[0], keys), true); err != nil {
				return nil, fmt.Errorf("entcounter: read the %s rows whose counts a write changes: %w", m.Type(), err)
			}
		}
		keys = keys[:0]
		for _, row := range before {
			keys = append(keys, row.Key)
		}
		// Pinned even when empty: a row that matches by the time the
		// statement runs was not read, and must not be written.
		m.WhereP(func(s *entsql.Selector) { s.Where(entsql.In(s.C(counts[0].ChildKey), keys...)) })
	}
	v, err := next.Mutate(ctx, m)
	if err != nil {
		return v, err
	}
	if create {
		if m.HotCounterUpsert() {
			return v, fmt.Errorf("entcounter: %s: %w", m.Type(), ErrHookedUpsert)
		}
		id, ok := mutationID(m)
		if !ok {
			return v, fmt.Errorf("entcounter: the created %s has no id", m.Type())
		}
		keys = []any{id}
	}
	if err := engine.CountWritten(ctx, c, dl, counts, before, keys); err != nil {
		return v, fmt.Errorf("entcounter: count the %s rows written: %w", m.Type(), err)
	}
	return v, nil
}

// hookCounts returns the counts kept by hooks whose child is typ, in one
// order for every writer (by slot table).
func (r Runtime) HookCounts(typ string) []countersql.Count {
	var out []countersql.Count
	for _, d := range r.Defs {
		if d.Count != nil && d.Count.Hooks && d.Count.Across == nil && d.Count.Type == typ {
			out = append(out, d.CountSpec())
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Slots < out[j].Slots })
	return out
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

// edgeHook keeps the counts of child schema child kept by hooks through a
// parent's edge setters (AddItemIDs, RemoveItemIDs, ClearItems), which
// write the child rows' reference without a child mutation. It locks the
// children the mutation names before the write and, for a clear, the
// parents first (FOR UPDATE, which waits for any transaction adding a child
// to them: its foreign key check holds the parent row), then the
// children of those parents; after the write it reads the children again
// and adds the difference.
func edgeHook(ctx context.Context, m hookedMutation, r Runtime, child string, next ent.Mutator) (ent.Value, error) {
	var (
		ids     []any // children named by the mutation
		cleared []string
	)
	for _, d := range r.Defs {
		if d.Count == nil || !d.Count.Hooks || d.Type != m.Type() || d.Count.Type != child {
			continue
		}
		e := d.Count.Edge
		for _, id := range append(m.AddedIDs(e), m.RemovedIDs(e)...) {
			ids = append(ids, id)
		}
		if m.EdgeCleared(e) {
			cleared = append(cleared, d.Count.Ref)
		}
	}
	if len(ids) == 0 && len(cleared) == 0 {
		return next.Mutate(ctx, m)
	}
	if !r.InTx() {
		return nil, fmt.Errorf("entcounter: %s %s edges: %w", m.Op(), m.Type(), ErrNeedsTx)
	}
	dl, err := r.Dialect(ctx)
	if err != nil {
		return nil, err
	}
	counts := r.HookCounts(child)
	c := Conn{Ex: r.driver(), Dialect: r.driver().Dialect()}
	var parents []any
	if len(cleared) > 0 && !m.Op().Is(ent.OpCreate) {
		if parents, err = m.HotCounterRowKeys(ctx); err != nil {
			return nil, err
		}
		if err := engine.LockForClear(ctx, c, dl, counts[0], engine.SortKeys(parents), false); err != nil {
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
	if err := engine.CountWritten(ctx, c, dl, counts, before, keys); err != nil {
		return v, fmt.Errorf("entcounter: count the %s rows an edge write moved: %w", child, err)
	}
	return v, nil
}
