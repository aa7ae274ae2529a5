package entcounter

import (
	"context"
	"fmt"

	"github.com/hotcounter/hotcounter/internal/engine"
	"github.com/hotcounter/hotcounter/internal/entrt"
)

// InstallTriggers (re)creates the triggers that keep every count of child
// rows ([Counts]) of the client's schema: after each INSERT, UPDATE and
// DELETE on a child table they add to the slots of the parents whose count
// changed, so raw SQL and bulk statements are counted too. Run it after
// Schema.Create, and again after a migration that recreates a child table
// (SQLite recreates a table to alter a column, and its triggers go with
// it). It replaces triggers it created before, drops those left on the
// child table of a count that hooks keep now ([ByHooks]: they would count
// its writes a second time), recounts a count whose triggers were missing,
// and must not run inside a transaction.
//
//	if err := client.Schema.Create(ctx); err != nil { ... }
//	if err := entcounter.InstallTriggers(ctx, client); err != nil { ... }
//
// PostgreSQL: statement-level triggers, one upsert per statement, parents in
// key order. MySQL/MariaDB and SQLite: row-level triggers; a move updates
// the lower parent key first. Every writer uses one slot per parent per
// session, so two transactions take slot locks in the same order.
func InstallTriggers(ctx context.Context, src Source) error {
	r, err := clientOnly(src, "InstallTriggers")
	if err != nil {
		return err
	}
	s := entrt.NewSession(r)
	missing, err := installTriggers(ctx, s, r)
	if err != nil {
		return err
	}
	return recountMissed(ctx, s, r, missing)
}

// installTriggers readies the triggers of every count of child rows
// (engine.Store.InstallCountTriggers: installed afresh for a count kept by
// triggers, dropped for one kept by hooks), in s's transaction if it has
// one, and returns the counts whose triggers were missing (some or all):
// the child rows written without them were not counted.
func installTriggers(ctx context.Context, s engine.Session, r entrt.Runtime) (missing map[string]bool, err error) {
	st, err := r.Store(ctx)
	if err != nil {
		return nil, err
	}
	missing = map[string]bool{}
	for _, d := range r.Defs {
		if d.Count == nil {
			continue
		}
		if missing[d.Name()], err = st.InstallCountTriggers(ctx, s, d.Counter(st.Dialect), d.CountSpec(), d.Count.Hooks); err != nil {
			return nil, err
		}
	}
	return missing, nil
}

// recountMissed recounts the counts whose triggers were missing.
func recountMissed(ctx context.Context, s engine.Session, r entrt.Runtime, missing map[string]bool) error {
	st, err := r.Store(ctx)
	if err != nil {
		return err
	}
	for _, d := range r.Defs {
		if d.Count != nil && missing[d.Name()] {
			if _, err := st.CountExisting(ctx, s, d.Counter(st.Dialect), d.CountSpec()); err != nil {
				return err
			}
		}
	}
	return nil
}

// Recount recomputes the count of child rows typ.field (a counter declared
// with [Counts]) from the child table, for the parents with the given ids
// (all parents without ids), in batches, and corrects those whose count was
// off. It returns how many it corrected.
//
//	n, err := entcounter.Recount(ctx, client, "Category", category.FieldObjectCount)
//	n, err := client.Category.RecountObjectCount(ctx) // the same, generated and typed
//
// typ is the schema's type name (Category) or its table. Writes may go on
// meanwhile: each batch reads the child rows and the counter in one
// statement (one snapshot) and adds the difference to a slot, and a write
// that commits after that snapshot is counted by its own trigger. Counts
// drift only where triggers did not run (not installed yet, dropped by a
// migration, a TRUNCATE); Recount is the repair.
func Recount(ctx context.Context, src Source, typ, field string, ids ...any) (int64, error) {
	r := src.HotCounter()
	d, found := findDef(r, typ, field)
	if !found {
		return 0, fmt.Errorf("entcounter: Recount %s.%s: not a count of child rows (declare it with entcounter.Counts)", typ, field)
	}
	return r.Recount(ctx, d, ids...)
}
