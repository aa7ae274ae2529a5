package entrt

import (
	"context"
	"fmt"
	"sort"

	"entgo.io/ent"

	"github.com/hotcounter/hotcounter/internal/countersql"
	"github.com/hotcounter/hotcounter/internal/engine"
)

// m2mEdge is one M2M edge of a mutation's type whose join table holds
// rows counted by hooks: the edge's name, the join table's counts kept by
// hooks (counts[0] orders a Pair), and the join columns naming this
// type's rows (mine) and the other side's (theirs).
type m2mEdge struct {
	edge         string
	counts       []countersql.Count
	mine, theirs string
	// lockCount is the count whose parents (or, across, whose other
	// side's rows) a clear locks first: this type's rows (LockForClear).
	lockCount     countersql.Count
	across        bool
	added, remove []any
	cleared       bool
}

// m2mEdges returns the M2M edges of typ through which a count kept by
// hooks is changed: the counting side's edge and the other side's edge
// back (a delete of either side's row takes its join rows with it).
func (r Runtime) m2mEdges(typ string) []*m2mEdge {
	var out []*m2mEdge
	for _, d := range r.Defs {
		c := d.Count
		if c == nil || !c.Hooks || c.Across == nil {
			continue
		}
		cs := d.CountSpec()
		if d.Type == typ {
			out = append(out, &m2mEdge{edge: c.Edge, mine: c.Ref, theirs: c.Across.Ref,
				lockCount: cs})
		}
		if c.Type == typ {
			out = append(out, &m2mEdge{edge: c.Back, mine: c.Across.Ref, theirs: c.Ref,
				lockCount: cs, across: true})
		}
	}
	for _, e := range out {
		e.counts = r.joinCounts(r.joinOf(typ, e))
	}
	return out
}

// joinOf returns the join table of e, an edge of typ.
func (r Runtime) joinOf(typ string, e *m2mEdge) string {
	for _, d := range r.Defs {
		if c := d.Count; c != nil && c.Hooks && c.Across != nil && (d.Type == typ || c.Type == typ) &&
			(c.Ref == e.mine && c.Across.Ref == e.theirs || c.Ref == e.theirs && c.Across.Ref == e.mine) {
			return c.Table
		}
	}
	return ""
}

// joinCounts returns the counts kept by hooks through the join table, in
// one order for every writer (by slot table).
func (r Runtime) joinCounts(join string) []countersql.Count {
	var out []countersql.Count
	for _, d := range r.Defs {
		if c := d.Count; c != nil && c.Hooks && c.Across != nil && c.Table == join {
			out = append(out, d.CountSpec())
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Slots < out[j].Slots })
	return out
}

// pair returns the join row of this type's row mine and the other side's
// row theirs, as a Pair in the order of e.counts[0].KeyColumns.
func (e *m2mEdge) pair(mine, theirs any) countersql.Pair {
	if e.counts[0].Ref == e.mine {
		return countersql.Pair{mine, theirs}
	}
	return countersql.Pair{theirs, mine}
}

// m2mHook keeps the counts kept by hooks through M2M join tables, which
// ent writes inside a node's mutation (AddXIDs, RemoveXIDs, ClearX on
// either side, creates with edges, deletes of either side's rows, whose
// join rows go by the join's cascade), with no mutation of the join table
// to hook. The hook takes those edge writes out of the mutation
// (ResetEdge) and makes them itself, in the mutation's transaction, with
// engine.WriteJoinRows: the rows it deletes are read and locked first and
// deleted by their keys, each pair it adds is inserted by a statement of
// its own, and it counts exactly the rows it deleted and inserted. A
// clear, and a delete of rows, first locks the rows whose join rows it
// takes (FOR UPDATE): a transaction attaching one of them holds it
// through the join's foreign key check, so the lock waits for it, and
// none can start until this one commits. A create's pairs are inserted
// after the node.
func m2mHook(ctx context.Context, m hookedMutation, r Runtime, edges []*m2mEdge, next ent.Mutator) (ent.Value, error) {
	del := m.Op().Is(ent.OpDelete) || m.Op().Is(ent.OpDeleteOne)
	var todo []*m2mEdge
	for _, e := range edges {
		if e.edge != "" {
			e.added, e.remove, e.cleared = values(m.AddedIDs(e.edge)), values(m.RemovedIDs(e.edge)), m.EdgeCleared(e.edge)
		}
		e.cleared = e.cleared || del
		if len(e.added) > 0 || len(e.remove) > 0 || e.cleared {
			todo = append(todo, e)
		}
	}
	if len(todo) == 0 {
		return next.Mutate(ctx, m)
	}
	if !r.InTx() {
		return nil, fmt.Errorf("entcounter: %s %s edges: %w", m.Op(), m.Type(), ErrNeedsTx)
	}
	dl, err := r.Dialect(ctx)
	if err != nil {
		return nil, err
	}
	c := Conn{Ex: r.driver(), Dialect: r.driver().Dialect()}
	for _, e := range todo {
		if e.edge != "" && !del {
			if err := m.ResetEdge(e.edge); err != nil {
				return nil, err
			}
		}
	}
	if m.Op().Is(ent.OpCreate) {
		v, err := next.Mutate(ctx, m)
		if err != nil {
			return v, err
		}
		id, ok := mutationID(m)
		if !ok {
			return v, fmt.Errorf("entcounter: the created %s has no id", m.Type())
		}
		for _, e := range todo {
			if err := writeEdge(ctx, c, dl, e, []any{id}, false); err != nil {
				return v, fmt.Errorf("entcounter: %s %s: %w", m.Type(), e.edge, err)
			}
		}
		return v, nil
	}
	ids, err := m.HotCounterRowKeys(ctx)
	if err != nil {
		return nil, err
	}
	if del {
		return deleteEdges(ctx, c, dl, m.Type(), todo, engine.SortKeys(ids), func() (ent.Value, error) { return next.Mutate(ctx, m) })
	}
	if len(ids) > 0 {
		for _, e := range todo {
			if err := writeEdge(ctx, c, dl, e, engine.SortKeys(ids), true); err != nil {
				return nil, fmt.Errorf("entcounter: %s %s: %w", m.Type(), e.edge, err)
			}
		}
	}
	return next.Mutate(ctx, m)
}

// deleteEdges runs the delete of this type's rows ids (del) and counts the
// join rows it takes with it: the join's foreign keys delete them with the
// row (ON DELETE CASCADE), so the hook locks the rows and reads the join
// rows first (as a clear does), lets the delete run, and counts those that
// are gone. A delete that another hook turns into an update (ent's
// soft-delete mixin re-runs the mutation as an update of delete_time)
// takes none: the join rows and their counts stay, and a restore needs
// nothing put back.
func deleteEdges(ctx context.Context, c Conn, dl engine.Dialect, typ string, todo []*m2mEdge, ids []any, del func() (ent.Value, error)) (ent.Value, error) {
	type taken struct {
		counts []countersql.Count
		cond   func(countersql.Writer)
		before []engine.CountedRow
	}
	var all []taken
	if len(ids) > 0 {
		// A join table with a count on each side is reached by two edges
		// of a type on it; its rows naming ids are read (and counted) once.
		seen := map[[2]string]bool{}
		for _, e := range todo {
			k := [2]string{e.counts[0].Child, e.mine}
			if seen[k] {
				continue
			}
			seen[k] = true
			if err := engine.LockForClear(ctx, c, dl, e.lockCount, ids, e.across); err != nil {
				return nil, fmt.Errorf("entcounter: %s: %w", e.edge, err)
			}
			cond := dl.ChildColumnIn(e.counts[0], e.mine, ids)
			before, err := engine.ReadCounted(ctx, c, dl, e.counts, cond, true)
			if err != nil {
				return nil, fmt.Errorf("entcounter: %s: %w", e.edge, err)
			}
			if len(before) > engine.MaxHookRows {
				return nil, fmt.Errorf("entcounter: a delete of %s that takes %d %s rows at once: counts kept by hooks allow %d per statement",
					typ, len(before), e.counts[0].Child, engine.MaxHookRows)
			}
			all = append(all, taken{e.counts, cond, before})
		}
	}
	v, err := del()
	if err != nil {
		return v, err
	}
	for _, t := range all {
		if err := engine.CountAgain(ctx, c, dl, t.counts, t.before, t.cond); err != nil {
			return v, fmt.Errorf("entcounter: count the %s rows the delete of %s took: %w", t.counts[0].Child, typ, err)
		}
	}
	return v, nil
}

// writeEdge makes e's changes for this type's rows ids and counts them
// (engine.WriteJoinRows); lock locks those rows first for a clear.
func writeEdge(ctx context.Context, c Conn, dl engine.Dialect, e *m2mEdge, ids []any, lock bool) error {
	var clear func(countersql.Writer)
	if e.cleared {
		if lock {
			if err := engine.LockForClear(ctx, c, dl, e.lockCount, ids, e.across); err != nil {
				return err
			}
		}
		clear = dl.ChildColumnIn(e.counts[0], e.mine, ids)
	}
	var drop, add []countersql.Pair
	for _, id := range ids {
		for _, o := range e.remove {
			drop = append(drop, e.pair(id, o))
		}
		for _, o := range e.added {
			add = append(add, e.pair(id, o))
		}
	}
	return engine.WriteJoinRows(ctx, c, dl, e.counts, clear, drop, add)
}

func values(vs []ent.Value) []any {
	out := make([]any, len(vs))
	for i, v := range vs {
		out[i] = v
	}
	return out
}
