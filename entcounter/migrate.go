package entcounter

import (
	"context"
	"fmt"
	"strings"

	"ariga.io/atlas/sql/migrate"
	atlasschema "ariga.io/atlas/sql/schema"
	"entgo.io/ent/dialect"
	"entgo.io/ent/dialect/sql/schema"

	"github.com/hotcounter/hotcounter/internal/countersql"
	"github.com/hotcounter/hotcounter/internal/engine"
	"github.com/hotcounter/hotcounter/internal/entrt"
)

// WithCounters is the migration option for a schema with counters:
//
//	err := client.Schema.Create(ctx, entcounter.WithCounters(client))
//
// Around ent's own changes, in the migration's transaction where the
// database has transactional DDL (PostgreSQL, SQLite), it
//   - checks every counter against a column of its name that the table
//     already has (one that held a plain count before): it must hold
//     integers; a rollup counter's NULLs become 0 before ent makes the
//     column NOT NULL;
//   - checks that a parent whose slot table is being created has a
//     primary key the slot table's foreign key can reference;
//   - installs the triggers that keep counts of child rows (see
//     [InstallTriggers]), and recounts a count whose slot table it
//     created, so that child rows written before the count existed are
//     counted.
//
// A sum counter declared over an existing column needs nothing more: loads
// add the column to the slots until [MoveToSlots] empties it. ent runs
// apply hooks only when the migration changes something; declaring a
// counter adds its slot table, so that first migration does the work. For
// versioned migrations, see the adoption guide in docs/.
func WithCounters(src Source) schema.MigrateOption {
	return schema.WithApplyHook(func(next schema.Applier) schema.Applier {
		return schema.ApplyFunc(func(ctx context.Context, ex dialect.ExecQuerier, plan *migrate.Plan) error {
			r := src.HotCounter()
			c := entrt.Conn{Ex: ex, Dialect: r.Driver.Dialect()}
			dl, err := r.Dialect()
			if err != nil {
				return err
			}
			before := make([]engine.Storage, len(r.Defs))
			for i, d := range r.Defs {
				if before[i], err = prepareColumn(ctx, c, dl, d); err != nil {
					return err
				}
			}
			if err := guardRebuilds(ctx, c, dl, r, before, plan); err != nil {
				return err
			}
			if err := next.Apply(ctx, ex, plan); err != nil {
				return err
			}
			if err := installTriggers(ctx, c, r); err != nil {
				return err
			}
			for i, d := range r.Defs {
				t := d.Tables()
				if d.Count != nil && !before[i].Tables[t.Slots] {
					if _, err := engine.Recount(ctx, c, dl, d.CountSpec(), d.Rollup, RollupBatchSize,
						func(w countersql.Writer) { w.WriteString("1=1") }, func() bool { return false }); err != nil {
						return fmt.Errorf("entcounter: count the existing %s rows of %s: %w", d.Count.Table, d.Name(), err)
					}
				}
				st, err := engine.Probe(ctx, c, dl, t)
				if err != nil {
					return fmt.Errorf("entcounter: %s: %w", d.Name(), err)
				}
				r.Storages().Set(t, st)
			}
			return nil
		})
	})
}

// WithTriggers is the migration option that installs the triggers of
// [InstallTriggers] as part of the migration.
//
// Deprecated: use [WithCounters], which does that and readies existing
// columns and counts.
func WithTriggers(src Source) schema.MigrateOption { return WithCounters(src) }

// prepareColumn checks and readies a column of d's name that the parent
// table already has, before ent migrates it, and returns what it found.
func prepareColumn(ctx context.Context, c entrt.Conn, dl countersql.Dialect, d Def) (engine.Storage, error) {
	t := d.Tables()
	st, err := engine.Probe(ctx, c, dl, t)
	if err != nil {
		return st, fmt.Errorf("entcounter: %s: read the columns of %s: %w", d.Name(), t.Parent, err)
	}
	if st.Column && !st.Integer() {
		return st, fmt.Errorf("entcounter: %s: the existing column %s.%s is %s; a counter needs an integer column: convert it first, or rename it out of the way",
			d.Name(), t.Parent, t.Column, st.Type)
	}
	if st.Column && d.Rollup && st.Nullable {
		if _, err := engine.ZeroNulls(ctx, c, dl, t, RollupBatchSize); err != nil {
			return st, fmt.Errorf("entcounter: %s: set the NULLs of %s.%s to 0: %w", d.Name(), t.Parent, t.Column, err)
		}
	}
	if !st.Tables[t.Slots] {
		exists, err := engine.QueryKeys(ctx, c, func(w countersql.Writer) { dl.TableExists(w, t.Parent) })
		if err != nil {
			return st, err
		}
		if len(exists) > 0 {
			ok, err := engine.KeyUnique(ctx, c, dl, t.Parent, t.ParentKey)
			if err != nil {
				return st, fmt.Errorf("entcounter: %s: read the keys of %s: %w", d.Name(), t.Parent, err)
			}
			if !ok {
				return st, fmt.Errorf("entcounter: %s: table %s has no primary key (or unique index) on %s, which the foreign key of %s must reference; add one first, as in ALTER TABLE %s ADD PRIMARY KEY (%s)",
					d.Name(), t.Parent, t.ParentKey, t.Slots, t.Parent, t.ParentKey)
			}
		}
	}
	return st, nil
}

// guardRebuilds refuses a SQLite migration that would rebuild a counter's
// parent table (SQLite alters a table by copying it, dropping it and
// renaming the copy) where that would lose counts:
//   - with foreign keys enforced on the migration's connection (ent turns
//     them off on another connection of the pool than the one its
//     transaction runs on), dropping the old table cascades to the slot
//     tables and deletes their rows;
//   - a sum counter declared over an existing column without AdoptColumn:
//     the copy has only the columns the schema declares.
func guardRebuilds(ctx context.Context, c entrt.Conn, dl countersql.Dialect, r Runtime, before []engine.Storage, plan *migrate.Plan) error {
	if !dl.RecreatesTables() {
		return nil
	}
	rebuilt := map[string]bool{}
	for _, ch := range plan.Changes {
		if m, ok := ch.Source.(*atlasschema.ModifyTable); ok && strings.HasPrefix(ch.Cmd, "DROP TABLE") {
			rebuilt[m.T.Name] = true
		}
	}
	if len(rebuilt) == 0 {
		return nil
	}
	fks, err := engine.QueryKeys(ctx, c, func(w countersql.Writer) { dl.ForeignKeysOn(w) })
	if err != nil {
		return err
	}
	enforced := len(fks) > 0 && engine.KeyText(fks[0]) == "1"
	for i, d := range r.Defs {
		t := d.Tables()
		if !rebuilt[t.Parent] {
			continue
		}
		if enforced && before[i].Tables[t.Slots] {
			return fmt.Errorf("entcounter: %s: this migration rebuilds %s (SQLite alters a table by copying it), and its connection enforces foreign keys, "+
				"so dropping the old table would delete every row of %s through ON DELETE CASCADE; run it on a client whose pool has one connection "+
				"(db.SetMaxOpenConns(1)), where ent can turn foreign keys off", d.Name(), t.Parent, t.Slots)
		}
		if before[i].Column && !d.Rollup && d.Count == nil && !d.KeepColumn {
			return fmt.Errorf("entcounter: %s: this migration rebuilds %s (SQLite alters a table by copying it), and the copy would drop the column %s, "+
				"which still holds counts: declare the counter with entcounter.AdoptColumn() until entcounter.MoveToSlots has emptied it", d.Name(), t.Parent, t.Column)
		}
	}
	return nil
}
