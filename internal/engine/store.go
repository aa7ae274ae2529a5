package engine

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/hotcounter/hotcounter"
	"github.com/hotcounter/hotcounter/internal/countersql"
	"github.com/hotcounter/hotcounter/internal/dberr"
	"github.com/hotcounter/hotcounter/internal/observe"
	"github.com/hotcounter/hotcounter/internal/spec"
)

// Store is what the engine keeps of one ORM client: its database's
// dialect, its settings, what it has learned of where each counter's
// values live, and its observer. The GORM plugin and an ent client's State
// each hold the parts and hand a Store, with the counters resolved, to
// every operation that walks them, so that the sequence is written here
// once for both ORMs.
type Store struct {
	Dialect  Dialect
	Settings spec.Settings // resolved (spec.Settings.Resolved)
	Storages *Storages
	Observer *observe.Observer
	// Pkg begins every error: "gormcounter" or "entcounter".
	Pkg string
	// Migration says, in an error, what makes the schema a counter needs
	// (the ORM's migration, or the statements of SchemaSQL).
	Migration string
}

// Counter is one counter as an ORM resolved its declaration.
type Counter struct {
	Name      string // as errors and reports name it: Post.Likes (GORM), Post.likes (ent)
	Column    string // its column, as metrics name it
	Options   spec.Options
	Precreate bool // its slot rows are pre-created on this database
	Count     bool // a count of child rows
	Table     countersql.Table
}

// RollupPass folds the pending slot rows (or delta rows) of every counter
// into its parent column, a batch of parents per transaction of s's own,
// checking stop between batches, and then the table of the other kind
// that a change of mode left, if any. It records each counter's pass.
func (st Store) RollupPass(ctx context.Context, s Session, counters []Counter, stop func() bool) error {
	inTx := PassTransaction(s, st.Dialect)
	batch := st.Settings.BatchSize
	for _, c := range counters {
		appends := c.Options.Mode == spec.Append
		start := time.Now()
		parents, err := RollupCounted(ctx, s, st.Dialect, c.Table, appends, batch, stop, inTx)
		st.Observer.Pass(ctx, "rollup", c.Table.Parent, c.Column, start, parents, err)
		if err != nil {
			return fmt.Errorf("%s: rollup %s: %w", st.Pkg, c.Name, err)
		}
		found, err := st.Storages.Get(ctx, s, st.Dialect, c.Table)
		if err != nil {
			return fmt.Errorf("%s: rollup %s: %w", st.Pkg, c.Name, err)
		}
		if found.Other(c.Table) {
			other := c.Table
			other.Slots = c.Table.Other
			if err := Rollup(ctx, s, st.Dialect, other, !appends, batch, stop, inTx); err != nil {
				return fmt.Errorf("%s: rollup %s: fold %s: %w", st.Pkg, c.Name, other.Slots, err)
			}
		}
	}
	return nil
}

// RollupLoop runs RollupPass at once and then every interval until ctx is
// done, and then returns nil. The passes run under ctx without its
// cancellation: cancelling ctx lets the batch in progress commit and
// stops before the next one, so no fold is left half done. A failed pass
// is handed to report and retried at the next tick. s is the session the
// passes run on, made for the uncancelled context by session.
func (st Store) RollupLoop(ctx context.Context, interval time.Duration, session func(context.Context) Session, counters []Counter, report func(error)) error {
	if interval <= 0 {
		return fmt.Errorf("%s: RollupLoop: interval must be positive, got %v", st.Pkg, interval)
	}
	work := context.WithoutCancel(ctx)
	s := session(work)
	stop := func() bool { return ctx.Err() != nil }
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if err := st.RollupPass(work, s, counters, stop); err != nil {
			report(fmt.Errorf("RollupLoop: a pass failed (the next tick retries it): %w", err))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// MoveToSlots moves the values that sum counters hold in a parent column
// of their own name onto slot rows (MoveColumns), each counter in turn,
// folding first the delta rows an append counter left into that column.
// It probes each counter's storage afresh: the column may be gone.
func (st Store) MoveToSlots(ctx context.Context, s Session, counters []Counter) (hotcounter.Moved, error) {
	inTx := PassTransaction(s, st.Dialect)
	var total hotcounter.Moved
	for _, c := range counters {
		t := c.Table
		st.Storages.Forget(t)
		found, err := st.Storages.Get(ctx, s, st.Dialect, t)
		if err != nil {
			return total, fmt.Errorf("%s: MoveToSlots %s: %w", st.Pkg, c.Name, err)
		}
		if !found.Column {
			continue
		}
		if !found.Integer() {
			return total, fmt.Errorf("%s: MoveToSlots %s: %w: %s.%s is %s", st.Pkg, c.Name, ErrColumnType, t.Parent, t.Column, found.Type)
		}
		if found.Other(t) {
			// An append counter's leftover deltas: into the column first,
			// then onto slots with it.
			deltas := t
			deltas.Slots = t.Other
			if err := Rollup(ctx, s, st.Dialect, deltas, true, st.Settings.BatchSize, func() bool { return false }, inTx); err != nil {
				return total, fmt.Errorf("%s: MoveToSlots %s: fold %s: %w", st.Pkg, c.Name, deltas.Slots, err)
			}
		}
		m, err := MoveColumns(ctx, s, st.Dialect, t, st.Settings.BatchSize, inTx)
		total.Add(m)
		if err != nil {
			return total, fmt.Errorf("%s: MoveToSlots %s: %w", st.Pkg, c.Name, err)
		}
	}
	return total, nil
}

// LoadGroup is one counter of a load and the distinct keys of its loaded
// parents.
type LoadGroup struct {
	Counter Counter
	Keys    []any
}

// Fill reads the value of every group's keys, as few statements as [Fill]
// needs, and calls set with each (group index, key text, value). It reads
// through conn (where the load read its rows) what the database holds for
// each counter (its tables and the column it was adopted over), probed
// through probe (the primary) once and kept in st.Storages.
//
// When a counter read more than its own table and the fill fails, what it
// read may be gone (a column dropped after a move): Fill forgets what it
// learned and, unless inTx (a failed statement has aborted the caller's
// transaction), probes and reads once more.
func (st Store) Fill(ctx context.Context, conn, probe Conn, inTx bool, groups []LoadGroup, set func(group int, key string, value int64) error) error {
	fgs, probed, err := st.fillGroups(ctx, probe, groups)
	if err != nil {
		return err
	}
	err = Fill(ctx, conn, st.Dialect, fgs, set)
	if err != nil && probed {
		for _, g := range groups {
			st.Storages.Forget(g.Counter.Table)
		}
		if !inTx {
			if fgs, _, err = st.fillGroups(ctx, probe, groups); err == nil {
				err = Fill(ctx, conn, st.Dialect, fgs, set)
			}
		}
	}
	return err
}

// fillGroups returns what the fill reads for each group: a sum counter's
// slots and the column it was adopted over, if any; a live rollup
// counter's column and pending slots; and a table a change of mode left.
// probed reports whether any group reads more than its own table.
func (st Store) fillGroups(ctx context.Context, probe Conn, groups []LoadGroup) (out []FillGroup, probed bool, err error) {
	out = make([]FillGroup, len(groups))
	for i, g := range groups {
		c := g.Counter
		read, err := st.Sources(ctx, probe, c)
		if err != nil {
			return nil, false, err
		}
		probed = probed || len(read.Tables) > 1 || (read.Column && c.Options.Mode == spec.Sum)
		out[i] = FillGroup{Table: c.Table, Read: read, Keys: g.Keys}
	}
	return out, probed, nil
}

// Sources returns what adds up to c's value in this database (its tables
// and the column it was adopted over), probed through probe once and kept
// in st.Storages.
func (st Store) Sources(ctx context.Context, probe Conn, c Counter) (countersql.Sources, error) {
	found, err := st.Storages.Get(ctx, probe, st.Dialect, c.Table)
	if err != nil {
		return countersql.Sources{}, fmt.Errorf("%s: %s: where its values live: %w", st.Pkg, c.Name, err)
	}
	if !found.Tables[c.Table.Slots] {
		// A database migrated without the library's part (by files that
		// lack it): named here, at the counter's first use, not as the
		// database's "no such table" from every load and write.
		return countersql.Sources{}, st.notMigrated(c)
	}
	read, err := Sources(c.Table, found, c.Options.Mode, c.Count)
	if err != nil {
		return countersql.Sources{}, fmt.Errorf("%s: %s: %w", st.Pkg, c.Name, err)
	}
	return read, nil
}

// Target returns c as Start and Set write it: what adds up to its value
// probed through probe (Sources), and widths, its slots=auto widths or
// nil.
func (st Store) Target(ctx context.Context, probe Conn, c Counter, widths *Widths) (Target, error) {
	read, err := st.Sources(ctx, probe, c)
	if err != nil {
		return Target{}, err
	}
	return targetOf(c, widths, read), nil
}

// targetOf is c as Start and Set write it, its values read from read.
func targetOf(c Counter, widths *Widths, read countersql.Sources) Target {
	return Target{Table: c.Table, Mode: c.Options.Mode, Slots: c.Options.Slots, Widths: widths,
		Guarded: c.Options.Guarded, Precreate: c.Precreate, Read: read}
}

// DryTarget is Target for a dry run, which sends nothing, not even the
// probe that Target makes the first time and again after AbsentRecheck:
// it writes c where DrySources says its values live.
func (st Store) DryTarget(c Counter, widths *Widths) (Target, error) {
	read, err := st.DrySources(c)
	if err != nil {
		return Target{}, err
	}
	return targetOf(c, widths, read), nil
}

// DrySources is Sources for a dry run, which sends nothing: where c's
// values were last found to live, however long ago, or, where nothing was
// found yet, where a migration of c puts them (its own table; a column for
// a rollup or append counter).
func (st Store) DrySources(c Counter) (countersql.Sources, error) {
	found, ok := st.Storages.Known(c.Table)
	if !ok {
		found = Storage{Column: c.Options.Mode != spec.Sum, Tables: map[string]bool{c.Table.Slots: true}}
	}
	read, err := Sources(c.Table, found, c.Options.Mode, c.Count)
	if err != nil {
		return countersql.Sources{}, fmt.Errorf("%s: %s: %w", st.Pkg, c.Name, err)
	}
	return read, nil
}

// PrepareColumn checks and readies, before the ORM migrates the parent
// table, a column of c's name that the table already has, and returns
// what it found of c's storage: an existing column must hold integers
// (hotcounter.ErrInvalidCounter otherwise), and a rollup or append counter's NULLs
// become 0, in batches, before the column becomes NOT NULL; a parent table
// that exists without c's slot table must have a key the slot table can
// reference (CheckParentKey). It returns the number of NULLs it set.
func (st Store) PrepareColumn(ctx context.Context, conn Conn, c Counter) (Storage, int64, error) {
	t := c.Table
	found, err := Probe(ctx, conn, st.Dialect, t)
	if err != nil {
		return found, 0, fmt.Errorf("%s: %s: read the columns of %s: %w", st.Pkg, c.Name, t.Parent, err)
	}
	if !found.Tables[t.Slots] {
		// The slot table is still to be made: its foreign key must have a
		// key of the parent to reference, which the ORM's own migration of
		// the parent's associations would otherwise report first, and
		// without naming the counter.
		exists, err := QueryKeys(ctx, conn, func(w countersql.Writer) { st.Dialect.TableExists(w, t.Parent) })
		if err != nil {
			return found, 0, fmt.Errorf("%s: %s: look for table %s: %w", st.Pkg, c.Name, t.Parent, err)
		}
		if len(exists) > 0 {
			if err := st.CheckParentKey(ctx, conn, c); err != nil {
				return found, 0, err
			}
		}
	}
	if !found.Column {
		return found, 0, nil
	}
	if !found.Integer() {
		return found, 0, fmt.Errorf("%s: %s: %w: the existing column %s.%s is %s; a counter needs an integer column: convert it first, or rename it out of the way",
			st.Pkg, c.Name, hotcounter.ErrInvalidCounter, t.Parent, t.Column, found.Type)
	}
	var nulls int64
	if c.Options.Mode.HasColumn() && found.Nullable {
		if nulls, err = ZeroNulls(ctx, conn, st.Dialect, t, st.Settings.BatchSize); err != nil {
			return found, 0, fmt.Errorf("%s: %s: set the NULLs of %s.%s to 0: %w", st.Pkg, c.Name, t.Parent, t.Column, err)
		}
	}
	return found, nulls, nil
}

// CheckParentKey reports a parent table whose key is neither its primary
// key nor alone in a unique index: the foreign key of c's slot table could
// not reference it (hotcounter.ErrInvalidCounter).
func (st Store) CheckParentKey(ctx context.Context, conn Conn, c Counter) error {
	t := c.Table
	ok, err := KeyUnique(ctx, conn, st.Dialect, t.Parent, t.ParentKey)
	if err != nil {
		return fmt.Errorf("%s: %s: read the keys of %s: %w", st.Pkg, c.Name, t.Parent, err)
	}
	if !ok {
		return fmt.Errorf("%s: %s: %w: table %s has no primary key (or unique index) on %s, which the foreign key of %s must reference; add one first, as in ALTER TABLE %s ADD PRIMARY KEY (%s)",
			st.Pkg, c.Name, hotcounter.ErrInvalidCounter, t.Parent, t.ParentKey, t.Slots, t.Parent, t.ParentKey)
	}
	return nil
}

// Leftover is a table a counter left behind when its field stopped being a
// counter (the declaration was removed, the column kept): Table.Slots is
// that table, Table.Column the plain column its values go back to.
type Leftover struct {
	Name   string // the field, as messages name it: Post.Likes (GORM), Post.likes (ent)
	Table  countersql.Table
	Deltas bool // a delta table (the counter was an append counter)
}

// Folded is a Leftover whose rows FoldLeftovers folded: Rows rows holding
// Sum in all.
type Folded struct {
	Leftover
	Rows, Sum int64
}

// FoldLeftovers folds into its plain column what each leftover table that
// exists still holds, exactly once, a batch of parents per inTx
// transaction, leaving the table empty for the user to drop. It returns
// the tables it folded.
func (st Store) FoldLeftovers(ctx context.Context, conn Conn, inTx func(context.Context, func(Conn) error) error, left []Leftover) ([]Folded, error) {
	if len(left) == 0 {
		return nil, nil
	}
	names := make([]string, len(left))
	for i, l := range left {
		names[i] = bareName(l.Table.Slots)
	}
	found, err := QueryKeys(ctx, conn, func(w countersql.Writer) { st.Dialect.TablesAmong(w, names) })
	if err != nil {
		return nil, fmt.Errorf("%s: look for the tables of removed counters: %w", st.Pkg, err)
	}
	exists := map[string]bool{}
	for _, k := range found {
		exists[KeyText(k)] = true
	}
	var out []Folded
	for i, l := range left {
		if !exists[names[i]] {
			continue
		}
		f := Folded{Leftover: l}
		rows, err := conn.Query(ctx, func(w countersql.Writer) { st.Dialect.TableTotal(w, l.Table.Slots) })
		if err == nil {
			if rows.Next() {
				err = rows.Scan(&f.Rows, &f.Sum)
			}
			if cerr := rows.Close(); err == nil {
				err = cerr
			}
		}
		if err != nil {
			return out, fmt.Errorf("%s: %s: read %s: %w", st.Pkg, l.Name, l.Table.Slots, err)
		}
		if f.Rows == 0 {
			continue
		}
		if err := Rollup(ctx, conn, st.Dialect, l.Table, l.Deltas, st.Settings.BatchSize, func() bool { return false }, inTx); err != nil {
			return out, fmt.Errorf("%s: %s is no longer a counter: fold what %s holds into %s.%s: %w", st.Pkg, l.Name, l.Table.Slots, l.Table.Parent, l.Table.Column, err)
		}
		out = append(out, f)
	}
	return out, nil
}

// bareName is a table name without its schema ("schema.table").
func bareName(name string) string { return name[strings.LastIndexByte(name, '.')+1:] }

// notMigrated is the error for c, whose own table does not exist.
func (st Store) notMigrated(c Counter) error {
	kind := "slot"
	if c.Options.Mode == spec.Append {
		kind = "delta"
	}
	return fmt.Errorf("%s: %s: its %s table %s does not exist: %w: %s",
		st.Pkg, c.Name, kind, c.Table.Slots, hotcounter.ErrNotMigrated, st.Migration)
}

// NameMissing returns, for err, the error of a write of c that failed on a
// table the database does not have, ErrNotMigrated naming c and its table
// when it is c's own (probed once more through probe); else err. A write
// reads no catalog before it goes: this runs only after one failed.
func (st Store) NameMissing(ctx context.Context, probe Conn, c Counter, err error) error {
	if !dberr.UndefinedTable(err) {
		return err
	}
	st.Storages.Forget(c.Table)
	found, perr := st.Storages.Get(ctx, probe, st.Dialect, c.Table)
	if perr != nil || found.Tables[c.Table.Slots] {
		return err
	}
	return st.notMigrated(c)
}
