package entcounter

import (
	"fmt"

	"github.com/hotcounter/hotcounter/internal/engine"
	"github.com/hotcounter/hotcounter/internal/spec"
)

var (
	// ErrNotOnCitus is wrapped by the migration's error for a count that
	// Citus cannot keep yet (one through a middle table whose child table
	// Citus distributes), naming the counter (docs/scaling.md). It is
	// gormcounter.ErrNotOnCitus.
	ErrNotOnCitus = engine.ErrNotOnCitus
	// ErrInvalidCounter is wrapped by the error for a counter declaration
	// that cannot work (Slots(0), an option that does not fit the mode),
	// reported at generation and by every write of the counter, naming
	// schema and field. It is gormcounter.ErrInvalidCounter.
	ErrInvalidCounter = spec.ErrInvalid

	// ErrOverflow is gormcounter.ErrOverflow; ent's counter fields are
	// int64, which every increment fits.
	ErrOverflow = spec.ErrOverflow

	// ErrNotIncrement is wrapped by the error for an Add, Set or Clear of a
	// count of child rows ([Counts]): it changes only when the child rows
	// do. It is gormcounter.ErrNotIncrement.
	ErrNotIncrement = spec.ErrNotIncrement

	// ErrNotCounter is wrapped by the error for a buffered increment of a
	// field that is not a counter. It is gormcounter.ErrNotCounter.
	ErrNotCounter = spec.ErrNotCounter

	// ErrNotConfigured is wrapped by the error for a query or mutation of a
	// schema with counters run without the code that entcounter's
	// extension generates; the error says how to generate it. It is
	// gormcounter.ErrNotConfigured.
	ErrNotConfigured = spec.ErrNotConfigured

	// ErrNotMigrated is wrapped by the error of a load of a schema whose
	// counts' triggers are missing: the migration ran without
	// [WithCounters] (or [InstallTriggers] never ran). The error names the
	// count and the child table.
	ErrNotMigrated = spec.ErrNotMigrated

	// errNotGenerated is that error.
	errNotGenerated = fmt.Errorf("entcounter: the generated code has no HotCounter method: generate with entc.Extensions(entcounter.Extension()): %w", ErrNotConfigured)
)
