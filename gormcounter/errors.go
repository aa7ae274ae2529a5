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

	// ErrNotRegistered is returned when a gormcounter function runs on a
	// *gorm.DB where the plugin was not registered with db.Use.
	ErrNotRegistered = errors.New("gormcounter: plugin not registered: call db.Use(gormcounter.New(gormcounter.Config{}))")
)
