package gormcounter

import (
	"errors"
)

var (

	// ErrNoModel is wrapped by the error for an Increment or Take on a
	// statement without a model (db.Table("posts")): a counter is a field
	// of a model, and the table alone names none.
	ErrNoModel = errors.New("the statement has no model, whose fields declare the counters: use db.Model(&Post{}) (with Table for another table name)")
)
