// Command quickstart shows gormcounter end to end: declare counters with a
// tag, migrate, increment from many goroutines, load, read live, roll up.
//
//	go run ./examples/quickstart                      # embedded SQLite, no server
//	go run ./examples/quickstart -dsn "host=127.0.0.1 user=postgres dbname=test sslmode=disable"
//	go run ./examples/quickstart -dsn "root@tcp(127.0.0.1:3306)/test"   # MySQL/MariaDB
package main

import (
	"errors"
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

	"github.com/hotcounter/hotcounter/gormcounter"
)

// Post has two counters. Likes: 16 slots, sum mode (no column on posts; every
// load sums the slots). Views: 64 slots, rollup mode (posts.views caches the
// total; a rollup pass folds the slots into it).
type Post struct {
	ID    uint
	Title string
	Likes int64 `gorm:"counter"`
	Views int64 `gorm:"counter:slots=64,rollup"`
}

// TableName keeps the example to tables of its own, so that -dsn can point
// at any database: quickstart_posts, quickstart_post_likes_slots,
// quickstart_post_views_slots.
func (Post) TableName() string { return "quickstart_posts" }

func main() {
	dsn := flag.String("dsn", "", `PostgreSQL DSN, or MySQL/MariaDB as user@tcp(host:port)/db (default: an SQLite file in a temporary directory)`)
	writers := flag.Int("writers", 8, "concurrent writers")
	each := flag.Int("each", 250, "likes per writer")
	flag.Parse()
	if err := run(*dsn, *writers, *each); err != nil {
		log.Fatal(err)
	}
}

func open(dsn string) (*gorm.DB, string, error) {
	cfg := &gorm.Config{Logger: logger.Default.LogMode(logger.Silent)}
	if dsn == "" {
		dir, err := os.MkdirTemp("", "hotcounter-quickstart")
		if err != nil {
			return nil, "", err
		}
		path := filepath.Join(dir, "quickstart.db")
		// Foreign keys on (slot rows cascade with their post), WAL, and a busy
		// timeout with immediate transactions: SQLite has one writer at a time.
		db, err := gorm.Open(sqlite.Open("file:"+path+"?_pragma=foreign_keys(1)&_pragma=journal_mode(WAL)&_pragma=busy_timeout(10000)&_txlock=immediate"), cfg)
		return db, "SQLite " + path, err
	}
	dialector, where := postgres.Open(dsn), "PostgreSQL"
	if strings.Contains(dsn, "@tcp(") || strings.Contains(dsn, "@unix(") {
		dialector, where = mysql.Open(dsn), "MySQL/MariaDB"
	}
	db, err := gorm.Open(dialector, cfg)
	if err == nil {
		// A fresh start: drop the example's own tables if an earlier run left them.
		err = db.Exec("DROP TABLE IF EXISTS quickstart_post_likes_slots, quickstart_post_views_slots, quickstart_posts").Error
	}
	return db, where, err
}

func run(dsn string, writers, each int) error {
	db, where, err := open(dsn)
	if err != nil {
		return err
	}
	if err := db.Use(gormcounter.New(gormcounter.Config{})); err != nil {
		return err
	}
	if err := db.AutoMigrate(&Post{}); err != nil {
		return err
	}
	fmt.Printf("database: %s\nmigrated: quickstart_posts, quickstart_post_likes_slots, quickstart_post_views_slots\n\n", where)

	post := Post{Title: "hello, counters"}
	if err := db.Create(&post).Error; err != nil {
		return err
	}

	// Many writers on one post: each increment upserts a random slot row and
	// never touches the posts row.
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				if err := gormcounter.Increment(db.Model(&post), "Likes", 1).Error; err != nil {
					errs <- err
					return
				}
				if err := gormcounter.Increment(db.Model(&post), "Views", 2).Error; err != nil {
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
	// The familiar GORM form goes the same way.
	if err := db.Model(&post).UpdateColumn("likes", gorm.Expr("likes + ?", 5)).Error; err != nil {
		return err
	}
	total := writers * each
	fmt.Printf("%d writers x %d: %d likes and %d views acknowledged, plus 5 likes\n", writers, each, total, 2*total)

	likeSlots := func() (rows, sum int64, err error) {
		err = db.Raw("SELECT COUNT(*), SUM(n) FROM quickstart_post_likes_slots WHERE quickstart_post_id = ? AND n <> 0", post.ID).Row().Scan(&rows, &sum)
		return rows, sum, err
	}
	slotRows, slotSum, err := likeSlots()
	if err != nil {
		return err
	}
	fmt.Printf("quickstart_post_likes_slots: %d rows for this post hold values, summing to %d\n", slotRows, slotSum)
	if strings.HasPrefix(where, "MySQL") {
		// InnoDB: an inserted slot row takes gap locks and a shared lock on
		// the post (its foreign key check), so all 16 rows exist from the start.
		fmt.Println("(MySQL/MariaDB: the 16 slot rows were created with the post; increments only update them)")
	}
	fmt.Println()

	var loaded Post
	if err := db.First(&loaded, post.ID).Error; err != nil {
		return err
	}
	fmt.Printf("db.First:                       likes=%d (exact)  views=%d (cached column, not rolled up yet)\n", loaded.Likes, loaded.Views)
	if err := db.Clauses(gormcounter.Live).First(&loaded, post.ID).Error; err != nil {
		return err
	}
	fmt.Printf("db.Clauses(gormcounter.Live):   likes=%d          views=%d (column + pending slots)\n", loaded.Likes, loaded.Views)
	if err := gormcounter.RollupPass(db, &Post{}); err != nil {
		return err
	}
	if err := db.First(&loaded, post.ID).Error; err != nil {
		return err
	}
	fmt.Printf("after gormcounter.RollupPass:   likes=%d          views=%d (cached column, now folded)\n", loaded.Likes, loaded.Views)
	switch done, err := gormcounter.CompactPass(db, &Post{}); {
	case errors.Is(err, errors.ErrUnsupported):
		// MySQL/MariaDB: refused, and nothing changed. Their sum slots are
		// pre-created, and a load adds up only the rows holding a value.
		fmt.Printf("gormcounter.CompactPass:        not offered on %s, nothing changed:\n  %v\n\n", where, err)
	case err != nil:
		return err
	default:
		if slotRows, slotSum, err = likeSlots(); err != nil {
			return err
		}
		fmt.Printf("after gormcounter.CompactPass:  %d likes slot row holds them all (%d; %d rows removed)\n\n", slotRows, slotSum, done.Removed)
	}

	// Save never overwrites a counter (it would erase concurrent
	// increments); an explicit assignment sets the total, as ent's SetLikes.
	loaded.Title, loaded.Likes = "renamed", 0
	if err := db.Save(&loaded).Error; err != nil {
		return err
	}
	if err := db.First(&loaded, post.ID).Error; err != nil {
		return err
	}
	fmt.Printf("Save with Likes=0 leaves the counter alone:  likes=%d\n", loaded.Likes)
	if loaded.Likes != int64(total+5) || loaded.Views != int64(2*total) {
		return fmt.Errorf("lost updates: likes %d (want %d), views %d (want %d)", loaded.Likes, total+5, loaded.Views, 2*total)
	}
	// A correction: the total becomes 10,000, whatever it was.
	if err := db.Model(&loaded).Update("likes", 10000).Error; err != nil {
		return err
	}
	if err := db.First(&loaded, post.ID).Error; err != nil {
		return err
	}
	fmt.Printf("Update(\"likes\", 10000) sets the total:     likes=%d\n", loaded.Likes)
	if loaded.Likes != 10000 {
		return fmt.Errorf("Update(likes, 10000) left likes=%d", loaded.Likes)
	}
	fmt.Println(strings.Repeat("-", 60))
	fmt.Printf("final: %q likes=%d views=%d: no increment lost before the correction\n", loaded.Title, loaded.Likes, loaded.Views)
	return nil
}
