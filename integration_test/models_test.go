package integration_test

import (
	"gorm.io/gorm"
)

// Post is the model of the issue: a sum counter and a rollup counter.
type Post struct {
	ID       uint
	Title    string
	Likes    int64 `gorm:"counter"`
	Views    int64 `gorm:"counter:slots=64,rollup"`
	AuthorID *uint
	Author   *Author
	Comments []Comment
}

// Author is joined from Post and has a counter of its own.
type Author struct {
	ID        uint
	Name      string
	Followers int32 `gorm:"counter:slots=4"`
}

// Comment is preloaded from Post and has a counter of its own.
type Comment struct {
	ID     uint
	PostID uint
	Body   string
	Upvote int `gorm:"counter:slots=8"`
}

// Note has soft delete and an updated_at that increments must not touch.
type Note struct {
	ID        uint
	Text      string
	Stars     int64 `gorm:"counter"`
	UpdatedAt int64 `gorm:"autoUpdateTime:milli"`
	DeletedAt gorm.DeletedAt
}

// PostSummary is a destination struct that is not the model.
type PostSummary struct {
	ID    uint
	Title string
	Likes int64
}

// Tag is upserted by name in the ent tests; GORM migrates it too, so that
// either ORM can own the schema.
type Tag struct {
	ID   uint
	Name string `gorm:"size:100;uniqueIndex"`
	Uses int64  `gorm:"counter"`
	Hits int64  `gorm:"counter:rollup"`
}

// Shelf, Book, Rack and Item are the GORM side of the ent count schemas
// (integration_test/ent/schema/shelf.go), so that GORM can own that schema
// too: the same tables, slot tables and counts.
type Shelf struct {
	ID        int
	Name      string `gorm:"default:''"`
	BookCount int64  `gorm:"counter:counts=Books"`
	OpenCount int64  `gorm:"counter:slots=4,rollup,counts=Books,where=status = 'open'"`
	Books     []Book
}

// Book is a child row that shelves count.
type Book struct {
	ID      int
	Status  string `gorm:"size:20;default:open"`
	ShelfID *int   `gorm:"index"`
}

// Rack counts its items with hooks.
type Rack struct {
	ID        int
	Name      string `gorm:"default:''"`
	ItemCount int64  `gorm:"counter:counts=Items,hooks"`
	OpenCount int64  `gorm:"counter:slots=4,rollup,counts=Items,hooks,where=status = 'open'"`
	Items     []Item
}

// Item is a child row that racks count.
type Item struct {
	ID     int
	Status string `gorm:"size:20;default:open"`
	RackID *int   `gorm:"index"`
}

func migrateAll(db *gorm.DB) error {
	return db.AutoMigrate(&Author{}, &Post{}, &Comment{}, &Note{}, &Tag{}, &Story{}, &Shelf{}, &Book{}, &Rack{}, &Item{})
}
