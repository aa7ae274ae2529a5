package entcounter

import (
	"github.com/hotcounter/hotcounter/internal/spec"
)

// Option configures a counter declared with [Counter].
type Option func(*spec.Options)

// Slots sets the number of slot rows per parent (default 16, at most 1024).
// More slots let more writers add to one parent at once; loads sum more rows.
func Slots(n int) Option { return func(o *spec.Options) { o.Give("Slots"); o.Slots = n } }

// AutoSlots (slots=auto) starts each parent at one slot row and widens it,
// doubling up to max rows (0 means 16), while this process's increments of
// it contend: two statements drawing the same slot at once. A parent whose
// increments stop overlapping for 5 seconds narrows again, and
// [CompactPass] folds its rows back into one. Cold parents keep one row, so
// their loads sum one row; a viral one widens within a few dozen
// increments. Not with Precreate, SkipLocked, Guarded or Counts.
func AutoSlots(max int) Option {
	return func(o *spec.Options) {
		o.Give("AutoSlots")
		o.Auto = true
		if max != 0 {
			o.Slots = max
		}
	}
}

// Rollup keeps a cached total in a parent column that [RollupPass] folds
// the slot rows into. Plain loads read the column (stale by at most the
// rollup interval; sortable, indexable, usable in predicates); [WithLive]
// loads read column + pending slots.
func Rollup() Option { return func(o *spec.Options) { o.Give("Rollup"); o.Mode = spec.Rollup } }

// Append keeps a cached total in a parent column, as Rollup does, but an
// increment inserts a delta row instead of upserting a slot, so no two
// increments share a row. RollupPass folds the delta rows into the column
// in batches by id. The counter's table is declared with [DeltasOf]
// instead of SlotsOf.
func Append() Option { return func(o *spec.Options) { o.Give("Append"); o.Mode = spec.Append } }

// Precreate inserts every slot row (n = 0) of a parent when the parent is
// created, so that increments only update existing rows. On PostgreSQL that
// keeps an increment from waiting behind a transaction that holds the
// parent FOR UPDATE (the foreign key check of a first insert takes FOR KEY
// SHARE on the parent); on MySQL/MariaDB, where it is the default for sum
// counters, it also keeps first inserts from taking gap locks. Sum counters
// only. Parents that existed before the counter was declared get their rows
// on their first increments.
func Precreate() Option { return func(o *spec.Options) { o.Give("Precreate"); o.Precreate = spec.On } }

// NoPrecreate turns pre-created slot rows off where they are the default
// (MySQL/MariaDB).
func NoPrecreate() Option {
	return func(o *spec.Options) { o.Give("NoPrecreate"); o.Precreate = spec.Off }
}

// SkipLocked makes an increment of one parent (UpdateOne) take a slot row
// that no other transaction holds (FOR UPDATE SKIP LOCKED: PostgreSQL,
// MySQL 8, MariaDB 10.6+), from a random start, falling back to a random
// slot when all are held, so that a stalled writer does not hold up another
// that drew the same slot. Best with Precreate and more slots than
// concurrent writers. On SQLite it changes nothing.
func SkipLocked() Option { return func(o *spec.Options) { o.Give("SkipLocked"); o.SkipLocked = true } }

// Counts makes the counter the number of rows that the parent's edge
// (named edge) reaches: the child rows of an O2M edge, the rows of an M2M
// edge's join table (or edge schema) that name the parent, or through two
// O2M edges ("children.products") the rows of the second. Triggers that
// [InstallTriggers] creates keep it on every insert, delete and move, raw
// SQL included ([ByHooks]: ent hooks instead); [Recount] repairs drift. The
// field cannot be added to or set: it changes only when those rows do.
//
//	entcounter.Counter("object_count", entcounter.Counts("objects"))
//	entcounter.Counter("follower_count", entcounter.Counts("followers")) // M2M
func Counts(edge string) Option { return func(o *spec.Options) { o.Give("Counts"); o.Counts = edge } }

// Total makes a count ([Counts]) a running total: each counted child row
// adds its value of the child field column (NULL adds 0) instead of 1, as
// a folder's bytes is the total of its files' size. Triggers keep it, on
// inserts, deletes, moves and updates of the column itself.
func Total(column string) Option { return func(o *spec.Options) { o.Give("Total"); o.Total = column } }

// Where limits a count ([Counts]) to the child rows that match cond, a
// boolean SQL expression over the child table's columns (bare names), as in
// status = 'active'.
func Where(cond string) Option { return func(o *spec.Options) { o.Give("Where"); o.Where = cond } }

// ByHooks keeps a count ([Counts]) with ent hooks on the child's mutations
// instead of database triggers, where triggers are not wanted. The hooks
// lock and read the child rows a write targets, pin the write to them, read
// them again after it and add the difference, so every hooked write must
// run in a transaction (client.Tx): outside one it fails, as the count and
// the write would not commit together. Raw SQL is not counted; [Recount]
// repairs.
func ByHooks() Option { return func(o *spec.Options) { o.Give("ByHooks"); o.Hooks = true } }

// AdoptColumn declares a sum counter over a column that the table already
// has and that still holds counts: a field.Int64("likes") that becomes
// entcounter.Counter("likes", entcounter.AdoptColumn()). Loads add the
// column to the slots, as they do for any column of a counter's name; this
// option also keeps the column in ent's schema (nullable, default 0), so
// that no migration drops it: SQLite alters a table by copying it, and the
// copy has only the columns the schema declares. Once [MoveToSlots] has
// emptied the column and no old code writes it, remove the option and
// drop the column.
func AdoptColumn() Option {
	return func(o *spec.Options) { o.Give("AdoptColumn"); o.KeepColumn = true }
}

// Guarded makes a sum counter stock that never goes below zero: it goes
// down only through [Take], which takes in full or refuses with
// [hotcounter.ErrInsufficient]; an Add of a negative amount, or a Set below zero, is
// refused with [hotcounter.ErrNegativeGuarded]. The stock is split over the slot
// rows, each never below zero (docs/guarded.md).
//
//	entcounter.Counter("stock", entcounter.Guarded())
func Guarded() Option { return func(o *spec.Options) { o.Give("Guarded"); o.Guarded = true } }

// annotation marks a counter field; [Counter] attaches it and the extension
// reads it. Users do not write it.
type annotation struct {
	Slots      int    `json:"slots"`
	AutoSlots  bool   `json:"autoslots,omitempty"` // Slots is the widest a parent grows
	Rollup     bool   `json:"rollup,omitempty"`    // a parent column holds the folded total (rollup and append)
	Append     bool   `json:"append,omitempty"`
	Precreate  int    `json:"precreate,omitempty"` // 0: the database's default, 1: on, 2: off
	SkipLocked bool   `json:"skiplocked,omitempty"`
	Counts     string `json:"counts,omitempty"` // the O2M edge whose rows it counts
	Where      string `json:"where,omitempty"`
	Total      string `json:"total,omitempty"` // the child column a running total adds
	Hooks      bool   `json:"hooks,omitempty"`
	KeepColumn bool   `json:"keepcolumn,omitempty"` // AdoptColumn
	Guarded    bool   `json:"guarded,omitempty"`
	Err        string `json:"err,omitempty"` // a bad declaration, reported by the extension
}

// Name implements ent's schema.Annotation.
func (annotation) Name() string { return "HotCounter" }

// slotsAnnotation marks a slot table schema; [SlotsOf] attaches it.
type slotsAnnotation struct {
	Owner string `json:"owner"` // the parent schema's type name, e.g. Post
	Field string `json:"field"` // the counter field, e.g. likes
	// Deltas: the table of an append counter (DeltasOf).
	Deltas bool `json:"deltas,omitempty"`
}

// Name implements ent's schema.Annotation.
func (slotsAnnotation) Name() string { return "HotCounterSlots" }

func annotationOf(o spec.Options, err error) annotation {
	a := annotation{Slots: o.Slots, AutoSlots: o.Auto, Rollup: o.Mode.HasColumn(), Append: o.Mode == spec.Append, Precreate: int(o.Precreate), SkipLocked: o.SkipLocked,
		Counts: o.Counts, Where: o.Where, Total: o.Total, Hooks: o.Hooks, KeepColumn: o.KeepColumn, Guarded: o.Guarded}
	if err != nil {
		a.Err = err.Error()
	}
	return a
}
