package gormcounter

import (
	"fmt"

	"gorm.io/gorm"

	"github.com/hotcounter/hotcounter/internal/countersql"
	"github.com/hotcounter/hotcounter/internal/engine"
)

// Counts kept by triggers: the migration installs them on the child table
// (and recounts a count whose slot table it just created), and drops them
// with the parent.

// installCounts (re)creates the triggers of the counts that models declare
// or that count rows of models, after their tables are migrated. A count
// kept by hooks gets its triggers removed. A count whose child table does
// not exist yet is installed when the child is migrated.
//
// A count whose slot table the migration just created (created) is then
// recounted from the child table, so that children written before the
// count was declared are counted; it says how many parents it set.
func (m counterMigrator) installCounts(values []any, models []*model, created map[*counter]bool) error {
	var todo []*counter
	seen := map[*counter]bool{}
	add := func(c *counter) {
		if c.count != nil && !seen[c] {
			seen[c] = true
			todo = append(todo, c)
		}
	}
	for _, md := range models {
		for _, c := range md.counters {
			add(c)
		}
	}
	for _, v := range values {
		if _, isName := v.(string); isName {
			continue
		}
		stmt := &gorm.Statement{DB: m.db}
		if err := stmt.Parse(v); err != nil {
			continue
		}
		for _, c := range m.plugin.countsOn(stmt.Schema.Table) {
			add(c)
		}
	}
	st := m.plugin.store()
	ctx := m.db.Statement.Context
	for _, c := range todo {
		cs, err := m.plugin.countSpec(m.db, c)
		if err != nil {
			return err
		}
		if exists, err := m.tableExists(cs.Child); err != nil || !exists {
			if err != nil {
				return err
			}
			continue
		}
		s := gormSession{gormConn{db: m.db, table: c.table.Parent}}
		// Triggers that should have been there (dropped, restored from a
		// dump without them, migrated before the plugin was registered)
		// missed the child rows written meanwhile, and triggers of another
		// definition (a changed where=) counted by another rule: the count
		// is recounted.
		recount, err := st.InstallCountTriggers(ctx, s, c.engine(), cs, c.opts.Hooks)
		if err != nil {
			return err
		}
		if created[c] || recount {
			n, err := st.CountExisting(ctx, s, c.engine(), cs)
			if err != nil {
				return err
			}
			switch {
			case !created[c]:
				m.db.Logger.Warn(ctx, "gormcounter: %s: its triggers on %s were missing or made for another definition of the count: installed them and recounted, %d parents corrected", c.name(), cs.Child, n)
			case n > 0:
				m.db.Logger.Warn(ctx, "gormcounter: %s: counted the %s rows that existed before the count: %d parents set", c.name(), cs.Child, n)
			}
		}
	}
	return nil
}

// tableExists reports whether a table exists, schema-qualified or not.
func (m counterMigrator) tableExists(table string) (bool, error) {
	keys, err := engine.QueryKeys(m.db.Statement.Context, gormConn{db: m.db}, func(w countersql.Writer) { m.plugin.dialect.TableExists(w, table) })
	return len(keys) > 0, err
}

// dropCountTriggers removes the triggers of md's counts, before its slot
// tables go: a trigger left behind would fail every write to the child.
func (m counterMigrator) dropCountTriggers(md *model) error {
	for _, c := range md.counters {
		if c.count == nil {
			continue
		}
		cs, err := m.plugin.countSpec(m.db, c)
		if err != nil {
			return err
		}
		if exists, err := m.tableExists(cs.Child); err != nil || !exists {
			if err != nil {
				return err
			}
			continue
		}
		for _, step := range m.plugin.dialect.DropCountTriggers(cs) {
			if err := execSQL(m.db, "", step).Error; err != nil {
				return fmt.Errorf("gormcounter: drop the triggers that keep %s: %w", c.name(), err)
			}
		}
	}
	return nil
}
