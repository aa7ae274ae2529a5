// Command gormgen shows gormcounter under gorm.io/gen: the typed queries gen
// generates from a model with counter tags write increments to the slots
// and fill counters on load, with nothing added for gen.
//
//	go run ./examples/gormgen                      # embedded SQLite, no server
//	go run ./examples/gormgen -dsn "host=127.0.0.1 user=postgres dbname=test sslmode=disable"
//	go run ./examples/gormgen -dsn "root@tcp(127.0.0.1:3306)/test"   # MySQL/MariaDB
package main

//go:generate go run ./generate

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/glebarez/sqlite"
	"gorm.io/driver/mysql"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/hotcounter/hotcounter/examples/gormgen/model"
	"github.com/hotcounter/hotcounter/examples/gormgen/query"
	"github.com/hotcounter/hotcounter/gormcounter"
)

func main() {
	dsn := flag.String("dsn", "", `PostgreSQL DSN, or MySQL/MariaDB as user@tcp(host:port)/db (default: an SQLite file in a temporary directory)`)
	flag.Parse()
	if err := run(*dsn); err != nil {
		log.Fatal(err)
	}
}

// open opens the database of dsn, or an SQLite file in a temporary
// directory, which done removes.
func open(dsn string) (db *gorm.DB, done func(), err error) {
	cfg := &gorm.Config{Logger: logger.Default.LogMode(logger.Silent)}
	if dsn == "" {
		dir, err := os.MkdirTemp("", "hotcounter-gormgen")
		if err != nil {
			return nil, nil, err
		}
		// Foreign keys on (slot rows cascade with their post), WAL, a busy
		// timeout and immediate transactions: SQLite has one writer at a time.
		path := "file:" + filepath.Join(dir, "gormgen.db") + "?_pragma=foreign_keys(1)&_pragma=journal_mode(WAL)&_pragma=busy_timeout(10000)&_txlock=immediate"
		db, err := gorm.Open(sqlite.Open(path), cfg)
		return db, func() { os.RemoveAll(dir) }, err
	}
	dialector := postgres.Open(dsn)
	if strings.Contains(dsn, "@tcp(") || strings.Contains(dsn, "@unix(") {
		dialector = mysql.Open(dsn)
	}
	db, err = gorm.Open(dialector, cfg)
	if err == nil {
		// A fresh start: drop the example's own tables if an earlier run left them.
		err = db.Exec("DROP TABLE IF EXISTS gormgen_post_likes_slots, gormgen_post_views_slots, gormgen_posts").Error
	}
	return db, func() {}, err
}

func run(dsn string) error {
	db, done, err := open(dsn)
	if err != nil {
		return err
	}
	defer done()
	if err := db.Use(gormcounter.New(gormcounter.Config{})); err != nil {
		return err
	}
	if err := db.AutoMigrate(&model.Post{}); err != nil { // creates the slot tables too
		return err
	}

	q := query.Use(db)
	p := q.Post
	ctx := context.Background()
	post := &model.Post{Title: "hello"}
	if err := p.WithContext(ctx).Create(post); err != nil {
		return err
	}

	// Increments through gen's typed API: each goes to a slot row, not the
	// posts row.
	const writers, each = 8, 100
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				if _, err := p.WithContext(ctx).Where(p.ID.Eq(post.ID)).UpdateSimple(p.Likes.Add(1), p.Views.Add(2)); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}

	got, err := p.WithContext(ctx).Where(p.ID.Eq(post.ID)).First()
	if err != nil {
		return err
	}
	fmt.Printf("after %d increments of each through gen: likes %d, views %d (the cached column, before a rollup pass)\n", writers*each, got.Likes, got.Views)
	live, err := p.WithContext(ctx).Clauses(gormcounter.Live).Where(p.ID.Eq(post.ID)).First()
	if err != nil {
		return err
	}
	fmt.Printf("read live (Clauses(gormcounter.Live)): views %d\n", live.Views)
	if err := gormcounter.RollupPass(db, &model.Post{}); err != nil {
		return err
	}
	got, err = p.WithContext(ctx).Where(p.ID.Eq(post.ID)).First()
	if err != nil {
		return err
	}
	fmt.Printf("after a rollup pass: views %d\n", got.Views)
	top, err := p.WithContext(ctx).Where(p.Likes.Gt(10)).Order(p.Likes.Desc()).Find()
	if err != nil {
		return err
	}
	fmt.Printf("posts with more than 10 likes, most liked first: %d\n", len(top))
	if _, err := p.WithContext(ctx).Where(p.ID.Eq(post.ID)).UpdateSimple(p.Likes.Value(0)); err != nil {
		return err
	}
	got, err = p.WithContext(ctx).Where(p.ID.Eq(post.ID)).First()
	if err != nil {
		return err
	}
	fmt.Printf("after UpdateSimple(p.Likes.Value(0)): likes %d\n", got.Likes)
	return nil
}
