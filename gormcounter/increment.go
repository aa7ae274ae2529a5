package gormcounter

import (
	"fmt"

	"gorm.io/gorm"
)

// Increment adds delta (negative to subtract) to the counter field of every
// row that db targets, and returns the result like GORM's UpdateColumn:
// check Error; RowsAffected is the number of parent rows incremented.
//
//	gormcounter.Increment(db.Model(&post), "Likes", 1)
//	gormcounter.Increment(db.Model(&Post{}).Where("id IN ?", ids), "Likes", -3)
//
// field is the field name or the column name. The targets are chosen as
// UpdateColumn chooses them (the model's primary key, Where conditions, soft
// delete); without any condition the call fails with gorm.ErrMissingWhereClause
// unless the session allows global updates.
//
// The write is one statement that upserts one random slot row per target,
// inside db's transaction if it has one; outside one it needs none (a single
// statement is atomic), so Increment skips GORM's default transaction and
// costs one round trip. It never writes or locks the parent row, runs no
// hooks and does not touch updated_at.
//
// Outside a transaction, concurrent increments of the same counter and rows
// from one *gorm.DB share statements: at most [Config].InFlight statements
// run for them at once, and increments that arrive meanwhile go together in
// the next one, which adds their sum. Each call still returns only after the
// statement that carried its delta has committed, with that statement's
// Error and RowsAffected. If db's context ends while the call waits, it
// returns the context's error; its increment may still be written if its
// statement had started, as with any cancelled write.
//
// The same path serves db.Model(&post).UpdateColumn("likes", gorm.Expr("likes + ?", 1)),
// inside GORM's default transaction unless the session skips it.
func Increment(db *gorm.DB, field string, delta int64) *gorm.DB {
	if refused := unmodelled(db, "Increment", field); refused != nil {
		return refused
	}
	return db.Session(&gorm.Session{SkipDefaultTransaction: true}).
		UpdateColumn(field, incrementValue{field: field, delta: delta})
}

// unmodelled returns the result of a call (Increment, Take) on db that
// cannot name a counter, with an error wrapping ErrNoModel: a nil db, or a
// statement with neither a model nor a table (db, db.Model(nil)). nil when
// db has one. (db.Table("posts") alone is refused where the statement is
// built, with the table's name.)
func unmodelled(db *gorm.DB, call, field string) *gorm.DB {
	switch {
	case db == nil:
		return &gorm.DB{Config: &gorm.Config{}, Statement: &gorm.Statement{}, Error: fmt.Errorf("gormcounter: %s(%q) on a nil *gorm.DB: %w", call, field, ErrNoModel)}
	case db.Statement != nil && db.Statement.Model == nil && db.Statement.Table == "":
		tx := db.Session(&gorm.Session{})
		_ = tx.AddError(fmt.Errorf("gormcounter: %s(%q): %w", call, field, ErrNoModel))
		return tx
	}
	return nil
}
