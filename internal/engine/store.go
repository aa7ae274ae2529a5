package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/hotcounter/hotcounter/internal/countersql"
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
	Dialect  countersql.Dialect
	Settings spec.Settings // resolved (spec.Settings.Resolved)
	Storages *Storages
	Observer *observe.Observer
	// Pkg begins every error: "gormcounter" or "entcounter".
	Pkg string
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

// MoveToSlots moves the values that sum counters hold in a parent column
// of their own name onto slot rows (MoveColumns), each counter in turn,
// folding first the delta rows an append counter left into that column.
// It probes each counter's storage afresh: the column may be gone.
func (st Store) MoveToSlots(ctx context.Context, s Session, counters []Counter) (Moved, error) {
	inTx := PassTransaction(s, st.Dialect)
	var total Moved
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
