package entrt

import (
	"context"
	"errors"
	"fmt"

	"github.com/hotcounter/hotcounter"
	"github.com/hotcounter/hotcounter/internal/countersql"
	"github.com/hotcounter/hotcounter/internal/engine"
)

// What entcounter's generic functions (Take, Recount, Buffer) and the
// typed methods the extension generates (client.Product.TakeStock,
// client.Shelf.RecountBookCount, client.Post.Buffered(buf).AddLikes) both
// call, once the counter is known.

// Lookup returns the counter field of schema typ (its type name, as the
// generated code names it).
func (r Runtime) Lookup(typ, field string) (Def, bool) {
	for _, d := range r.Defs {
		if d.Type == typ && d.Field == field {
			return d, true
		}
	}
	return Def{}, false
}

// Take takes amount from the guarded counter d of the row id, in full or
// not at all (see entcounter.Take).
func (r Runtime) Take(ctx context.Context, d Def, id any, amount int64) error {
	if !d.Guarded {
		return fmt.Errorf("entcounter: Take %s: %w: declare it with entcounter.Guarded()", d.Name(), hotcounter.ErrNotGuarded)
	}
	dl, err := r.Dialect(ctx)
	if err != nil {
		return err
	}
	key := fmt.Sprintf("%s\x00%v", d.SlotTable, id)
	if err := engine.TakeTogether(ctx, NewSession(r), dl, r.Takes(), key, d.Tables(), d.Slots, id, amount); err != nil {
		if errors.Is(err, engine.ErrNotFound) && r.NotFound != nil {
			return fmt.Errorf("entcounter: take %d from %s: %w (%w)", amount, d.Name(), r.NotFound(d.Type), err)
		}
		return fmt.Errorf("entcounter: take %d from %s: %w", amount, d.Name(), err)
	}
	return nil
}

// Recount recomputes the count d from its child rows for the parents ids
// (none: every parent) and returns how many were off (see
// entcounter.Recount).
func (r Runtime) Recount(ctx context.Context, d Def, ids ...any) (int64, error) {
	if d.Count == nil {
		return 0, fmt.Errorf("entcounter: Recount %s: not a count of child rows (declare it with entcounter.Counts)", d.Name())
	}
	st, err := r.Store(ctx)
	if err != nil {
		return 0, err
	}
	var cond func(countersql.Writer)
	if len(ids) > 0 {
		cond = st.Dialect.KeyIn(d.Tables(), ids)
	}
	return st.Recount(ctx, NewSession(r), d.Counter(st.Dialect), d.CountSpec(), cond)
}

// Incrementer is what a typed buffered add calls: entcounter's Buffer.
type Incrementer interface {
	Increment(ctx context.Context, typ, field string, id any, delta int64) error
}

// TakeTyped is the body of a generated TakeX method: Take of the counter
// field of schema typ.
func TakeTyped(ctx context.Context, src Source, typ, field string, id any, amount int64) error {
	r := src.HotCounter()
	d, ok := r.Lookup(typ, field)
	if !ok {
		return fmt.Errorf("entcounter: Take %s.%s: %w: regenerate the ent code", typ, field, hotcounter.ErrNotCounter)
	}
	return r.Take(ctx, d, id, amount)
}

// RecountTyped is the body of a generated RecountX method.
func RecountTyped(ctx context.Context, src Source, typ, field string, ids ...any) (int64, error) {
	r := src.HotCounter()
	d, ok := r.Lookup(typ, field)
	if !ok {
		return 0, fmt.Errorf("entcounter: Recount %s.%s: %w: regenerate the ent code", typ, field, hotcounter.ErrNotCounter)
	}
	return r.Recount(ctx, d, ids...)
}
