package gormcounter

import (
	"context"
	"fmt"
	"strings"

	"gorm.io/gorm"

	"github.com/hotcounter/hotcounter"
	"github.com/hotcounter/hotcounter/internal/engine"
	"github.com/hotcounter/hotcounter/internal/writebehind"
)

// SchemaSQL returns, without sending anything to the database, every
// statement the counters of models need beyond the models' own tables, for
// the database db is opened on: per counter, its slot table (or an append
// counter's delta table), PostgreSQL's fillfactor, the slot rows of the
// parents that exist where slot rows are pre-created (MySQL/MariaDB by
// default), and for a count of child rows its triggers (and functions) and
// one statement that counts the children that exist. Down removes the
// triggers and the tables.
//
//	script, err := gormcounter.SchemaSQL(db, &Author{}, &Post{}, &Comment{})
//	os.WriteFile("migrations/00002_counters.sql", []byte(script.Goose()), 0o644)
//
// The models' own tables come first, from your migration tool (GORM's dry
// run, atlas-provider-gorm, or by hand): a counter's slot table references
// its parent, and a count's triggers sit on the child table. Give every
// model that declares counters. Every Up statement can run again on a
// database that has them, changing nothing, so a file that holds them can
// be applied where AutoMigrate ran before. docs/migrations.md walks
// through goose, golang-migrate and Atlas.
//
// On MySQL and MariaDB, a count through a many2many join table whose key
// to the other side has constraint:OnDelete:CASCADE also gets a trigger on
// the other side's table (MySQL fires no trigger for rows a cascade
// deletes): the file says what the declaration makes, where AutoMigrate
// reads the key from the catalog.
func SchemaSQL(db *gorm.DB, models ...any) (hotcounter.Script, error) {
	p, err := pluginOf(db)
	if err != nil {
		return hotcounter.Script{}, err
	}
	mds, err := counterMigrator{db: db, plugin: p}.models(models)
	if err != nil {
		return hotcounter.Script{}, err
	}
	var parts []engine.SchemaPart
	for _, md := range mds {
		owner := p.ownerType(db, md)
		for _, c := range md.counters {
			part := engine.SchemaPart{Counter: c.engine(), OwnerType: owner}
			if c.count != nil {
				cs, err := p.countSpec(db, c)
				if err != nil {
					return hotcounter.Script{}, err
				}
				part.Count = &cs
				part.Cascades = cs.Across != nil && c.count.cascades(cs.Across.Ref)
			}
			parts = append(parts, part)
		}
	}
	script, err := p.store().Schema(parts)
	if err != nil {
		return hotcounter.Script{}, fmt.Errorf("gormcounter: %w", err)
	}
	return script, nil
}

// BufferSchemaSQL returns, without sending anything, the statements of the
// table in which a write-behind buffer of cfg records the batches it
// applied (cfg.Ledger, hotcounter_ledger by default) and its index: Up
// creates them if they do not exist, Down drops the table. NewBuffer
// creates the table when it is missing; one that a migration file made is
// used as it is, so the application's role needs no right to create
// tables.
//
//	script, err := gormcounter.BufferSchemaSQL(db, hotcounter.BufferConfig{})
func BufferSchemaSQL(db *gorm.DB, cfg hotcounter.BufferConfig) (hotcounter.Script, error) {
	p, err := pluginOf(db)
	if err != nil {
		return hotcounter.Script{}, err
	}
	script, err := p.store().LedgerSchema(writebehind.Ledger(cfg))
	if err != nil {
		return hotcounter.Script{}, fmt.Errorf("gormcounter: %w", err)
	}
	return script, nil
}

// cascades reports whether the join table of a many2many count has a
// foreign key from its column ref that deletes with the row it names, as
// GORM's migration creates it (constraint:OnDelete:CASCADE).
func (co *countOf) cascades(ref string) bool {
	join := co.rel.JoinTable
	if join == nil {
		return false
	}
	for _, r := range join.Relationships.Relations {
		con := r.ParseConstraint()
		if con == nil || len(con.ForeignKeys) != 1 || con.ForeignKeys[0].DBName != ref {
			continue
		}
		return strings.EqualFold(con.OnDelete, "CASCADE")
	}
	return false
}

// dryRunMigrator is the migrator of a dry run (gorm.Session{DryRun: true}):
// GORM's own migrator shows the DDL of the models' tables and sends none
// (it reads the catalog to find what differs), then the library's part,
// SchemaSQL's Up (Down before DropTable), is shown the same way and never
// sent. It shows the whole script, not what differs from the database:
// every statement of it can run again, changing nothing.
//
// Where the connection records statements (atlas-provider-gorm), the
// migrator runs the same way with tablesOnly: GORM's tables, then the
// counters' slot and delta tables (hotcounter.Script.Tables), which is all a tool
// that keeps tables holds; the rest of SchemaSQL's Up goes in a file of
// its own.
type dryRunMigrator struct {
	counterMigrator
	tablesOnly bool
}

// AutoMigrate shows what AutoMigrate would run.
func (m dryRunMigrator) AutoMigrate(values ...any) error {
	// Settled first, as AutoMigrate settles them: a sum counter has no
	// column for GORM to add.
	mds, err := m.models(values)
	if err != nil {
		return err
	}
	// A rollup or append counter over a nullable column of the parent: its
	// NULLs become 0 before GORM's DDL makes the column NOT NULL, as
	// AutoMigrate does (in batches there).
	if !m.tablesOnly {
		ctx := m.db.Statement.Context
		if ctx == nil {
			ctx = context.Background()
		}
		query, exec := m.db, m.db
		if g, ok := m.Migrator.(interface{ GetQueryAndExecTx() (*gorm.DB, *gorm.DB) }); ok {
			query, exec = g.GetQueryAndExecTx()
		}
		for _, md := range mds {
			for _, c := range md.counters {
				st, err := m.plugin.store().NullsToZero(ctx, gormConn{db: query}, c.engine())
				if err != nil {
					return err
				}
				if st != "" {
					if err := exec.Exec(st).Error; err != nil {
						return err
					}
				}
			}
		}
	}
	if err := m.Migrator.AutoMigrate(values...); err != nil {
		return err
	}
	return m.show(values, false)
}

// CreateTable shows what CreateTable would run.
func (m dryRunMigrator) CreateTable(values ...any) error {
	if _, err := m.models(values); err != nil {
		return err
	}
	if err := m.Migrator.CreateTable(values...); err != nil {
		return err
	}
	return m.show(values, false)
}

// DropTable shows what DropTable would run.
func (m dryRunMigrator) DropTable(values ...any) error {
	if err := m.show(values, true); err != nil {
		return err
	}
	return m.Migrator.DropTable(values...)
}

// AlterColumn, DropColumn, CreateConstraint and DropConstraint are GORM's
// own in a dry run: they show their DDL; the triggers that a real run keeps
// on SQLite's rebuilt tables are not theirs to show.
func (m dryRunMigrator) AlterColumn(value any, field string) error {
	return m.Migrator.AlterColumn(value, field)
}

// DropColumn shows GORM's DDL.
func (m dryRunMigrator) DropColumn(value any, name string) error {
	return m.Migrator.DropColumn(value, name)
}

// CreateConstraint shows GORM's DDL.
func (m dryRunMigrator) CreateConstraint(value any, name string) error {
	return m.Migrator.CreateConstraint(value, name)
}

// DropConstraint shows GORM's DDL.
func (m dryRunMigrator) DropConstraint(value any, name string) error {
	return m.Migrator.DropConstraint(value, name)
}

// show runs the statements of values' script (down: Down, else Up) as a
// dry run does: logged, and printed where GORM's migrator prints its own.
func (m dryRunMigrator) show(values []any, down bool) error {
	script, err := SchemaSQL(m.db, values...)
	if err != nil {
		return err
	}
	stmts := script.Up
	switch {
	case down:
		stmts = script.Down
	case m.tablesOnly:
		stmts = script.Tables
	}
	exec := m.db
	if g, ok := m.Migrator.(interface{ GetQueryAndExecTx() (*gorm.DB, *gorm.DB) }); ok {
		_, exec = g.GetQueryAndExecTx()
	}
	for _, st := range stmts {
		if err := exec.Exec(st).Error; err != nil {
			return err
		}
	}
	return nil
}
