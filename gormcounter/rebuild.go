package gormcounter

import (
	"database/sql"
	"fmt"

	"gorm.io/gorm"

	"github.com/hotcounter/hotcounter/internal/countersql"
)

// SQLite alters a table by copying it: the migrator's rebuilds run on one
// connection with foreign keys off, keeping the counts and count triggers.

// guardRebuild runs fn, a migration of the tables of values, with the
// migrator it must use. SQLite's migrator recreates a table to alter it
// (create a copy, drop the table, rename the copy), which needs two
// guards:
//   - the whole rebuild runs on one connection: the migrator turns foreign
//     keys off for it with a PRAGMA, which holds for one connection only,
//     and with them on, dropping the old table cascades to its slot tables
//     and deletes every count;
//   - the count triggers that went with the old table are put back. They
//     are read from the database, so this works in a process that never
//     saw the parent model.
//
// fn gets the session to migrate with: inner(conn) is GORM's own migrator
// on it.
func (m counterMigrator) guardRebuild(values []any, fn func(conn *gorm.DB) error) error {
	d, rebuilds := m.plugin.dialect.OnSQLite()
	if !rebuilds {
		return fn(m.db)
	}
	type trigger struct{ name, sql string }
	var saved []trigger
	for _, v := range values {
		table, ok := v.(string)
		if !ok {
			stmt := &gorm.Statement{DB: m.db}
			if stmt.Parse(v) != nil {
				continue
			}
			table = stmt.Schema.Table
		}
		rows, err := querySQL(m.db, "", func(w countersql.Writer) { d.CountTriggersOn(w, table) }).Rows()
		if err != nil {
			return err
		}
		for rows.Next() {
			var t trigger
			if err := rows.Scan(&t.name, &t.sql); err != nil {
				rows.Close()
				return err
			}
			saved = append(saved, t)
		}
		rows.Close()
	}
	if _, pinned := m.db.Statement.ConnPool.(*sql.Conn); pinned {
		if err := fn(m.db); err != nil { // inside a rebuild already
			return err
		}
	} else if err := m.db.Connection(func(conn *gorm.DB) error {
		// Not every rebuild of GORM's SQLite migrator turns foreign keys
		// off (DropColumn does not).
		var on int
		if err := querySQL(conn, "", d.ForeignKeysOn).Scan(&on).Error; err != nil {
			return err
		}
		if on == 1 {
			if err := execSQL(conn, "", func(w countersql.Writer) { d.SetForeignKeys(w, false) }).Error; err != nil {
				return err
			}
			defer execSQL(conn, "", func(w countersql.Writer) { d.SetForeignKeys(w, true) })
		}
		return fn(conn)
	}); err != nil {
		return err
	}
	for _, t := range saved {
		if err := execSQL(m.db, "", func(w countersql.Writer) { d.Recreate(w, t.sql) }).Error; err != nil {
			return fmt.Errorf("gormcounter: put back trigger %s after a migration: %w", t.name, err)
		}
	}
	return nil
}

// inner returns GORM's own migrator (not the plugin's) on db.
func inner(db *gorm.DB) gorm.Migrator {
	d := db.Dialector
	if w, ok := d.(*dialector); ok {
		d = w.Dialector
	}
	return d.Migrator(db)
}
