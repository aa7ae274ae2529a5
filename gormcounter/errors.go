package gormcounter

import (
	"errors"

	"github.com/hotcounter/hotcounter/internal/spec"
)

var (
	// ErrInvalidCounter is wrapped by the error for a counter declaration that
	// cannot work (slots=0, slots=x, an unknown option, a non-integer field, a
	// model without a single primary key). The message names model and field.
	ErrInvalidCounter = spec.ErrInvalid

	// ErrNotIncrement is wrapped by the error for an expression assigned to
	// a counter that is neither "column + n", "column - n" nor a value
	// (likes * 2), and for any write of a count of child rows.
	ErrNotIncrement = spec.ErrNotIncrement

	// ErrNotCounter is wrapped by the error for Increment on a field that is
	// not declared as a counter.
	ErrNotCounter = spec.ErrNotCounter

	// ErrNoModel is wrapped by the error for an Increment or Take on a
	// statement without a model (db.Table("posts")): a counter is a field
	// of a model, and the table alone names none.
	ErrNoModel = errors.New("the statement has no model, whose fields declare the counters: use db.Model(&Post{}) (with Table for another table name)")

	// ErrNotConfigured is wrapped by the error for a gormcounter function
	// run on a *gorm.DB where the plugin was not registered with db.Use;
	// the error says how to register it. It is entcounter.ErrNotConfigured.
	ErrNotConfigured = spec.ErrNotConfigured

	// ErrNotMigrated is wrapped by the error of a load of a model whose
	// counts' triggers are missing: its tables were migrated without the
	// plugin's AutoMigrate. It is entcounter.ErrNotMigrated.
	ErrNotMigrated = spec.ErrNotMigrated

	// ErrOverflow is wrapped by the error for an increment whose delta no
	// total of the field's type could take (an int32 counter incremented by
	// more than math.MaxInt32) or a decrease that would take an unsigned
	// counter below zero, refused before anything is written, and by
	// the error of a load whose counter value, written by other code, does
	// not fit the field (above math.MaxInt32 for an int32, below 0 for a
	// uint); both name model and field. It is entcounter.ErrOverflow.
	ErrOverflow = spec.ErrOverflow
)
