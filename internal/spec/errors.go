package spec

import "errors"

// The errors both ORM packages report, defined once: gormcounter and
// entcounter export them under their own names (ErrInvalidCounter, ...),
// so errors.Is works with either package's name.
var (
	// ErrInvalid is wrapped by every declaration error.
	ErrInvalid = errors.New("invalid counter declaration")

	// ErrNotIncrement is wrapped by the error for a write of a counter that
	// is neither an increment nor a value (a multiplication, another
	// column), and for any write of a count of child rows, which changes
	// only when its rows do.
	ErrNotIncrement = errors.New("this write cannot change the counter")

	// ErrNotCounter is wrapped by the error for an increment of a field
	// that is not declared as a counter.
	ErrNotCounter = errors.New("field is not a counter")

	// ErrNegativeGuarded is wrapped by the error for a decrease of a
	// guarded counter other than a take (a negative increment, an
	// assignment below zero): it could take the stock below zero.
	ErrNegativeGuarded = errors.New("a guarded counter goes down only through Take")

	// ErrNotGuarded is wrapped by a take's error on a counter not declared
	// guarded.
	ErrNotGuarded = errors.New("not a guarded counter")

	// ErrNotConfigured is wrapped by the error for counters used where the
	// ORM was not set up for them: a *gorm.DB without the plugin, ent code
	// generated without the extension. The wrapping error says what to do.
	ErrNotConfigured = errors.New("counters are not configured")

	// ErrNotMigrated is wrapped by the error of a load of a parent whose
	// count's triggers are missing: the migration that creates them did
	// not run (ent: Schema.Create without WithCounters), and its counts
	// would read what no trigger kept.
	ErrNotMigrated = errors.New("the counters' migration did not run")

	// ErrOverflow is wrapped by the error for an increment whose delta is
	// beyond what the counter's field type can hold, and by the error of a
	// load of a counter whose value (written by other code) does not fit
	// its field.
	ErrOverflow = errors.New("the value does not fit the counter's field")
)

// DefaultBatchSize is how many parents one transaction of a pass (rollup,
// compaction, move, recount) takes, unless configured.
const DefaultBatchSize = 500
