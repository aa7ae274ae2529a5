package gormcounter

import (
	"database/sql"
	"fmt"

	"gorm.io/gorm"

	"github.com/hotcounter/hotcounter/internal/countersql"
	"github.com/hotcounter/hotcounter/internal/engine"
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
//   - the count triggers on the tables go with the old table: they are
//     read before (engine.SaveTriggers) and put back after. They are read
//     from the database, so this works in a process that never saw the
//     models;
//   - the count triggers of other tables that name a table (a count's
//     triggers on the child name the parent) would fail the rename of the
//     copy: the connection renames the legacy way (legacy_alter_table),
//     which leaves them as they are written.
//
// fn gets the session to migrate with: inner(conn) is GORM's own migrator
// on it.
func (m counterMigrator) guardRebuild(values []any, fn func(conn *gorm.DB) error) error {
	d, rebuilds := m.plugin.dialect.OnSQLite()
	if !rebuilds {
		return fn(m.db)
	}
	var tables []string
	for _, v := range values {
		table, ok := v.(string)
		if !ok {
			stmt := &gorm.Statement{DB: m.db}
			if stmt.Parse(v) != nil {
				continue
			}
			table = stmt.Schema.Table
		}
		tables = append(tables, table)
	}
	ctx := m.db.Statement.Context
	migrate := func(conn *gorm.DB) error {
		putBack, err := engine.SaveTriggers(ctx, gormConn{db: conn}, d, tables)
		if err != nil {
			return fmt.Errorf("gormcounter: %w", err)
		}
		// The rename of a rebuilt table's copy leaves the triggers of other
		// tables that name the table as they are written (they then name
		// the copy), instead of failing on them: no trigger is dropped, so
		// no write of another connection goes uncounted meanwhile.
		var legacy int
		if err := querySQL(conn, "", d.LegacyAlterTable).Scan(&legacy).Error; err != nil {
			return err
		}
		if legacy == 0 {
			if err := execSQL(conn, "", func(w countersql.Writer) { d.SetLegacyAlterTable(w, true) }).Error; err != nil {
				return err
			}
			defer execSQL(conn, "", func(w countersql.Writer) { d.SetLegacyAlterTable(w, false) })
		}
		if err := fn(conn); err != nil {
			return err
		}
		if err := putBack(ctx, gormConn{db: conn}); err != nil {
			return fmt.Errorf("gormcounter: %w", err)
		}
		return nil
	}
	if _, pinned := m.db.Statement.ConnPool.(*sql.Conn); pinned {
		return migrate(m.db) // inside a rebuild already
	}
	return m.db.Connection(func(conn *gorm.DB) error {
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
		return migrate(conn)
	})
}

// inner returns GORM's own migrator (not the plugin's) on db.
func inner(db *gorm.DB) gorm.Migrator {
	d := db.Dialector
	if w, ok := d.(*dialector); ok {
		d = w.Dialector
	}
	return d.Migrator(db)
}
