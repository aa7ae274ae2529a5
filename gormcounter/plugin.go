package gormcounter

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel/metric"

	"gorm.io/gorm"

	"github.com/hotcounter/hotcounter"
	"github.com/hotcounter/hotcounter/internal/combine"
	"github.com/hotcounter/hotcounter/internal/driver"
	"github.com/hotcounter/hotcounter/internal/engine"
	"github.com/hotcounter/hotcounter/internal/observe"
	"github.com/hotcounter/hotcounter/internal/spec"
)

// Name is the plugin's name in gorm.Config.Plugins.
const Name = "gormcounter"

// Config tunes the plugin. The zero value is ready to use.
type Config struct {
	// DefaultSlots is the slot count of a counter whose tag names none.
	// Zero means 16.
	DefaultSlots int
	// RollupBatchSize is how many parents one transaction of a pass
	// (RollupPass, CompactPass, MoveToSlots, Recount) takes.
	// Zero means 500.
	RollupBatchSize int
	// Models (pointers to model structs) are checked when the plugin is
	// registered, so that a bad counter declaration fails db.Use. Optional:
	// other models are checked by AutoMigrate or their first statement. Listing
	// models also settles GORM's parsed schema before any statement is built,
	// which matters only if statements use counter models in struct conditions
	// (Where(&Post{...})) from many goroutines before the first statement.
	Models []any
	// InFlight is how many increment statements may run at once for one
	// counter of the same rows (one post's Likes, say) outside a
	// transaction. Increments that arrive while that many run wait for one
	// of them to finish and then go together, as one statement that adds
	// their sum, the way a database's group commit shares one flush among
	// concurrent commits. A lone increment never waits and runs as it
	// would without combining. Each caller returns after the statement that
	// carried its delta has committed, with that statement's error and
	// RowsAffected, or at once when its context ends (the outcome is then
	// unknown, as for any cancelled write). A statement that carries
	// waiting increments runs on a goroutine of its own, which ends when
	// none is left waiting. Increments inside a transaction
	// (the caller's, or GORM's default one around an update) and increments
	// of append counters are never combined. Zero means 2; negative turns
	// combining off.
	InFlight int
	// AutoCooldown is how long the increments of a parent of a slots=auto
	// counter must go without two statements in flight at once before its
	// width halves (the widening is immediate). Zero means 5 seconds.
	AutoCooldown time.Duration
	// HotKeys tunes the counting of increments per row that
	// [HotKeys] reports; on unless HotKeys.Off.
	HotKeys hotcounter.HotKeysConfig
	// MeterProvider, when set, receives OpenTelemetry metrics of the
	// plugin's counters: increments and their duration, rollup and
	// compaction passes, fold lag, write-behind flushes and pending
	// amounts, recounts, and the rate of the hottest rows. See
	// docs/metrics.md for the names and attributes. Nil records none.
	MeterProvider metric.MeterProvider
	// OnError hears every error of the work the plugin does in the
	// background, which no call can return: a pass of [RollupLoop] that
	// failed (the next tick retries it), a [Buffer]'s flush that failed
	// (retried) and its ledger's pruning, and, with a Store, increments the
	// store holds of counters no model of this process declares
	// (hotcounter.ErrUndeclaredCounter, at most once a minute per counter)
	// and a backlog past MaxBacklog under BufferKeep. Nil: they go to the
	// logger of the *gorm.DB the work runs on, at its Error level.
	OnError func(error)
}

// Plugin makes struct fields tagged `gorm:"counter"` sharded counters. Create
// it with [New] and register it with db.Use. Use starts no goroutine; the
// rollup loop runs only where you call [RollupLoop].
type Plugin struct {
	cfg     Config
	dialect engine.Dialect
	models  sync.Map // *schema.Schema -> *modelEntry

	uniques  sync.Map // *schema.Schema -> bool: a unique key besides the primary key
	migrated sync.Map // slot table -> true: a count whose triggers a load found (countsMigrated)
	countsMu sync.Mutex
	counts   map[string][]*counter // child table -> the counts of its rows

	combined combine.Group // increments outside transactions, by target
	takes    combine.Group // takes of guarded counters outside transactions, by item

	// storages: where each counter's values live in this database (an
	// adopted column, a table a change of mode left), probed once.
	storages engine.Storages

	// settings are cfg's run-time settings, resolved.
	settings spec.Settings
	// obs counts hot keys and records metrics; set by Initialize.
	obs *observe.Observer
}

var _ gorm.Plugin = (*Plugin)(nil)

// onError is where the background work on db reports: Config.OnError, or
// db's logger.
func (p *Plugin) onError(db *gorm.DB) func(error) {
	if p.settings.OnError != nil {
		return p.settings.OnError
	}
	return func(err error) { db.Logger.Error(context.Background(), "gormcounter: %v", err) }
}

// New returns the plugin with cfg's settings.
func New(cfg Config) *Plugin {
	if cfg.DefaultSlots == 0 {
		cfg.DefaultSlots = spec.DefaultSlots
	}
	set := spec.Settings{BatchSize: cfg.RollupBatchSize, InFlight: cfg.InFlight, AutoCooldown: cfg.AutoCooldown, OnError: cfg.OnError}.Resolved()
	cfg.RollupBatchSize, cfg.InFlight = set.BatchSize, set.InFlight
	p := &Plugin{cfg: cfg, settings: set}
	p.combined.Limit = cfg.InFlight
	p.takes.Limit = cfg.InFlight
	p.takes.Split = engine.SplitTakes
	return p
}

// Name implements gorm.Plugin.
func (p *Plugin) Name() string { return Name }

// Initialize implements gorm.Plugin: it checks the configuration, wraps the
// dialector so that AutoMigrate also creates slot tables, and registers the
// callbacks that rewrite counter assignments and fill counters on load.
func (p *Plugin) Initialize(db *gorm.DB) error {
	if err := (spec.Options{Slots: p.cfg.DefaultSlots}).Validate(); err != nil {
		return fmt.Errorf("gormcounter: Config.DefaultSlots: %w", err)
	}
	d, err := driver.For(db.Dialector.Name())
	if err != nil {
		return err
	}
	recording := records(db)
	if !recording {
		// See checkForeignKeys: refused before any write is counted.
		off, err := engine.ForeignKeysOff(db.Statement.Context, gormConn{db: db.Session(&gorm.Session{NewDB: true})}, d)
		if err != nil {
			return fmt.Errorf("gormcounter: %w", err)
		}
		if off {
			return fmt.Errorf("gormcounter: %w: a deleted row would leave its counters' slot rows behind", ErrForeignKeysOff)
		}
	}
	if !recording {
		// Citus takes some statements in another form (countersql's citus.go).
		if d, err = engine.WithCitus(db.Statement.Context, gormConn{db: db.Session(&gorm.Session{NewDB: true})}, d); err != nil {
			return fmt.Errorf("gormcounter: %w", err)
		}
	}
	p.dialect = d
	if p.obs == nil {
		obs, err := observe.New(observe.Config{System: engine.System(db.Statement.Context, gormConn{db: db.Session(&gorm.Session{NewDB: true})}, p.dialect, p.cfg.MeterProvider != nil), Keys: p.cfg.HotKeys.Keys, Window: p.cfg.HotKeys.Window,
			Off: p.cfg.HotKeys.Off, MeterProvider: p.cfg.MeterProvider})
		if err != nil {
			return err
		}
		p.obs = obs
	}
	for _, v := range p.cfg.Models { // before changing anything: a failed Use leaves db as it was
		if _, err := p.modelOf(db, v); err != nil {
			return err
		}
	}

	if _, wrapped := db.Dialector.(*dialector); !wrapped && !loaderDialector(db.Dialector) {
		db.Dialector = &dialector{Dialector: db.Dialector, plugin: p, records: recording}
	}

	for _, c := range p.callbacks() {
		if err := c.register(db); err != nil {
			return fmt.Errorf("gormcounter: register callbacks: %w", err)
		}
	}
	return nil
}

// callback is one of the plugin's GORM callbacks: on which operation, its
// name, where it goes (GORM's After and Before; "" for none) and what it
// runs.
type callback struct {
	on            operation
	name          string
	after, before string
	fn            func(*gorm.DB)
	// wrap, when set, replaces GORM's own callback name by what it
	// returns around it (fn, after and before unused).
	wrap func(orig func(*gorm.DB)) func(*gorm.DB)
}

// operation names one of GORM's callback processors.
type operation int

const (
	onCreate operation = iota
	onQuery
	onUpdate
	onDelete
	onRow
)

// at is the callback name on operation on, placed after and before.
func at(on operation, name, after, before string, fn func(*gorm.DB)) callback {
	return callback{on: on, name: name, after: after, before: before, fn: fn}
}

func (c callback) register(db *gorm.DB) error {
	cb := db.Callback()
	if c.wrap != nil { // GORM's gorm:update, the one callback wrapped
		orig := cb.Update().Get(c.name)
		if orig == nil {
			return fmt.Errorf("%s callback not found", c.name)
		}
		return cb.Update().Replace(c.name, c.wrap(orig))
	}
	switch c.on {
	case onCreate:
		return cb.Create().After(c.after).Before(c.before).Register(c.name, c.fn)
	case onQuery:
		return cb.Query().After(c.after).Before(c.before).Register(c.name, c.fn)
	case onUpdate:
		return cb.Update().After(c.after).Before(c.before).Register(c.name, c.fn)
	case onDelete:
		return cb.Delete().After(c.after).Before(c.before).Register(c.name, c.fn)
	default:
		return cb.Row().After(c.after).Before(c.before).Register(c.name, c.fn)
	}
}

// callbacks lists the plugin's callbacks, registered in this order.
func (p *Plugin) callbacks() []callback {
	return []callback{
		at(onCreate, "gormcounter:prepare", "", "*", p.prepareCallback),
		at(onQuery, "gormcounter:prepare", "", "*", p.prepareCallback),
		at(onUpdate, "gormcounter:prepare", "", "*", p.prepareCallback),
		at(onDelete, "gormcounter:prepare", "", "*", p.prepareCallback),
		at(onRow, "gormcounter:prepare", "", "*", p.prepareCallback),
		// Before associations are saved: an update of counters alone saves none.
		at(onUpdate, "gormcounter:rewrite_update", "gorm:before_update", "gorm:save_before_associations", p.rewriteUpdate),
		at(onUpdate, "gormcounter:hotkeys", "gormcounter:rewrite_update", "gorm:update", p.countPlainIncrements),
		at(onUpdate, "gormcounter:no_default_transaction", "", "gorm:begin_transaction", p.skipDefaultTransaction),
		{on: onUpdate, name: "gorm:update", wrap: guardParentUpdate},
		at(onCreate, "gormcounter:check_start", "gorm:before_create", "gorm:create", p.checkStart),
		at(onCreate, "gormcounter:start", "gorm:create", "gorm:save_after_associations", p.start),
		at(onCreate, "gormcounter:batch", "", "gorm:create", p.refuseEmptyBatch),
		at(onQuery, "gormcounter:select", "", "gorm:query", p.adjustSelect),
		at(onQuery, "gormcounter:overflow", "*", "", p.nameOverflow),
		// A child write whose count's triggers are missing would go uncounted.
		at(onCreate, "gormcounter:counts_migrated", "", "gorm:create", p.childCountsMigrated),
		at(onUpdate, "gormcounter:counts_migrated", "", "gorm:update", p.childCountsMigrated),
		at(onDelete, "gormcounter:counts_migrated", "", "gorm:delete", p.childCountsMigrated),
		// Counts of child rows kept by hooks (counts=...,hooks).
		at(onCreate, "gormcounter:count_begin", "gorm:begin_transaction", "gorm:before_create", p.countBegin),
		at(onUpdate, "gormcounter:count_begin", "gorm:begin_transaction", "gorm:setup_reflect_value", p.countBegin),
		at(onDelete, "gormcounter:count_begin", "gorm:begin_transaction", "gorm:before_delete", p.countBeginDelete),
		at(onCreate, "gormcounter:count_commit", "*", "", p.countCommit),
		at(onUpdate, "gormcounter:count_commit", "*", "", p.countCommit),
		at(onDelete, "gormcounter:count_commit", "*", "", p.countCommit),
		at(onCreate, "gormcounter:count_before_create", "", "gorm:create", p.countBeforeCreate),
		at(onCreate, "gormcounter:count_create", "gorm:create", "gorm:save_after_associations", p.countAfterCreate),
		at(onUpdate, "gormcounter:count_before_update", "gormcounter:rewrite_update", "gorm:update", p.countBeforeUpdate),
		at(onUpdate, "gormcounter:count_after_update", "gorm:update", "gorm:save_after_associations", p.countAfterWrite),
		at(onDelete, "gormcounter:count_before_delete", "", "gorm:delete", p.countBeforeDelete),
		at(onDelete, "gormcounter:count_after_delete", "gorm:delete", "gorm:after_delete", p.countAfterWrite),
		at(onRow, "gormcounter:columns", "", "gorm:row", p.dropAbsentColumns),
		at(onRow, "gormcounter:refs", "gormcounter:columns", "gorm:row", p.rewriteRefs),
		at(onQuery, "gormcounter:refs", "gormcounter:select", "gorm:query", p.rewriteRefs),
		at(onUpdate, "gormcounter:refs", "gormcounter:prepare", "gormcounter:rewrite_update", p.rewriteWriteRefs),
		at(onDelete, "gormcounter:refs", "gormcounter:prepare", "gorm:delete", p.rewriteWriteRefs),
		// After gorm:query alone would land after gorm:after_query, so
		// AfterFind hooks would see unfilled counters (gorm#4712).
		at(onQuery, "gormcounter:fill", "gorm:query", "gorm:preload", p.fill),
	}
}

// skipParentUpdate marks a statement whose assignments were all counters: the
// increments already ran, and the parent row must not be written.
const skipParentUpdate = "gormcounter:skip_parent_update"

// guardParentUpdate wraps gorm:update so that an update which assigned only
// counters issues no UPDATE of the parent (not even updated_at): an increment
// never writes or locks the parent row.
func guardParentUpdate(orig func(*gorm.DB)) func(*gorm.DB) {
	return func(tx *gorm.DB) {
		if _, skip := tx.Statement.Settings.LoadAndDelete(skipParentUpdate); !skip {
			orig(tx)
		}
		if tx.DryRun {
			showDryRun(tx)
		}
	}
}

// prepareCallback validates the statement's model and the models it relates
// to, and settles how GORM treats their counter fields, before any GORM
// callback reads those fields.
func (p *Plugin) prepareCallback(db *gorm.DB) {
	if db.Error != nil || db.Statement.Schema == nil {
		return
	}
	if _, err := p.model(db, db.Statement.Schema); err != nil {
		db.AddError(err)
	}
}

// store returns the engine's view of the plugin: what every pass takes.
func (p *Plugin) store() engine.Store {
	return engine.Store{Dialect: p.dialect, Settings: p.settings, Storages: &p.storages, Observer: p.obs, Pkg: Name, Migration: migration}
}

// migration is what errors say makes the schema counters need.
const migration = "run db.AutoMigrate with the plugin registered, or apply the statements of gormcounter.SchemaSQL (docs/migrations.md)"

// pluginOf returns the plugin registered on db.
func pluginOf(db *gorm.DB) (*Plugin, error) {
	if p, ok := db.Config.Plugins[Name].(*Plugin); ok {
		return p, nil
	}
	return nil, errNotRegistered
}

// errNotRegistered is pluginOf's error.
var errNotRegistered = fmt.Errorf("gormcounter: the plugin is not registered on this *gorm.DB: call db.Use(gormcounter.New(gormcounter.Config{})) and check its error "+
	"(on SQLite it fails with ErrForeignKeysOff unless the DSN enforces foreign keys): %w", hotcounter.ErrNotConfigured)
