package entcounter

import (
	"context"
	"fmt"

	"github.com/hotcounter/hotcounter/internal/countersql"
	"github.com/hotcounter/hotcounter/internal/engine"
	"github.com/hotcounter/hotcounter/internal/entrt"
)

// InstallTriggers (re)creates the triggers that keep every count of child
// rows ([Counts]) of the client's schema: after each INSERT, UPDATE and
// DELETE on a child table they add to the slots of the parents whose count
// changed, so raw SQL and bulk statements are counted too. Run it after
// Schema.Create, and again after a migration that recreates a child table
// (SQLite recreates a table to alter a column, and its triggers go with
// it). It replaces triggers it created before and must not run inside a
// transaction.
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

// installTriggers (re)creates the triggers of every count kept by
// triggers, and returns the counts whose triggers were missing (some or
// all): the child rows written without them were not counted.
func installTriggers(ctx context.Context, c engine.Conn, r entrt.Runtime) (missing map[string]bool, err error) {
	dl, err := r.Dialect()
	if err != nil {
		return nil, err
	}
	missing = map[string]bool{}
	for _, d := range r.Defs {
		if d.Count == nil || d.Count.Hooks {
			// A count kept by hooks gets no triggers: they would count
			// its child writes a second time.
			continue
		}
		gone, err := engine.CountTriggersMissing(ctx, c, dl, d.CountSpec())
		if err != nil {
			return nil, fmt.Errorf("entcounter: read the triggers that keep %s (counts %s): %w", d.Name(), d.Count.Table, err)
		}
		missing[d.Name()] = gone
		for _, step := range dl.InstallCountTriggers(d.CountSpec()) {
			if _, err := c.Exec(ctx, step); err != nil {
				return nil, fmt.Errorf("entcounter: install the triggers that keep %s (counts %s): %w", d.Name(), d.Count.Table, err)
			}
		}
	}
	return missing, nil
}

// recountMissed recounts the counts whose triggers were missing.
func recountMissed(ctx context.Context, c engine.Session, r entrt.Runtime, missing map[string]bool) error {
	dl, err := r.Dialect()
	if err != nil {
		return err
	}
	for _, d := range r.Defs {
		if d.Count == nil || !missing[d.Name()] {
			continue
		}
		if _, err := engine.Recount(ctx, c, dl, d.CountSpec(), d.Rollup, r.Settings().BatchSize,
			func(w countersql.Writer) { w.WriteString("1=1") }, func() bool { return false }); err != nil {
			return fmt.Errorf("entcounter: count the %s rows of %s written while its triggers were missing: %w", d.Count.Table, d.Name(), err)
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
	if !found || d.Count == nil {
		return 0, fmt.Errorf("entcounter: Recount %s.%s: not a count of child rows (declare it with entcounter.Counts)", typ, field)
	}
	dl, err := r.Dialect()
	if err != nil {
		return 0, err
	}
	t := d.Tables()
	cond := func(w countersql.Writer) { w.WriteString("1=1") }
	if len(ids) > 0 {
		cond = dl.KeyIn(t, ids)
	}
	n, err := engine.Recount(ctx, entrt.NewSession(r), dl, d.CountSpec(), d.Rollup, r.Settings().BatchSize, cond, func() bool { return ctx.Err() != nil })
	r.Observer().Recount(ctx, d.Table, d.Field, n, err)
	if err != nil {
		return n, fmt.Errorf("entcounter: recount %s: %w", d.Name(), err)
	}
	return n, nil
}
