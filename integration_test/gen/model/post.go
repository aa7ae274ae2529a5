// Package model holds the models that gorm.io/gen generates the typed
// queries of package query from (go generate ./integration_test/gen).
package model

// Post is a post with a sum counter and a rollup counter, as a gen user
// declares it: the tags are gormcounter's, nothing else.
type Post struct {
	ID    uint
	Title string
	Likes int64 `gorm:"counter"`
	Views int64 `gorm:"counter:rollup"`
}
