package hotcounter

import (
	"errors"
	"fmt"
)

// The errors gormcounter and entcounter wrap. Each error they return says
// which model (or schema) and field it is about and what to do; test it
// with errors.Is against these.
var (
	// ErrInvalidCounter is wrapped by the error for a counter declaration
	// that cannot work (slots=0 or Slots(0), an unknown option, an option
	// that does not fit the mode, a field that is not an integer, a model
	// without a single primary key), naming model and field: GORM reports
	// it at db.Use (Config.Models), AutoMigrate or the model's first
	// statement, ent at generation and at every write of the counter.
	ErrInvalidCounter = errors.New("invalid counter declaration")

	// ErrNotIncrement is wrapped by the error for a write of a counter that
	// is neither an increment nor a value (likes * 2, another column), and
	// for any write (Add, Set, Clear, an assignment) of a count of child
	// rows, which changes only when its rows do.
	ErrNotIncrement = errors.New("this write cannot change the counter")

	// ErrNotCounter is wrapped by the error for an increment (Increment,
	// a Buffer's Increment) of a field that is not declared as a counter.
	ErrNotCounter = errors.New("field is not a counter")

	// ErrNegativeGuarded is wrapped by the error for a decrease of a
	// guarded counter other than Take (a negative increment, an assignment
	// below its stock): it could take the stock below zero.
	ErrNegativeGuarded = errors.New("a guarded counter goes down only through Take")

	// ErrNotGuarded is wrapped by Take's error on a counter not declared
	// guarded.
	ErrNotGuarded = errors.New("not a guarded counter")

	// ErrInsufficient is wrapped by Take's error when less than the amount
	// is left: the take took nothing. The error is a *Shortage.
	ErrInsufficient = errors.New("not enough left")

	// ErrNotConfigured is wrapped by the error for counters used where the
	// ORM was not set up for them: a *gorm.DB without the plugin (db.Use),
	// ent code generated without entcounter's extension. The wrapping
	// error says what to do.
	ErrNotConfigured = errors.New("counters are not configured")

	// ErrNotMigrated is wrapped by the error of a load of a model whose
	// counts' triggers are missing: the migration that creates them did
	// not run (GORM: tables migrated without the plugin's AutoMigrate;
	// ent: Schema.Create without WithCounters, or InstallTriggers never
	// ran), and its counts would read what no trigger kept. The error
	// names the count and the child table.
	ErrNotMigrated = errors.New("the counters' migration did not run")

	// ErrOverflow is wrapped by the error for an increment whose delta no
	// total of the field's type could take (an int32 counter incremented
	// by more than math.MaxInt32) or a decrease that would take an
	// unsigned counter below zero, refused before anything is written, and
	// by the error of a load whose counter value, written by other code,
	// does not fit the field (above math.MaxInt32 for an int32, below 0
	// for a uint); both name model and field. ent's counter fields are
	// int64, which every increment fits.
	ErrOverflow = errors.New("the value does not fit the counter's field")

	// ErrNotOnCitus is wrapped by the migration's error for a count that
	// Citus cannot keep yet where it distributes the tables (one through a
	// middle table whose child table Citus distributes), naming the
	// counter (docs/scaling.md).
	ErrNotOnCitus = errors.New("Citus cannot keep this counter where it distributes the tables yet")

	// ErrHotKeysOff is wrapped by HotKeys' error when the Config turned
	// the counting of hot keys off (HotKeysConfig.Off): there is nothing
	// to report, which an empty list would not say.
	ErrHotKeysOff = errors.New("hot keys are not counted: the Config's HotKeys.Off is set")

	// ErrBufferFull is returned by a Buffer's Increment when the buffer is
	// full (MaxPending entries in memory, or with a Store, MaxBacklog
	// increments in the store) and BufferConfig.OnFull is BufferFail; with
	// BufferKeep, the backlog is reported to the OnError of the plugin's
	// or client's Config, wrapping it.
	ErrBufferFull = errors.New("write-behind buffer is full")

	// ErrUndeclaredCounter is wrapped by the error a Buffer with a Store
	// reports to the Config's OnError (at most once a minute per counter) when the
	// store holds increments of a counter that no model of this process
	// declares: they are left in the store for a process that declares
	// the counter.
	ErrUndeclaredCounter = errors.New("the write-behind store holds increments of a counter this process does not declare")
)

// Shortage is the error of a take refused for want of stock, wrapped by
// Take's error: Left is what all the counter's rows held together when it
// was refused, Asked what the take asked. errors.Is(err, ErrInsufficient)
// holds for it; errors.As tells how short:
//
//	var short *hotcounter.Shortage
//	if errors.As(err, &short) { ... short.Left, short.Asked ... }
type Shortage struct{ Left, Asked int64 }

func (e *Shortage) Error() string {
	return fmt.Sprintf("%v: %d left, %d asked", ErrInsufficient, e.Left, e.Asked)
}

// Is makes a Shortage match ErrInsufficient.
func (e *Shortage) Is(target error) bool { return target == ErrInsufficient }
