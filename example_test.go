package hotcounter_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/glebarez/sqlite"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/hotcounter/hotcounter"
	"github.com/hotcounter/hotcounter/gormcounter"
)

// A refused take is a *Shortage, whichever ORM took: errors.Is tells that
// the stock was short, errors.As by how much.
func ExampleShortage() {
	type Item struct {
		ID    uint
		Stock int64 `gorm:"counter:guarded"`
	}
	dir, err := os.MkdirTemp("", "hotcounter-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	db, err := gorm.Open(sqlite.Open("file:"+filepath.Join(dir, "shop.db")+"?_pragma=foreign_keys(1)&_pragma=busy_timeout(5000)"), &gorm.Config{Logger: logger.Discard})
	if err != nil {
		panic(err)
	}
	if err := db.Use(gormcounter.New(gormcounter.Config{})); err != nil {
		panic(err)
	}
	if err := db.AutoMigrate(&Item{}); err != nil {
		panic(err)
	}
	item := Item{}
	db.Create(&item)
	gormcounter.Increment(db.Model(&item), "Stock", 3)

	err = gormcounter.Take(db.Model(&item), "Stock", 5).Error
	fmt.Println(errors.Is(err, hotcounter.ErrInsufficient))
	var short *hotcounter.Shortage
	if errors.As(err, &short) {
		fmt.Println(short.Left, "left,", short.Asked, "asked")
	}
	// Output:
	// true
	// 3 left, 5 asked
}

// A Script is written out in the form the migration tool reads: goose's
// file here, golang-migrate's up and down files with UpSQL and DownSQL.
func ExampleScript_Goose() {
	s := hotcounter.Script{
		Up:   []string{"CREATE TABLE IF NOT EXISTS post_likes_slots (post_id BIGINT NOT NULL, slot INTEGER NOT NULL, value BIGINT NOT NULL DEFAULT 0, PRIMARY KEY (post_id, slot))"},
		Down: []string{"DROP TABLE IF EXISTS post_likes_slots"},
	}
	fmt.Print(s.Goose())
	// Output:
	// -- +goose Up
	// -- +goose StatementBegin
	// CREATE TABLE IF NOT EXISTS post_likes_slots (post_id BIGINT NOT NULL, slot INTEGER NOT NULL, value BIGINT NOT NULL DEFAULT 0, PRIMARY KEY (post_id, slot));
	// -- +goose StatementEnd
	// -- +goose Down
	// -- +goose StatementBegin
	// DROP TABLE IF EXISTS post_likes_slots;
	// -- +goose StatementEnd
}
