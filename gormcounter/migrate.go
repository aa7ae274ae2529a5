package gormcounter

import (
	"errors"
	"fmt"
	"reflect"

	"gorm.io/gorm"
	"gorm.io/gorm/migrator"
	"gorm.io/gorm/schema"
	"gorm.io/plugin/dbresolver"

	"github.com/hotcounter/hotcounter/internal/countersql"
	"github.com/hotcounter/hotcounter/internal/engine"
	"github.com/hotcounter/hotcounter/internal/spec"
)

// dialector wraps the dialector GORM opened with, only to hand out a migrator
// that knows about slot tables: GORM has no migration callbacks. Everything
// else, including the optional interfaces that GORM looks for with type
// assertions (savepoints, error translation), is forwarded.
type dialector struct {
	gorm.Dialector
	plugin *Plugin
	// records is set where the connection records statements instead of
	// running them (atlas-provider-gorm's loader): migrations then show
	// the models' tables and the counters' own, as a tool that keeps
	// tables alone takes them (see records).
	records bool
}

var (
	_ gorm.Dialector                     = (*dialector)(nil)
	_ gorm.SavePointerDialectorInterface = (*dialector)(nil)
	_ gorm.ErrorTranslator               = (*dialector)(nil)
)

// Unwrap returns the dialector that gormcounter wrapped, for code that needs
// its concrete type: db.Dialector.(interface{ Unwrap() gorm.Dialector }).Unwrap().
func (d *dialector) Unwrap() gorm.Dialector { return d.Dialector }

// Migrator returns the wrapped dialector's migrator, extended with slot tables.
func (d *dialector) Migrator(db *gorm.DB) gorm.Migrator {
	// A migration reads the catalog where it writes: on the primary
	// (dbresolver.Write), not on a replica that has not replayed the tables
	// it just created.
	// (Clauses returns a statement that later calls would share; Session
	// makes every call of the migrator start from it afresh, as GORM's own
	// Migrator does.)
	if nested, _ := db.Get(dryRunInner); nested == true {
		// GORM's own migrator, in a dry run, asks for the migrator again
		// (AutoMigrate creates a table through execTx.Migrator()): the
		// library's part is shown once, by the outer call.
		return d.Dialector.Migrator(db)
	}
	db = db.Clauses(dbresolver.Write).Session(&gorm.Session{})
	if db.DryRun || d.records {
		return dryRunMigrator{counterMigrator: counterMigrator{Migrator: d.Dialector.Migrator(db.Set(dryRunInner, true)), db: db, plugin: d.plugin},
			tablesOnly: d.records}
	}
	return counterMigrator{Migrator: d.Dialector.Migrator(db), db: db, plugin: d.plugin}
}

// dryRunInner marks the session of GORM's own migrator in a dry run.
const dryRunInner = "gormcounter:dry_run_inner"

// SavePoint forwards to the wrapped dialector (nested transactions).
func (d *dialector) SavePoint(tx *gorm.DB, name string) error {
	if sp, ok := d.Dialector.(gorm.SavePointerDialectorInterface); ok {
		return sp.SavePoint(tx, name)
	}
	return gorm.ErrUnsupportedDriver
}

// RollbackTo forwards to the wrapped dialector (nested transactions).
func (d *dialector) RollbackTo(tx *gorm.DB, name string) error {
	if sp, ok := d.Dialector.(gorm.SavePointerDialectorInterface); ok {
		return sp.RollbackTo(tx, name)
	}
	return gorm.ErrUnsupportedDriver
}

// Translate forwards to the wrapped dialector (Config.TranslateError).
func (d *dialector) Translate(err error) error {
	if t, ok := d.Dialector.(gorm.ErrorTranslator); ok {
		return t.Translate(err)
	}
	return err
}

// counterMigrator creates a model's slot tables with the model's table, and
// drops them with it.
type counterMigrator struct {
	gorm.Migrator
	db     *gorm.DB
	plugin *Plugin
}

var _ migrator.BuildIndexOptionsInterface = counterMigrator{}

// BuildIndexOptions forwards to the wrapped migrator; GORM asserts this
// interface on db.Migrator() without checking when it creates indexes.
func (m counterMigrator) BuildIndexOptions(opts []schema.IndexOption, stmt *gorm.Statement) []any {
	if b, ok := m.Migrator.(migrator.BuildIndexOptionsInterface); ok {
		return b.BuildIndexOptions(opts, stmt)
	}
	return nil
}

// AutoMigrate migrates the models as GORM does, having first settled their
// counter fields (a sum counter gets no column, a rollup counter a NOT NULL
// DEFAULT 0 one), then creates the slot tables that do not exist yet.
//
// A column that already has a counter's name is adopted (see
// [MoveToSlots]): it must hold integers, a sum counter reads it as part of
// its value (it gets the default 0), a rollup counter folds into it (its
// NULLs become 0), and a count of child rows is recounted from the
// children when its slot table is created. An integer field that is no
// longer a counter gets back what its slot table still holds. AutoMigrate
// says what it did through db's logger.
func (m counterMigrator) AutoMigrate(values ...any) error {
	models, err := m.models(values)
	if err != nil {
		return err
	}
	if err := m.checkForeignKeys(models); err != nil {
		return err
	}
	before, err := m.prepareColumns(models)
	if err != nil {
		return err
	}
	err = m.guardRebuild(values, func(conn *gorm.DB) error { return inner(conn).AutoMigrate(values...) })
	if err != nil {
		return err
	}
	created, err := m.createSlotTables(models)
	if err != nil {
		return err
	}
	if err := m.installCounts(values, models, created); err != nil {
		return err
	}
	if err := m.foldLeftovers(values); err != nil {
		return err
	}
	m.recordStorages(models, before, created)
	return nil
}

// AlterColumn alters a column as GORM does; on SQLite, which recreates the
// table to alter a column, it keeps the table's slot rows and count
// triggers (see guardRebuild).
func (m counterMigrator) AlterColumn(value any, field string) error {
	return m.guardRebuild([]any{value}, func(conn *gorm.DB) error { return inner(conn).AlterColumn(value, field) })
}

// DropColumn drops a column as GORM does, keeping the table's count triggers.
func (m counterMigrator) DropColumn(value any, name string) error {
	return m.guardRebuild([]any{value}, func(conn *gorm.DB) error { return inner(conn).DropColumn(value, name) })
}

// CreateConstraint creates a constraint as GORM does, keeping the table's
// count triggers.
func (m counterMigrator) CreateConstraint(value any, name string) error {
	return m.guardRebuild([]any{value}, func(conn *gorm.DB) error { return inner(conn).CreateConstraint(value, name) })
}

// DropConstraint drops a constraint as GORM does, keeping the table's count
// triggers.
func (m counterMigrator) DropConstraint(value any, name string) error {
	return m.guardRebuild([]any{value}, func(conn *gorm.DB) error { return inner(conn).DropConstraint(value, name) })
}

// CreateTable creates the models' tables and their slot tables.
func (m counterMigrator) CreateTable(values ...any) error {
	models, err := m.models(values)
	if err != nil {
		return err
	}
	if err := m.Migrator.CreateTable(values...); err != nil {
		return err
	}
	created, err := m.createSlotTables(models)
	if err != nil {
		return err
	}
	// A count of rows of a table created just now missed no row: its
	// triggers were never installed, not lost (GORM's AutoMigrate creates a
	// parent, then its child or join table, each on its own).
	for _, v := range values {
		if _, isName := v.(string); isName {
			continue
		}
		stmt := &gorm.Statement{DB: m.db}
		if err := stmt.Parse(v); err != nil {
			continue
		}
		for _, c := range m.plugin.countsOn(stmt.Schema.Table) {
			created[c] = true
		}
	}
	return m.installCounts(values, models, created)
}

// DropTable drops the models' slot tables, then the models' tables. Slot
// tables left behind would hand their counts to new rows that reuse the ids.
func (m counterMigrator) DropTable(values ...any) error {
	models, err := m.models(values)
	if err != nil {
		return fmt.Errorf("%w; DropTable dropped nothing: it finds a counter's slot tables and triggers by its declaration, so fix the tag first", err)
	}
	for _, md := range models {
		if err := m.dropCountTriggers(md); err != nil {
			return err
		}
		for _, c := range md.counters {
			if err := execSQL(m.db, "", func(w countersql.Writer) { m.plugin.dialect.DropSlotTable(w, c.table) }).Error; err != nil {
				return fmt.Errorf("gormcounter: drop slot table of %s: %w", c.name(), err)
			}
		}
	}
	return m.Migrator.DropTable(values...)
}

// models returns the counter models among values (skipping table names and
// models without counters); a bad declaration is an error here.
func (m counterMigrator) models(values []any) ([]*model, error) {
	var out []*model
	for _, v := range values {
		if _, isName := v.(string); isName {
			continue
		}
		t := reflect.TypeOf(v)
		for t != nil && (t.Kind() == reflect.Ptr || t.Kind() == reflect.Slice) {
			t = t.Elem()
		}
		if t == nil || t.Kind() != reflect.Struct {
			continue
		}
		md, err := m.plugin.modelOf(m.db, v)
		if err != nil {
			return nil, err
		}
		if md != nil {
			out = append(out, md)
		}
	}
	return out, nil
}

// ErrForeignKeysOff is wrapped by the error of db.Use(gormcounter.New(...))
// and of AutoMigrate on SQLite when the connection does not enforce
// foreign keys: a deleted parent would keep its slot rows.
var ErrForeignKeysOff = errors.New("SQLite does not enforce foreign keys on this connection: open it with _pragma=foreign_keys(1) in the DSN " +
	"(github.com/glebarez/sqlite, modernc.org/sqlite; gorm.io/driver/sqlite and mattn/go-sqlite3: _foreign_keys=1)")

// checkForeignKeys refuses to migrate counters on a SQLite connection
// without foreign keys. The slot table's foreign key is what removes a
// deleted parent's slot rows (ON DELETE CASCADE), whoever deletes it: with
// it off they stay behind, and SQLite may give a new row the deleted row's
// id, which would then start with its counts. The plugin cannot delete
// them itself for deletes it never sees (raw SQL, other programs).
func (m counterMigrator) checkForeignKeys(models []*model) error {
	if len(models) == 0 {
		return nil
	}
	off, err := engine.ForeignKeysOff(m.db.Statement.Context, gormConn{db: m.db}, m.plugin.dialect)
	if err != nil {
		return fmt.Errorf("gormcounter: %w", err)
	}
	if off {
		return fmt.Errorf("gormcounter: migrate %s: %w: a deleted %s would leave its counters' slot rows behind", models[0].schema.Name, ErrForeignKeysOff, models[0].schema.Name)
	}
	return nil
}

// createSlotTables creates the slot tables that do not exist yet, and
// returns the counters whose tables it created. On Citus it then
// distributes every slot table beside its parent where the parent is
// distributed and the slot table not yet (engine.Store.Colocate).
func (m counterMigrator) createSlotTables(models []*model) (map[*counter]bool, error) {
	created := map[*counter]bool{}
	var all []engine.Counter
	for _, md := range models {
		ownerType := m.plugin.ownerType(m.db, md)
		for _, c := range md.counters {
			if m.Migrator.HasTable(c.table.Slots) {
				continue
			}
			if err := m.plugin.store().CheckParentKey(m.db.Statement.Context, gormConn{db: m.db}, c.engine()); err != nil {
				return nil, err
			}
			created[c] = true
			var err error
			if c.opts.Mode == spec.Append {
				for _, step := range m.plugin.dialect.CreateDeltaTable(c.table, ownerType) {
					if err = execSQL(m.db, "", step).Error; err != nil {
						break
					}
				}
			} else {
				err = execSQL(m.db, "", func(w countersql.Writer) {
					m.plugin.dialect.CreateSlotTable(w, c.table, ownerType)
				}).Error
				if err == nil {
					err = engine.ReadySlotTable(m.db.Statement.Context, gormConn{db: m.db}, m.plugin.dialect, c.table)
				}
			}
			if err != nil {
				return nil, fmt.Errorf("gormcounter: create slot table %s for %s: %w", c.table.Slots, c.name(), err)
			}
			if c.precreate {
				// Parents that existed before the counter get their slot rows now;
				// later parents get them when created.
				err := execSQL(m.db, "", func(w countersql.Writer) {
					m.plugin.dialect.PrecreateSlots(w, c.table, c.opts.Slots, func(w countersql.Writer) { w.WriteString("1=1") })
				}).Error
				if err != nil {
					return nil, fmt.Errorf("gormcounter: create slot rows of %s for existing rows: %w", c.name(), err)
				}
			}
		}
		for _, c := range md.counters {
			all = append(all, c.engine())
		}
	}
	if err := m.plugin.store().Colocate(m.db.Statement.Context, gormConn{db: m.db}, all); err != nil {
		return nil, err
	}
	return created, nil
}

// ownerType returns the column type of md's slot tables' owner column: the
// key's type as db's dialector maps it, never auto-incremented.
func (p *Plugin) ownerType(db *gorm.DB, md *model) string {
	key := *md.key
	key.AutoIncrement = false
	// MySQL sizes a string key varchar(191) only when it is a key (else
	// longtext, which a foreign key cannot reference); elsewhere a primary
	// key's type can carry its auto-increment.
	key.PrimaryKey = p.dialect.MySQL()
	return db.Dialector.DataTypeOf(&key)
}
