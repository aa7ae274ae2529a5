package engine

import (
	"context"
	"fmt"

	"github.com/hotcounter/hotcounter"
	"github.com/hotcounter/hotcounter/internal/countersql"
	"github.com/hotcounter/hotcounter/internal/spec"
)

// A SchemaPart is one counter as a migration file declares it: what both
// ORMs' exports hand the store, which alone writes the statements.
type SchemaPart struct {
	Counter Counter
	// OwnerType is the column type of the slot (or delta) table's owner
	// column, as the ORM maps the parent's key. Empty when the ORM's own
	// migration creates the table (ent's generated slot schemas): the
	// script then holds only what comes after it.
	OwnerType string
	// Count is the spec of a count of child rows (Counter.Count), nil
	// otherwise.
	Count *countersql.Count
	// Cascades says, for a count through a join table (Count.Across), that
	// the join's key to the other side deletes with it (ON DELETE
	// CASCADE): MySQL and MariaDB then need a trigger on the other side's
	// table, since a cascade fires none. The live migration reads it from
	// the catalog; a file is written before the tables exist, so the ORM
	// says what its declaration makes.
	Cascades bool
}

// Schema writes the script of parts, in their order, without touching the
// database. For each counter, Up holds:
//   - its slot table (or an append counter's delta table and the index on
//     its owner), where the part gives an owner type;
//   - on PostgreSQL, the slot table's fillfactor (ReadySlotTable);
//   - where slot rows are pre-created, those of the parents that exist;
//   - for a count kept by triggers, its triggers (and functions), then
//     one statement that counts the children that exist; for a count kept
//     by hooks, the removal of triggers left from when triggers kept it.
//
// Down removes the triggers, then the tables Up created, in reverse.
func (st Store) Schema(parts []SchemaPart) (hotcounter.Script, error) {
	d := st.Dialect
	var s hotcounter.Script
	var down [][]func(countersql.Writer)
	for _, p := range parts {
		c := p.Counter
		t := c.Table
		var up []func(countersql.Writer)
		var undo []func(countersql.Writer)
		appends := c.Options.Mode == spec.Append
		if p.OwnerType != "" {
			if appends {
				up = append(up, d.CreateDeltaTable(t, p.OwnerType)...)
			} else {
				up = append(up, func(w countersql.Writer) { d.CreateSlotTable(w, t, p.OwnerType) })
			}
			undo = append(undo, func(w countersql.Writer) { d.DropSlotTable(w, t) })
		}
		tables := len(up)
		if !appends {
			if build := d.SlotStorage(t); build != nil {
				up = append(up, build)
			}
			if c.Precreate {
				up = append(up, func(w countersql.Writer) { d.PrecreateSlots(w, t, c.Options.Slots, everyParent) })
			}
		}
		if c.Count {
			if p.Count == nil {
				return hotcounter.Script{}, fmt.Errorf("%s: %s is a count with no spec", st.Pkg, c.Name)
			}
			count := *p.Count
			drop := d.DropCountTriggers(count)
			if c.Options.Hooks {
				up = append(up, drop...)
			} else {
				install := d.InstallCountTriggers(count)
				if my, ok := d.OnMySQL(); ok && count.Across != nil && p.Cascades {
					install = append(install, my.CascadeTrigger(count))
				}
				// Marked as a live migration marks them, which then finds
				// them current and sends nothing.
				install, _, _, err := d.MarkTriggers(install)
				if err != nil {
					return hotcounter.Script{}, fmt.Errorf("%s: %s: %w", st.Pkg, c.Name, err)
				}
				up = append(up, install...)
				withColumn := c.Options.Mode.HasColumn()
				up = append(up, func(w countersql.Writer) { d.CountExistingAll(w, count, withColumn) })
				undo = append(drop, undo...)
			}
		}
		for i, build := range up {
			text, err := d.Render(build)
			if err != nil {
				return hotcounter.Script{}, fmt.Errorf("%s: %s: %w", st.Pkg, c.Name, err)
			}
			s.Up = append(s.Up, text)
			if i < tables {
				s.Tables = append(s.Tables, text)
			}
		}
		down = append(down, undo)
	}
	for i := len(down) - 1; i >= 0; i-- {
		for _, build := range down[i] {
			text, err := d.Render(build)
			if err != nil {
				return hotcounter.Script{}, err
			}
			s.Down = append(s.Down, text)
		}
	}
	return s, nil
}

// NullsToZero returns the statement a migration file needs before the
// ORM's own DDL makes the column of c, a rollup or append counter, NOT
// NULL: the update of its NULLs to 0, when the parent table has the
// column and it is nullable (read from the catalog, as a dry run reads
// what differs); "" otherwise. It is what PrepareColumn does in batches
// when the library migrates.
func (st Store) NullsToZero(ctx context.Context, conn Conn, c Counter) (string, error) {
	if !c.Options.Mode.HasColumn() {
		return "", nil
	}
	found, err := Probe(ctx, conn, st.Dialect, c.Table)
	if err != nil {
		return "", fmt.Errorf("%s: %s: read the columns of %s: %w", st.Pkg, c.Name, c.Table.Parent, err)
	}
	if !found.Column || !found.Nullable {
		return "", nil
	}
	t := c.Table
	return st.Dialect.Render(func(w countersql.Writer) { st.Dialect.ZeroAllNulls(w, t) })
}

// LedgerSchema writes the script of the write-behind ledger table named
// ledger: its table and index (Up, every statement re-runnable) and its
// drop (Down). A buffer that finds the table creates nothing.
func (st Store) LedgerSchema(ledger string) (hotcounter.Script, error) {
	d := st.Dialect
	var s hotcounter.Script
	for _, build := range d.CreateLedger(ledger) {
		text, err := d.Render(build)
		if err != nil {
			return hotcounter.Script{}, fmt.Errorf("%s: ledger %s: %w", st.Pkg, ledger, err)
		}
		s.Up = append(s.Up, text)
	}
	s.Tables = s.Up
	text, err := d.Render(func(w countersql.Writer) { d.DropLedger(w, ledger) })
	if err != nil {
		return hotcounter.Script{}, err
	}
	s.Down = []string{text}
	return s, nil
}
