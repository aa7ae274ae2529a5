package gormcounter

import (
	"fmt"
	"reflect"

	"gorm.io/gorm"
	"gorm.io/gorm/schema"

	"github.com/hotcounter/hotcounter"
	"github.com/hotcounter/hotcounter/internal/countersql"
	"github.com/hotcounter/hotcounter/internal/engine"
	"github.com/hotcounter/hotcounter/internal/spec"
)

// Adopting a counter over a table that already holds counts: AutoMigrate
// readies the existing column (see prepareColumns), loads add it to the
// slots (engine.Sources), and MoveToSlots empties it onto slots.

// MoveToSlots moves the values that the sum counters of the given models
// hold in a parent column of their own name onto slot rows, so that the
// column can be dropped: a column that existed before the field was tagged
// (or that a rollup counter left when it became a sum counter). Until then
// every load adds the column to the slots, and code that still writes the
// column (likes = likes + 1) keeps counting, before, during and after the
// move.
//
//	moved, err := gormcounter.MoveToSlots(db.WithContext(ctx), &Post{})
//
// It walks the parents in key order, a batch of Config.RollupBatchSize per
// transaction; for each parent whose column is not 0 it adds the value to
// the parent's slot row -1 (a row increments never write) and sets the
// column to 0, in that transaction, so every value moves exactly once and
// a load sees it before the move or after it. It never waits on a row lock:
// parents that another transaction holds at that moment (old code writing
// the column) are skipped and reported as Busy; run it again to move them.
// Running it again, or after an interrupted run, moves only what is left.
// A NULL column counts as 0 and becomes 0 (hotcounter.Moved.Nulls). Values an append
// counter left in a delta table are folded into the column first, and move
// with it. Like [RollupPass] it refuses to run inside a transaction.
//
// Dropping the column is yours to do once no code writes it (GORM never
// drops columns): db.Migrator().DropColumn(&Post{}, "likes"), or
// ALTER TABLE posts DROP COLUMN likes. Loads notice the column is gone.
func MoveToSlots(db *gorm.DB, models ...any) (hotcounter.Moved, error) {
	p, counters, err := passCounters(db, models, "MoveToSlots", "sum counter (tag one `gorm:\"counter\"`)",
		func(c *counter) bool { return c.opts.Mode == spec.Sum && c.count == nil })
	if err != nil {
		return hotcounter.Moved{}, err
	}
	return p.store().MoveToSlots(db.Statement.Context, passSession(db), engineCounters(counters))
}

// prepareColumns runs before GORM migrates the models. For every counter
// whose parent table already has a column of the counter's name it checks
// that the column holds integers and readies it:
//   - a sum counter reads it as part of its value: the column gets the
//     default 0, so that rows created without it start at 0 (old code's
//     likes = likes + 1 would leave a NULL as it is);
//   - a rollup or append counter folds into it, and GORM makes it NOT NULL
//     DEFAULT 0: its NULLs become 0 first, in batches;
//   - a count of child rows is recounted from the children once its slot
//     table exists (installCounts); the column is left alone.
//
// It says what it found through db's logger.
//
// It returns what it found of each counter's storage.
func (m counterMigrator) prepareColumns(models []*model) (map[*counter]engine.Storage, error) {
	ctx := m.db.Statement.Context
	store := m.plugin.store()
	conn := gormConn{db: m.db}
	found := map[*counter]engine.Storage{}
	for _, md := range models {
		for _, c := range md.counters {
			st, nulls, err := store.PrepareColumn(ctx, conn, c.engine())
			if err != nil {
				return nil, err
			}
			found[c] = st
			if !st.Column {
				continue
			}
			if nulls > 0 {
				m.db.Logger.Warn(ctx, "gormcounter: %s: %d rows of %s held NULL in %s, counted as 0: set to 0 before the column becomes NOT NULL",
					c.name(), nulls, c.table.Parent, c.table.Column)
			}
			switch {
			case c.count != nil:
				m.db.Logger.Warn(ctx, "gormcounter: %s: %s.%s already exists; the count is kept in %s and recounted from %s rows, and the column is left as it is",
					c.name(), c.table.Parent, c.table.Column, c.table.Slots, c.count.childTable())
			case c.opts.Mode.HasColumn():
				// Its NULLs are 0 now (PrepareColumn); GORM makes it NOT NULL.
			default:
				if st.Default == "" {
					if err := m.defaultZero(c, st); err != nil {
						return nil, err
					}
				}
				null := ""
				if st.Nullable {
					null = " (a NULL counts as 0)"
				}
				m.db.Logger.Warn(ctx, "gormcounter: %s: the existing column %s.%s is part of the value%s: loads add it to the slots, "+
					"and code that still runs %s = %s + n keeps counting; gormcounter.MoveToSlots moves it onto slots, and then it can be dropped",
					c.name(), c.table.Parent, c.table.Column, null, c.table.Column, c.table.Column)
			}
		}
	}
	return found, nil
}

// defaultZero gives an adopted column the default 0: an ALTER of the
// catalog only on PostgreSQL and MySQL/MariaDB; SQLite rebuilds the table
// (as GORM does to alter any column there), keeping its indexes and count
// triggers.
func (m counterMigrator) defaultZero(c *counter, st engine.Storage) error {
	if locks, ok := m.plugin.dialect.OnRowLocks(); ok {
		if err := execSQL(m.db, "", func(w countersql.Writer) { locks.SetColumnDefault(w, c.table) }).Error; err != nil {
			return fmt.Errorf("gormcounter: %s: give %s.%s the default 0: %w", c.name(), c.table.Parent, c.table.Column, err)
		}
		return nil
	}
	lite, _ := m.plugin.dialect.OnSQLite() // the database without row locks
	type index struct{ name, sql string }
	var saved []index
	rows, err := querySQL(m.db, "", func(w countersql.Writer) { lite.IndexesOn(w, c.table.Parent) }).Rows()
	if err != nil {
		return err
	}
	for rows.Next() {
		var ix index
		if err := rows.Scan(&ix.name, &ix.sql); err != nil {
			rows.Close()
			return err
		}
		saved = append(saved, ix)
	}
	rows.Close()
	// A struct of the one column, as it is plus DEFAULT 0, for the
	// migrator's table rebuild.
	tag := fmt.Sprintf(`gorm:"column:%s;type:%s;default:0"`, c.table.Column, st.Type)
	if !st.Nullable {
		tag = fmt.Sprintf(`gorm:"column:%s;type:%s;not null;default:0"`, c.table.Column, st.Type)
	}
	typ := reflect.StructOf([]reflect.StructField{{Name: "Counter", Type: reflect.TypeOf(int64(0)), Tag: reflect.StructTag(tag)}})
	err = m.guardRebuild([]any{c.table.Parent}, func(conn *gorm.DB) error {
		return inner(conn.Table(c.table.Parent)).AlterColumn(reflect.New(typ).Interface(), "Counter")
	})
	if err != nil {
		return fmt.Errorf("gormcounter: %s: give %s.%s the default 0: %w", c.name(), c.table.Parent, c.table.Column, err)
	}
	for _, ix := range saved {
		if err := execSQL(m.db, "", func(w countersql.Writer) { lite.Recreate(w, ix.sql) }).Error; err != nil {
			return fmt.Errorf("gormcounter: %s: put back index %s after a rebuild of %s: %w", c.name(), ix.name, c.table.Parent, err)
		}
	}
	return nil
}

// foldLeftovers folds, into their plain column, the values that a slot or
// delta table still holds for an integer field that is no longer a counter
// (its tag was removed): the value lands back in the column, exactly once,
// and the table is left empty for the user to drop. It runs after GORM
// migrated the models, so the column exists.
func (m counterMigrator) foldLeftovers(values []any) error {
	var left []engine.Leftover
	for _, v := range values {
		if _, isName := v.(string); isName {
			continue
		}
		stmt := &gorm.Statement{DB: m.db}
		if stmt.Parse(v) != nil || len(stmt.Schema.PrimaryFields) != 1 {
			continue
		}
		s := stmt.Schema
		md, _ := m.plugin.model(m.db, s)
		for _, f := range s.Fields {
			if f.DBName == "" || f.PrimaryKey || f.IgnoreMigration || !isInteger(f) || md.lookup(f.Name) != nil {
				continue
			}
			for _, suffix := range []string{"Slot", "Deltas"} {
				name, owner := storageNames(m.db.NamingStrategy, s.Table, f.DBName, suffix)
				left = append(left, engine.Leftover{Name: s.Name + "." + f.Name, Deltas: suffix == "Deltas",
					Table: countersql.Table{Parent: s.Table, ParentKey: s.PrimaryFields[0].DBName, Column: f.DBName, Slots: name, Owner: owner}})
			}
		}
	}
	ctx := m.db.Statement.Context
	sess := passSession(m.db)
	folded, err := m.plugin.store().FoldLeftovers(ctx, sess, engine.PassTransaction(sess, m.plugin.dialect), left)
	for _, f := range folded {
		m.db.Logger.Warn(ctx, "gormcounter: %s is no longer a counter: folded %d rows of %s (%d in all) into %s.%s; drop %s once no code increments the counter",
			f.Name, f.Rows, f.Table.Slots, f.Sum, f.Table.Parent, f.Table.Column, f.Table.Slots)
	}
	return err
}

func isInteger(f *schema.Field) bool {
	switch f.FieldType.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return true
	}
	return false
}

// recordStorages records where each counter's values live now that the
// migration is done, from what prepareColumns found before it: the counter's
// own table exists now, and so does a rollup or append counter's column, and
// the tables this migration created (created); nothing else changed. The first loads then need no probe.
func (m counterMigrator) recordStorages(models []*model, before map[*counter]engine.Storage, created map[*counter]bool) {
	made := map[string]bool{}
	for c := range created {
		made[c.table.Slots] = true
	}
	for _, md := range models {
		for _, c := range md.counters {
			st, ok := before[c]
			if !ok {
				continue
			}
			tables := map[string]bool{c.table.Slots: true}
			if c.table.Other != "" {
				tables[c.table.Other] = st.Tables[c.table.Other] || made[c.table.Other]
			}
			st.Tables = tables
			st.Column = st.Column || c.opts.Mode.HasColumn()
			m.plugin.storages.Set(c.table, st)
		}
	}
}
