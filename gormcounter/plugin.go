package gormcounter

import (
	"context"
	"errors"
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

	cb := db.Callback()
	for _, r := range []func() error{
		func() error { return cb.Create().Before("*").Register("gormcounter:prepare", p.prepareCallback) },
		func() error { return cb.Query().Before("*").Register("gormcounter:prepare", p.prepareCallback) },
		func() error { return cb.Update().Before("*").Register("gormcounter:prepare", p.prepareCallback) },
		func() error { return cb.Delete().Before("*").Register("gormcounter:prepare", p.prepareCallback) },
		func() error { return cb.Row().Before("*").Register("gormcounter:prepare", p.prepareCallback) },
		func() error {
			// Before associations are saved: an update of counters alone saves none.
			return cb.Update().After("gorm:before_update").Before("gorm:save_before_associations").
				Register("gormcounter:rewrite_update", p.rewriteUpdate)
		},
		func() error {
			return cb.Update().After("gormcounter:rewrite_update").Before("gorm:update").
				Register("gormcounter:hotkeys", p.countPlainIncrements)
		},
		func() error {
			return cb.Update().Before("gorm:begin_transaction").Register("gormcounter:no_default_transaction", p.skipDefaultTransaction)
		},
		func() error { return p.guardParentUpdate(db) },
		func() error {
			return cb.Create().After("gorm:before_create").Before("gorm:create").Register("gormcounter:check_start", p.checkStart)
		},
		func() error {
			return cb.Create().After("gorm:create").Before("gorm:save_after_associations").
				Register("gormcounter:start", p.start)
		},
		func() error {
			return cb.Create().Before("gorm:create").Register("gormcounter:batch", p.refuseEmptyBatch)
		},
		func() error { return cb.Query().Before("gorm:query").Register("gormcounter:select", p.adjustSelect) },
		func() error { return cb.Query().After("*").Register("gormcounter:overflow", p.nameOverflow) },
		// A child write whose count's triggers are missing would go uncounted.
		func() error {
			return cb.Create().Before("gorm:create").Register("gormcounter:counts_migrated", p.childCountsMigrated)
		},
		func() error {
			return cb.Update().Before("gorm:update").Register("gormcounter:counts_migrated", p.childCountsMigrated)
		},
		func() error {
			return cb.Delete().Before("gorm:delete").Register("gormcounter:counts_migrated", p.childCountsMigrated)
		},
		// Counts of child rows kept by hooks (counts=...,hooks).
		func() error {
			return cb.Create().After("gorm:begin_transaction").Before("gorm:before_create").Register("gormcounter:count_begin", p.countBegin)
		},
		func() error {
			return cb.Update().After("gorm:begin_transaction").Before("gorm:setup_reflect_value").Register("gormcounter:count_begin", p.countBegin)
		},
		func() error {
			return cb.Delete().After("gorm:begin_transaction").Before("gorm:before_delete").Register("gormcounter:count_begin", p.countBeginDelete)
		},
		func() error {
			return cb.Create().After("*").Register("gormcounter:count_commit", p.countCommit)
		},
		func() error {
			return cb.Update().After("*").Register("gormcounter:count_commit", p.countCommit)
		},
		func() error {
			return cb.Delete().After("*").Register("gormcounter:count_commit", p.countCommit)
		},
		func() error {
			return cb.Create().Before("gorm:create").Register("gormcounter:count_before_create", p.countBeforeCreate)
		},
		func() error {
			return cb.Create().After("gorm:create").Before("gorm:save_after_associations").
				Register("gormcounter:count_create", p.countAfterCreate)
		},
		func() error {
			return cb.Update().After("gormcounter:rewrite_update").Before("gorm:update").
				Register("gormcounter:count_before_update", p.countBeforeUpdate)
		},
		func() error {
			return cb.Update().After("gorm:update").Before("gorm:save_after_associations").
				Register("gormcounter:count_after_update", p.countAfterWrite)
		},
		func() error {
			return cb.Delete().Before("gorm:delete").Register("gormcounter:count_before_delete", p.countBeforeDelete)
		},
		func() error {
			return cb.Delete().After("gorm:delete").Before("gorm:after_delete").Register("gormcounter:count_after_delete", p.countAfterWrite)
		},
		func() error { return cb.Row().Before("gorm:row").Register("gormcounter:columns", p.dropAbsentColumns) },
		func() error {
			return cb.Row().After("gormcounter:columns").Before("gorm:row").Register("gormcounter:refs", p.rewriteRefs)
		},
		func() error {
			return cb.Query().After("gormcounter:select").Before("gorm:query").Register("gormcounter:refs", p.rewriteRefs)
		},
		func() error {
			return cb.Update().After("gormcounter:prepare").Before("gormcounter:rewrite_update").Register("gormcounter:refs", p.rewriteWriteRefs)
		},
		func() error {
			return cb.Delete().After("gormcounter:prepare").Before("gorm:delete").Register("gormcounter:refs", p.rewriteWriteRefs)
		},
		// After gorm:query alone would land after gorm:after_query, so AfterFind
		// hooks would see unfilled counters (gorm#4712).
		func() error {
			return cb.Query().After("gorm:query").Before("gorm:preload").Register("gormcounter:fill", p.fill)
		},
	} {
		if err := r(); err != nil {
			return fmt.Errorf("gormcounter: register callbacks: %w", err)
		}
	}
	return nil
}

// skipParentUpdate marks a statement whose assignments were all counters: the
// increments already ran, and the parent row must not be written.
const skipParentUpdate = "gormcounter:skip_parent_update"

// guardParentUpdate wraps gorm:update so that an update which assigned only
// counters issues no UPDATE of the parent (not even updated_at): an increment
// never writes or locks the parent row.
func (p *Plugin) guardParentUpdate(db *gorm.DB) error {
	update := db.Callback().Update()
	orig := update.Get("gorm:update")
	if orig == nil {
		return errors.New("gorm:update callback not found")
	}
	return update.Replace("gorm:update", func(tx *gorm.DB) {
		if _, skip := tx.Statement.Settings.LoadAndDelete(skipParentUpdate); !skip {
			orig(tx)
		}
		if tx.DryRun {
			showDryRun(tx)
		}
	})
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
