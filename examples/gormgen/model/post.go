// Package model is the example's model, from which gorm.io/gen generates
// package query (go generate ./examples/gormgen).
package model

// Post has two counters, declared with gormcounter's tags alone. Likes: a
// sum counter (no column on the table; every load sums its slot rows).
// Views: a rollup counter (the column caches the total; a rollup pass folds
// the slot rows into it).
type Post struct {
	ID    uint
	Title string
	Likes int64 `gorm:"counter"`
	Views int64 `gorm:"counter:slots=64,rollup"`
}

// TableName keeps the example to tables of its own.
func (Post) TableName() string { return "gormgen_posts" }
