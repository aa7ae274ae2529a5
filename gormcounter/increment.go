package gormcounter

import (
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
	return db.Session(&gorm.Session{SkipDefaultTransaction: true}).
		UpdateColumn(field, incrementValue{field: field, delta: delta})
}
