package entcounter

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"

	"ariga.io/atlas/sql/migrate"
	atlasschema "ariga.io/atlas/sql/schema"
	"entgo.io/ent/dialect"
	"entgo.io/ent/dialect/sql/schema"

	"github.com/hotcounter/hotcounter/internal/countersql"
	"github.com/hotcounter/hotcounter/internal/engine"
	"github.com/hotcounter/hotcounter/internal/entrt"
	"github.com/hotcounter/hotcounter/internal/spec"
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
//     counted;
//   - on PostgreSQL gives each slot table the migration created
//     fillfactor 90: room on every page for rows rewritten in place, which
//     [CompactPass] needs to leave the table no larger;
//   - folds back what the slot or delta table of a field that is no longer
//     a counter (its mixin replaced by a plain integer field of the same
//     name) still holds into that field's column, exactly once; the empty
//     table is left for you to drop. The migration that adds the column
//     folds after adding it; when the column is there already (a rollup
//     or append counter's), the fold runs before ent's changes, in
//     transactions of its own, from ent's diff step: pass WithCounters to
//     Schema.Create, not to a dry run (Schema.WriteTo, Schema.Diff).
//
// A migration of some of the schema's tables (the generated migrate.Create
// given some of migrate.Tables) does this for the counters whose tables
// (parent, slot or delta table, a count's child, middle or join tables)
// it holds, and leaves the others alone.
//
// A sum counter declared over an existing column needs nothing more: loads
// add the column to the slots until [MoveToSlots] empties it. ent runs
// apply hooks only when the migration changes something; declaring a
// counter adds its slot table, so that first migration does the work. For
// versioned migrations, see the adoption guide in docs/.
func WithCounters(src Source) schema.MigrateOption {
	var left []engine.Leftover // read from the schema ent migrates to, by the diff hook
	// covered holds the counters whose tables the migration holds, also
	// set by the diff hook: a migration of some of the schema's tables
	// (the generated migrate.Create given some of migrate.Tables) readies
	// their counters and leaves the others alone.
	var covered *entrt.Runtime
	runtime := func() entrt.Runtime {
		if covered != nil {
			return *covered
		}
		return src.HotCounter()
	}
	diff := schema.WithDiffHook(func(next schema.Differ) schema.Differ {
		return schema.DiffFunc(func(current, desired *atlasschema.Schema) ([]atlasschema.Change, error) {
			if writingFiles() {
				return nil, ErrWritesNoFiles
			}
			r := src.HotCounter().Covering(func(table string) bool { return tableNamed(desired, table) })
			covered = &r
			// A leftover whose column exists is folded now, in transactions
			// of its own: ent applies nothing (and runs no apply hook) when
			// the column is all the schema declares. One whose column this
			// migration adds is folded after ent has added it.
			var now []engine.Leftover
			now, left = splitLeftovers(leftovers(src.HotCounter(), desired), current)
			if err := foldLeftoversNow(r, now); err != nil {
				return nil, err
			}
			changes, err := next.Diff(current, desired)
			changes = keepSlotKeys(r, current, changes)
			if err != nil || len(changes) > 0 {
				return changes, err
			}
			// ent applies nothing and runs no apply hook: repair what a
			// migration without WithCounters left out.
			return changes, repairCounts(r, current)
		})
	})
	apply := schema.WithApplyHook(func(next schema.Applier) schema.Applier {
		return schema.ApplyFunc(func(ctx context.Context, ex dialect.ExecQuerier, plan *migrate.Plan) error {
			r := runtime()
			c := entrt.Conn{Ex: ex, Dialect: r.Driver.Dialect()}
			store, err := r.Store(ctx)
			if err != nil {
				return err
			}
			dl := store.Dialect
			before := make([]engine.Storage, len(r.Defs))
			for i, d := range r.Defs {
				if before[i], err = prepareColumn(ctx, c, store, d); err != nil {
					return err
				}
			}
			putBack, err := guardRebuilds(ctx, c, dl, r, before, plan)
			if err != nil {
				return err
			}
			if err := next.Apply(ctx, ex, plan); err != nil {
				return err
			}
			if err := putBack(ctx, c); err != nil {
				return err
			}
			missing, err := installTriggers(ctx, engine.TxSession{Conn: c}, r)
			if err != nil {
				return err
			}
			if err := store.Colocate(ctx, c, r.Counters(dl, func(entrt.Def) bool { return true })); err != nil {
				return err
			}
			for i, d := range r.Defs {
				t := d.Tables()
				if !before[i].Tables[t.Slots] && !d.Append {
					if err := engine.ReadySlotTable(ctx, c, dl, t); err != nil {
						return fmt.Errorf("entcounter: %s: %w", d.Name(), err)
					}
				}
				if d.Count != nil && (!before[i].Tables[t.Slots] || missing[d.Name()]) {
					if _, err := store.CountExisting(ctx, engine.TxSession{Conn: c}, d.Counter(dl), d.CountSpec()); err != nil {
						return err
					}
				}
				st, err := engine.Probe(ctx, c, dl, t)
				if err != nil {
					return fmt.Errorf("entcounter: %s: %w", d.Name(), err)
				}
				r.Storages().Set(t, st)
			}
			same := func(ctx context.Context, fn func(engine.Conn) error) error { return fn(c) }
			_, err = store.FoldLeftovers(ctx, c, same, left)
			return err
		})
	})
	return func(a *schema.Atlas) { diff(a); apply(a) }
}

// ErrWritesNoFiles is the error of a versioned migration (ent's NamedDiff,
// schema.NewMigrate with a directory) given WithCounters: a file holds
// what ent plans, and ent plans tables, not triggers. Write ent's file
// without it, then a file of the statements of SchemaSQL.
var ErrWritesNoFiles = errors.New("entcounter: WithCounters writes nothing into migration files (ent plans tables, not triggers): " +
	"run NamedDiff without it, then write the statements of entcounter.SchemaSQL(ctx, client) into the next file (docs/migrations.md)")

// writingFiles reports whether the migration calling the diff hook writes
// a migration file (ent's Atlas.NamedDiff is on the stack) rather than
// changing the database: ent's options say nothing of it.
func writingFiles() bool {
	pcs := make([]uintptr, 64)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(2, pcs)])
	for {
		f, more := frames.Next()
		if strings.HasSuffix(f.Function, "dialect/sql/schema.(*Atlas).NamedDiff") {
			return true
		}
		if !more {
			return false
		}
	}
}

// leftovers names the tables that would hold the values of the integer
// columns of desired that no counter of r declares, had they been counters
// (<singular table>_<column>_slots or _deltas, as SlotsOf names them).
func leftovers(r entrt.Runtime, desired *atlasschema.Schema) []engine.Leftover {
	counter := map[[2]string]bool{}
	for _, d := range r.Defs {
		t := d.Tables()
		counter[[2]string{t.Parent, t.Column}] = true
	}
	var out []engine.Leftover
	for _, tbl := range desired.Tables {
		if tbl.PrimaryKey == nil || len(tbl.PrimaryKey.Parts) != 1 || tbl.PrimaryKey.Parts[0].C == nil {
			continue
		}
		key := tbl.PrimaryKey.Parts[0].C.Name
		prefix := spec.Singular(tbl.Name)
		for _, col := range tbl.Columns {
			if _, integer := col.Type.Type.(*atlasschema.IntegerType); !integer || col.Name == key || counter[[2]string{tbl.Name, col.Name}] {
				continue
			}
			for _, deltas := range []bool{false, true} {
				name := prefix + "_" + col.Name + tableSuffix(deltas)
				if tableNamed(desired, name) {
					continue // still declared: not a leftover
				}
				out = append(out, engine.Leftover{Name: tbl.Name + "." + col.Name, Deltas: deltas,
					Table: countersql.Table{Parent: tbl.Name, ParentKey: key, Column: col.Name, Slots: name, Owner: prefix + "_id"}})
			}
		}
	}
	return out
}

// splitLeftovers splits left into those whose column current has (now)
// and the others (later).
func splitLeftovers(left []engine.Leftover, current *atlasschema.Schema) (now, later []engine.Leftover) {
	for _, l := range left {
		if t, ok := current.Table(l.Table.Parent); ok {
			if _, ok := t.Column(l.Table.Column); ok {
				now = append(now, l)
				continue
			}
		}
		later = append(later, l)
	}
	return now, later
}

// foldLeftoversNow folds left through r's client, a batch of parents per
// transaction, as RollupPass does.
// It runs from ent's diff hook, which ent calls without a context (a
// schema.Differ takes none): under Background.
func foldLeftoversNow(r entrt.Runtime, left []engine.Leftover) error {
	if len(left) == 0 {
		return nil
	}
	ctx := context.Background()
	st, s, err := ownPass(ctx, r, "WithCounters")
	if err != nil {
		return err
	}
	_, err = st.FoldLeftovers(ctx, s, engine.PassTransaction(s, st.Dialect), left)
	return err
}

// repairCounts installs the missing or outdated triggers of the counts
// whose tables exist, and recounts them, and drops the triggers left on the child table
// of a count that hooks keep: a first Schema.Create without WithCounters
// creates the tables, and a change of a count from triggers to hooks
// changes no table, so that a later migration with it has nothing to
// change.
//
// Like foldLeftoversNow, it runs from ent's diff hook, without a context.
func repairCounts(r entrt.Runtime, current *atlasschema.Schema) error {
	ctx := context.Background()
	s := entrt.NewSession(r)
	st, err := r.Store(ctx)
	if err != nil {
		return err
	}
	dl := st.Dialect
	missing := map[string]bool{}
	for _, d := range r.Defs {
		if d.Count == nil || !tableNamed(current, d.Count.Table) || !tableNamed(current, d.SlotTable) {
			continue
		}
		// Triggers all there as this release makes them send no DDL; those
		// missing, or made for another definition of the count (a changed
		// Where), are installed and the count recounted.
		if missing[d.Name()], err = st.InstallCountTriggers(ctx, s, d.Counter(dl), d.CountSpec(), d.Count.Hooks); err != nil {
			return err
		}
	}
	if err := recountMissed(ctx, s, r, missing); err != nil {
		return err
	}
	// A parent distributed since the last migration (Citus).
	return st.Colocate(ctx, s, r.Counters(dl, func(d entrt.Def) bool { return tableNamed(current, d.SlotTable) }))
}

// keepSlotKeys drops from ent's planned changes those that would key a
// counter's slot table by its id alone again where the table is keyed by
// its owner column and id, as the migration keys it for Citus to
// distribute it beside its parent (engine.Store.Colocate): Citus refuses a
// unique key without the column it distributes by, and the id stays
// unique within it. A table change left with no changes goes.
func keepSlotKeys(r entrt.Runtime, current *atlasschema.Schema, changes []atlasschema.Change) []atlasschema.Change {
	owners := map[string]string{}
	for _, d := range r.Defs {
		if t := d.Tables(); t.RowID != "" {
			owners[t.Slots] = t.Owner
		}
	}
	out := changes[:0]
	for _, ch := range changes {
		mt, ok := ch.(*atlasschema.ModifyTable)
		if ok && owners[mt.T.Name] != "" && keyedByOwner(current, mt.T.Name, owners[mt.T.Name]) {
			kept := mt.Changes[:0]
			for _, c := range mt.Changes {
				switch c.(type) {
				case *atlasschema.ModifyPrimaryKey, *atlasschema.DropPrimaryKey, *atlasschema.AddPrimaryKey:
					continue
				}
				kept = append(kept, c)
			}
			if mt.Changes = kept; len(kept) == 0 {
				continue
			}
		}
		out = append(out, ch)
	}
	return out
}

// keyedByOwner reports whether the table of current named table has a
// primary key of two columns, owner first.
func keyedByOwner(current *atlasschema.Schema, table, owner string) bool {
	t, ok := current.Table(table)
	if !ok || t.PrimaryKey == nil || len(t.PrimaryKey.Parts) != 2 {
		return false
	}
	c := t.PrimaryKey.Parts[0].C
	return c != nil && c.Name == owner
}

func tableNamed(s *atlasschema.Schema, name string) bool {
	_, ok := s.Table(name)
	return ok
}

// prepareColumn checks and readies a column of d's name that the parent
// table already has, before ent migrates it, and checks that the parent's
// key can be referenced by a slot table it does not have yet; it returns
// what it found.
func prepareColumn(ctx context.Context, c entrt.Conn, store engine.Store, d entrt.Def) (engine.Storage, error) {
	st, _, err := store.PrepareColumn(ctx, c, d.Counter(store.Dialect))
	return st, err
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
//
// Else it sets aside the count triggers on the rebuilt tables or naming
// them (engine.SetAsideTriggers: the rename of a copy fails on a trigger
// of another table that names the table) and returns the function that
// puts them back after ent's changes.
func guardRebuilds(ctx context.Context, c entrt.Conn, dl engine.Dialect, r entrt.Runtime, before []engine.Storage, plan *migrate.Plan) (func(context.Context, engine.Conn) error, error) {
	none := func(context.Context, engine.Conn) error { return nil }
	lite, rebuilds := dl.OnSQLite()
	if !rebuilds {
		return none, nil
	}
	rebuilt := map[string]bool{}
	for _, ch := range plan.Changes {
		if m, ok := ch.Source.(*atlasschema.ModifyTable); ok && strings.HasPrefix(ch.Cmd, "DROP TABLE") {
			rebuilt[m.T.Name] = true
		}
	}
	if len(rebuilt) == 0 {
		return none, nil
	}
	fks, err := engine.QueryKeys(ctx, c, lite.ForeignKeysOn)
	if err != nil {
		return nil, err
	}
	enforced := len(fks) > 0 && engine.KeyText(fks[0]) == "1"
	for i, d := range r.Defs {
		t := d.Tables()
		if !rebuilt[t.Parent] {
			continue
		}
		if enforced && before[i].Tables[t.Slots] {
			return nil, fmt.Errorf("entcounter: %s: this migration rebuilds %s (SQLite alters a table by copying it), and its connection enforces foreign keys, "+
				"so dropping the old table would delete every row of %s through ON DELETE CASCADE; run it on a client whose pool has one connection "+
				"(db.SetMaxOpenConns(1)), where ent can turn foreign keys off", d.Name(), t.Parent, t.Slots)
		}
		if before[i].Column && !d.Rollup && d.Count == nil && !d.KeepColumn {
			return nil, fmt.Errorf("entcounter: %s: this migration rebuilds %s (SQLite alters a table by copying it), and the copy would drop the column %s, "+
				"which still holds counts: declare the counter with entcounter.AdoptColumn() until entcounter.MoveToSlots has emptied it", d.Name(), t.Parent, t.Column)
		}
	}
	tables := make([]string, 0, len(rebuilt))
	for name := range rebuilt {
		tables = append(tables, name)
	}
	slices.Sort(tables)
	aside, err := engine.SetAsideTriggers(ctx, c, lite, tables)
	if err != nil {
		return nil, fmt.Errorf("entcounter: %w", err)
	}
	return func(ctx context.Context, c engine.Conn) error {
		if err := aside(ctx, c); err != nil {
			return fmt.Errorf("entcounter: %w", err)
		}
		return nil
	}, nil
}
