package gormcounter_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/glebarez/sqlite"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/hotcounter/hotcounter"
	"github.com/hotcounter/hotcounter/gormcounter"
)

type Post struct {
	ID    uint
	Title string
	Likes int64 `gorm:"counter"`
	Views int64 `gorm:"counter:slots=64,rollup"`
}

// openExample opens a fresh SQLite database with the plugin registered and
// the Post model migrated.
func openExample() (*gorm.DB, func()) {
	dir, err := os.MkdirTemp("", "gormcounter-example")
	if err != nil {
		panic(err)
	}
	dsn := "file:" + filepath.Join(dir, "example.db") + "?_pragma=foreign_keys(1)&_pragma=busy_timeout(5000)"
	db, err := gorm.Open(sqlite.Open(dsn), &gorm.Config{Logger: logger.Discard})
	if err != nil {
		panic(err)
	}
	if err := db.Use(gormcounter.New(gormcounter.Config{})); err != nil {
		panic(err)
	}
	if err := db.AutoMigrate(&Post{}); err != nil {
		panic(err)
	}
	return db, func() { os.RemoveAll(dir) }
}

func Example() {
	db, done := openExample()
	defer done()

	post := Post{Title: "hello"}
	db.Create(&post)
	for i := 0; i < 3; i++ {
		gormcounter.Increment(db.Model(&post), "Likes", 1)
	}
	db.Model(&post).UpdateColumn("views", gorm.Expr("views + ?", 10))

	var loaded Post
	db.First(&loaded, post.ID)
	fmt.Println("likes:", loaded.Likes, "views (cached):", loaded.Views)

	db.Clauses(gormcounter.Live).First(&loaded, post.ID)
	fmt.Println("views (live):", loaded.Views)
	// Output:
	// likes: 3 views (cached): 0
	// views (live): 10
}

func ExampleIncrement() {
	db, done := openExample()
	defer done()

	posts := []Post{{Title: "a"}, {Title: "b"}, {Title: "c"}}
	db.Create(&posts)

	res := gormcounter.Increment(db.Model(&Post{}).Where("title IN ?", []string{"a", "c"}), "Likes", 5)
	fmt.Println("error:", res.Error, "rows:", res.RowsAffected)

	res = gormcounter.Increment(db.Model(&Post{}), "Likes", 1)
	fmt.Println("without a condition:", res.Error)
	// Output:
	// error: <nil> rows: 2
	// without a condition: gormcounter: write Post.Likes: WHERE conditions required: name the rows (db.Model(&post) with its key set, or Where), or allow it for every row with db.Session(&gorm.Session{AllowGlobalUpdate: true})
}

func ExampleRollupPass() {
	db, done := openExample()
	defer done()

	post := Post{Title: "hello"}
	db.Create(&post)
	gormcounter.Increment(db.Model(&post), "Views", 7)

	if err := gormcounter.RollupPass(db, &Post{}); err != nil {
		fmt.Println(err)
	}
	var top []Post // the rollup column sorts like any column
	db.Order("views DESC").Find(&top)
	fmt.Println(top[0].Title, top[0].Views)
	// Output: hello 7
}

func ExampleCompactPass() {
	db, done := openExample()
	defer done()

	post := Post{Title: "hello"}
	db.Create(&post)
	for range 100 { // 100 likes land on random slots: most of the 16 rows
		gormcounter.Increment(db.Model(&post), "Likes", 1)
	}

	var before, after int64
	db.Raw("SELECT COUNT(*) FROM post_likes_slots WHERE post_id = ?", post.ID).Scan(&before)
	compacted, err := gormcounter.CompactPass(db, &Post{})
	if err != nil {
		fmt.Println(err)
	}
	db.Raw("SELECT COUNT(*) FROM post_likes_slots WHERE post_id = ?", post.ID).Scan(&after)
	db.First(&post, post.ID)
	fmt.Println(post.Likes, "likes in", after, "slot row")
	fmt.Println(compacted.Parents, "post gathered, every other row removed:", compacted.Removed == before-1)
	// Output:
	// 100 likes in 1 slot row
	// 1 post gathered, every other row removed: true
}

func ExampleLive() {
	db, done := openExample()
	defer done()

	post := Post{Title: "hello"}
	db.Create(&post)
	gormcounter.Increment(db.Model(&post), "Views", 2)

	var cached, live Post
	db.First(&cached, post.ID)
	db.Clauses(gormcounter.Live).First(&live, post.ID)
	fmt.Println(cached.Views, live.Views)
	// Output: 0 2
}

// A Category counts its objects: all of them, and the active ones. Triggers
// that AutoMigrate installs keep both, whatever writes the objects table.
type Category struct {
	ID          uint
	Name        string
	ObjectCount int64 `gorm:"counter:counts=Objects"`
	ActiveCount int64 `gorm:"counter:counts=Objects,where=status = 'active'"`
	Objects     []Object
}

type Object struct {
	ID         uint
	CategoryID uint
	Status     string
}

func ExampleRecount() {
	db, done := openExample()
	defer done()
	if err := db.AutoMigrate(&Category{}, &Object{}); err != nil {
		panic(err)
	}

	books, toys := Category{Name: "books"}, Category{Name: "toys"}
	db.Create(&books)
	db.Create(&toys)
	db.Create(&[]Object{{CategoryID: books.ID, Status: "active"}, {CategoryID: books.ID, Status: "draft"}})
	db.Exec("INSERT INTO objects (category_id, status) VALUES (?, 'active')", toys.ID) // raw SQL counts too
	db.Model(&Object{}).Where("status = ?", "draft").Update("category_id", toys.ID)    // a move

	var cs []Category
	db.Order("id").Find(&cs)
	for _, c := range cs {
		fmt.Println(c.Name, c.ObjectCount, c.ActiveCount)
	}

	// Recount repairs counts that drifted behind the counter's back.
	db.Exec("DELETE FROM category_object_count_slots")
	fixed, err := gormcounter.Recount(db.Model(&Category{}), "ObjectCount")
	fmt.Println("corrected:", fixed, err)
	// Output:
	// books 1 1
	// toys 2 1
	// corrected: 2 <nil>
}

// Concurrent increments of one post, outside a transaction: those that
// arrive while Config.InFlight statements for the post are running share
// the next statement. Every call returns after its increment committed, so
// the total is exact however the calls were grouped.
func ExampleConfig_inFlight() {
	db, done := openExample()
	defer done()

	post := Post{Title: "viral"}
	db.Create(&post)
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				if err := gormcounter.Increment(db.Model(&post), "Likes", 1).Error; err != nil {
					panic(err)
				}
			}
		}()
	}
	wg.Wait()

	var loaded Post
	db.First(&loaded, post.ID)
	fmt.Println("likes:", loaded.Likes)
	// Output: likes: 400
}

// OldPost is the posts table as an application had it before hotcounter:
// a plain likes column.
type OldPost struct {
	ID    uint
	Title string
	Likes int64
}

func (OldPost) TableName() string { return "posts" }

func ExampleMoveToSlots() {
	db, done := openExample()
	defer done()
	db.Migrator().DropTable(&Post{})
	db.AutoMigrate(&OldPost{}) // the table before hotcounter
	old := OldPost{Title: "popular", Likes: 1234}
	db.Create(&old)

	db.AutoMigrate(&Post{}) // Likes is now `gorm:"counter"`: the column stays
	gormcounter.Increment(db.Model(&Post{ID: old.ID}), "Likes", 1)
	var p Post
	db.First(&p, old.ID)
	fmt.Println("likes:", p.Likes)

	moved, err := gormcounter.MoveToSlots(db, &Post{})
	fmt.Println("moved:", moved.Parents, "posts,", moved.Amount, "likes; error:", err)
	db.First(&p, old.ID)
	fmt.Println("likes:", p.Likes)
	// Output:
	// likes: 1235
	// moved: 1 posts, 1234 likes; error: <nil>
	// likes: 1235
}

// A guarded counter: stock that never goes below zero. Take takes in full
// or fails with hotcounter.ErrInsufficient, a hotcounter.Shortage that says how short; a restock
// is an Increment.
func ExampleTake() {
	type Item struct {
		ID    uint
		Stock int64 `gorm:"counter:guarded"`
	}
	db, done := openExample()
	defer done()
	if err := db.AutoMigrate(&Item{}); err != nil {
		panic(err)
	}
	item := Item{}
	db.Create(&item)
	gormcounter.Increment(db.Model(&item), "Stock", 3)
	fmt.Println(gormcounter.Take(db.Model(&item), "Stock", 2).Error)
	err := gormcounter.Take(db.Model(&item), "Stock", 2).Error
	fmt.Println(errors.Is(err, hotcounter.ErrInsufficient))
	var short *hotcounter.Shortage
	if errors.As(err, &short) {
		fmt.Println(short.Left, "left,", short.Asked, "asked")
	}
	db.First(&item, item.ID)
	fmt.Println(item.Stock)
	// Output:
	// <nil>
	// true
	// 1 left, 2 asked
	// 1
}

// Comment's upvotes are slots=auto: one slot row per comment until its
// writers contend, then up to 16.
type Comment struct {
	ID      uint
	Body    string
	Upvotes int64 `gorm:"counter:slots=auto,max=16"`
}

// A slots=auto counter keeps a comment that is upvoted one at a time on one
// slot row, so that loads of it sum one row.
func Example_slotsAuto() {
	db, done := openExample()
	defer done()
	if err := db.AutoMigrate(&Comment{}); err != nil {
		panic(err)
	}
	comment := Comment{Body: "first"}
	db.Create(&comment)
	for i := 0; i < 5; i++ {
		gormcounter.Increment(db.Model(&comment), "Upvotes", 1)
	}
	var loaded Comment
	db.First(&loaded, comment.ID)
	var rows int64
	db.Raw("SELECT COUNT(*) FROM comment_upvotes_slots WHERE comment_id = ?", comment.ID).Scan(&rows)
	fmt.Println("upvotes:", loaded.Upvotes, "slot rows:", rows)
	// Output: upvotes: 5 slot rows: 1
}

// SchemaSQL writes the library's part of the schema as a migration file
// holds it, without sending anything: here as a goose file, for a database
// migrated by files instead of AutoMigrate.
func ExampleSchemaSQL() {
	db, done := openExample()
	defer done()

	script, err := gormcounter.SchemaSQL(db, &Post{})
	if err != nil {
		panic(err)
	}
	for _, st := range script.Up {
		fmt.Println(st)
	}
	fmt.Println("--")
	fmt.Println(script.DownSQL())
	// Output:
	// CREATE TABLE IF NOT EXISTS "post_likes_slots" ("post_id" integer NOT NULL, "slot" INTEGER NOT NULL, "n" BIGINT NOT NULL DEFAULT 0, PRIMARY KEY ("post_id", "slot"), FOREIGN KEY ("post_id") REFERENCES "posts" ("id") ON DELETE CASCADE)
	// CREATE TABLE IF NOT EXISTS "post_views_slots" ("post_id" integer NOT NULL, "slot" INTEGER NOT NULL, "n" BIGINT NOT NULL DEFAULT 0, PRIMARY KEY ("post_id", "slot"), FOREIGN KEY ("post_id") REFERENCES "posts" ("id") ON DELETE CASCADE)
	// --
	// DROP TABLE IF EXISTS "post_views_slots";
	// DROP TABLE IF EXISTS "post_likes_slots";
}
