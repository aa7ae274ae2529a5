package integration_test

import (
	"testing"

	"github.com/hotcounter/hotcounter/gormcounter"
	"gorm.io/gorm"
)

// The models of adoption: a table "shows" that an application has kept a
// plain likes column on, and the same table seen by code that tags the
// column as a counter in each mode.

// OldShow is the application before hotcounter: a plain column.
type OldShow struct {
	ID    uint
	Title string
	Likes int64
}

func (OldShow) TableName() string { return "shows" }

// OldNotNullShow is the same table with a NOT NULL column and no default.
type OldNotNullShow struct {
	ID    uint
	Title string
	Likes int64 `gorm:"not null"`
}

func (OldNotNullShow) TableName() string { return "shows" }

// SumShow tags the column as a sum counter.
type SumShow struct {
	ID    uint
	Title string
	Likes int64 `gorm:"counter"`
}

func (SumShow) TableName() string { return "shows" }

// RollupShow tags it as a rollup counter.
type RollupShow struct {
	ID    uint
	Title string
	Likes int64 `gorm:"counter:rollup"`
}

func (RollupShow) TableName() string { return "shows" }

// AppendShow tags it as an append counter.
type AppendShow struct {
	ID    uint
	Title string
	Likes int64 `gorm:"counter:append"`
}

func (AppendShow) TableName() string { return "shows" }

// WideShow is the sum counter with 64 slots instead of 16.
type WideShow struct {
	ID    uint
	Title string
	Likes int64 `gorm:"counter:slots=64"`
}

func (WideShow) TableName() string { return "shows" }

func i64(v int64) *int64 { return &v }

// LeftShow is the table once its counter tag is removed again.
type LeftShow struct {
	ID    uint
	Title string
	Likes int64
}

func (LeftShow) TableName() string { return "shows" }

// Story counts claps in append mode: each increment inserts a delta row
// into story_claps_deltas; rollup folds them into stories.claps.
type Story struct {
	ID    uint
	Title string
	Claps int64 `gorm:"counter:append"`
}

// NaivePost is the baseline: a plain column, incremented in place.
type NaivePost struct {
	ID    uint
	Likes int64
}

// WidePost spreads its counter over 64 slots.
type WidePost struct {
	ID    uint
	Likes int64 `gorm:"counter:slots=64"`
}

// SkipPost takes the lowest of its 64 pre-created slots that no one holds.
type SkipPost struct {
	ID    uint
	Likes int64 `gorm:"counter:slots=64,precreate,skiplocked"`
}

// OneSlotPost has a counter of one slot: a single row, like the naive
// column, but written through gormcounter (combined increments).
type OneSlotPost struct {
	ID    uint
	Likes int64 `gorm:"counter:slots=1"`
}

// AutoPost's likes are slots=auto: one slot row per post until its writers
// contend.
type AutoPost struct {
	ID    uint
	Title string
	Likes int64 `gorm:"counter:slots=auto"`
}

// Reel is ent's Reel (ent/schema/reel.go) for GORM: plays are slots=auto,
// in the same reels and reel_plays_slots tables.
type Reel struct {
	ID    uint
	Title string
	Plays int64 `gorm:"counter:slots=auto"`
}

// PlainAutoPost reads the auto_posts table with no counters.
type PlainAutoPost struct {
	ID    uint
	Title string
}

// TableName puts PlainAutoPost on AutoPost's table.
func (PlainAutoPost) TableName() string { return "auto_posts" }

// PlainPost reads the posts table with no counters: the baseline of loads.
type PlainPost struct {
	ID       uint
	Title    string
	Views    int64
	AuthorID *uint
}

func (PlainPost) TableName() string { return "posts" }

// CompactDoc has a string key; CompactUUIDDoc a PostgreSQL uuid key.
type CompactDoc struct {
	ID    string `gorm:"primaryKey;size:64"`
	Reads int64  `gorm:"counter"`
}

type CompactUUIDDoc struct {
	ID    string `gorm:"type:uuid;primaryKey"`
	Reads int64  `gorm:"counter"`
}

// Board has a rollup counter only.
type Board struct {
	ID    uint
	Score int64 `gorm:"counter:rollup"`
}

// NaiveCategory keeps its count the classic way: one column, which a
// row trigger on naive_objects updates in place.
type NaiveCategory struct {
	ID          uint
	ObjectCount int64
}

// NaiveObject is the child of NaiveCategory.
type NaiveObject struct {
	ID              uint
	NaiveCategoryID uint `gorm:"index"`
	Status          string
}

// BenchCategory counts its objects with triggers (one count, as the naive
// trigger keeps one).
type BenchCategory struct {
	ID           uint
	ObjectCount  int64 `gorm:"counter:counts=BenchObjects"`
	BenchObjects []BenchObject
}

// BenchObject is the child of BenchCategory.
type BenchObject struct {
	ID              uint
	BenchCategoryID uint `gorm:"index"`
	Status          string
}

// HookCategory counts its objects with GORM hooks.
type HookCategory struct {
	ID          uint
	ObjectCount int64 `gorm:"counter:counts=HookObjects,hooks"`
	HookObjects []HookObject
}

// HookObject is the child of HookCategory.
type HookObject struct {
	ID             uint
	HookCategoryID uint `gorm:"index"`
	Status         string
}

// BareObject has no count at all: the cost of the insert alone.
type BareObject struct {
	ID         uint
	CategoryID uint `gorm:"index"`
	Status     string
}

// Category counts its objects with triggers: all of them (sum mode), and
// the active ones (rollup mode, with a condition). Soft-deleted objects
// count for neither.
type Category struct {
	ID          uint
	Name        string
	ObjectCount int64 `gorm:"counter:counts=Objects"`
	ActiveCount int64 `gorm:"counter:slots=4,rollup,counts=Objects,where=status = 'active'"`
	Objects     []Object
}

// Object is the child row that categories count.
type Object struct {
	ID         uint
	CategoryID *uint  `gorm:"index"`
	Status     string `gorm:"size:20;default:active"`
	DeletedAt  gorm.DeletedAt
}

// Album counts its photos with GORM hooks instead of triggers.
type Album struct {
	ID         uint
	Name       string
	PhotoCount int64 `gorm:"counter:counts=Photos,hooks"`
	LiveCount  int64 `gorm:"counter:counts=Photos,hooks,where=status = 'active'"`
	Photos     []Photo
}

// Photo is the child row that albums count.
type Photo struct {
	ID        uint
	AlbumID   *uint  `gorm:"index"`
	Status    string `gorm:"size:20;default:active"`
	DeletedAt gorm.DeletedAt
}

func ptr(v uint) *uint { return &v }

// Wide has the most slots a counter may have, in both modes.
type Wide struct {
	ID    uint
	Name  string
	Likes int64 `gorm:"counter:slots=1024"`
	Views int64 `gorm:"counter:slots=1024,rollup"`
}

// Indexed has indexes of every kind GORM creates, so AutoMigrate goes through
// the migrator's BuildIndexOptions.
type Indexed struct {
	ID    uint
	Email string `gorm:"uniqueIndex;size:100"`
	A     string `gorm:"index:idx_ab,priority:1;size:50"`
	B     string `gorm:"index:idx_ab,priority:2;size:50"`
	Score int64  `gorm:"counter:slots=2"`
}

// Before and After map to the same table; After adds a counter.
type Before struct {
	ID    uint
	Title string
}

func (Before) TableName() string { return "articles" }

type After struct {
	ID    uint
	Title string
	Reads int64 `gorm:"counter:slots=4,precreate"`
	Saves int64 `gorm:"counter:rollup"`
}

func (After) TableName() string { return "articles" }

// Renamed is another struct on the articles table: it shares the counts.
type Renamed struct {
	ID    uint
	Reads int64 `gorm:"counter:slots=4"`
}

func (Renamed) TableName() string { return "articles" }

// QualifiedItem lives in another PostgreSQL schema, through a qualified table name.
type QualifiedItem struct {
	ID    uint
	Hits  int64 `gorm:"counter:slots=4"`
	Likes int64 `gorm:"counter:rollup"`
}

func (QualifiedItem) TableName() string { return itemSchema + ".items" }

// Order has a reserved word for a table and for its counter columns.
type Order struct {
	ID     uint
	Group  int64 `gorm:"counter:slots=4"`
	Select int64 `gorm:"counter:rollup"`
}

// Doc has a string primary key.
type Doc struct {
	Key   string `gorm:"primaryKey;size:64"`
	Reads int64  `gorm:"counter"`
	Saves int64  `gorm:"counter:rollup"`
}

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
	return db.AutoMigrate(&Author{}, &Post{}, &Comment{}, &Note{}, &Tag{}, &Story{}, &Shelf{}, &Book{}, &Rack{}, &Item{},
		&UUIDMember{}, &UUIDNote{}, &UUIDPin{})
}

// Hooked records in AfterFind the counter value it was loaded with.
type Hooked struct {
	ID        uint
	Hits      int64 `gorm:"counter:slots=2"`
	SeenInHok int64 `gorm:"-"`
}

func (h *Hooked) AfterFind(*gorm.DB) error {
	h.SeenInHok = h.Hits
	return nil
}

// seed creates n posts with likes i+1 and views 10*(i+1), each with an
// author (followers i+2) and two comments (upvotes i+3).
func seed(t *testing.T, db *gorm.DB, n int) []Post {
	t.Helper()
	must(t, migrateAll(db))
	posts := make([]Post, n)
	for i := range posts {
		author := Author{Name: "author"}
		must(t, db.Create(&author).Error)
		posts[i] = Post{Title: "post", AuthorID: &author.ID}
		must(t, db.Create(&posts[i]).Error)
		p := &posts[i]
		must(t, gormcounter.Increment(db.Model(p), "Likes", int64(i+1)).Error)
		must(t, gormcounter.Increment(db.Model(p), "Views", int64(10*(i+1))).Error)
		must(t, gormcounter.Increment(db.Model(&author), "Followers", int64(i+2)).Error)
		for c := 0; c < 2; c++ {
			cm := Comment{PostID: p.ID, Body: "c"}
			must(t, db.Create(&cm).Error)
			must(t, gormcounter.Increment(db.Model(&cm), "Upvote", int64(i+3)).Error)
		}
	}
	return posts
}

// Debt is an unsigned counter, which a negative total cannot fit.
type Debt struct {
	ID    uint
	Owed  uint32 `gorm:"counter:slots=2"`
	Other string
}

// CodeCat counts, by hooks, things that have a unique natural key.
type CodeCat struct {
	ID     uint
	N      int64       `gorm:"counter:counts=Things,hooks"`
	Things []CodeThing `gorm:"foreignKey:CatID"`
}

type CodeThing struct {
	ID    uint
	CatID *uint  `gorm:"index"`
	Code  string `gorm:"size:20;uniqueIndex"`
}

// LockCat counts, by hooks and with a condition, items that have counters
// of their own.
type LockCat struct {
	ID    uint
	N     int64      `gorm:"counter:counts=Items,hooks,where=kind = 'a'"`
	Items []LockItem `gorm:"foreignKey:CatID"`
}

type LockItem struct {
	ID    uint
	CatID *uint  `gorm:"index"`
	Kind  string `gorm:"size:10"`
	Likes int64  `gorm:"counter"`
}

// ObjectV2 is a later version of Object (Status widened).
type ObjectV2 struct {
	ID         uint
	CategoryID *uint  `gorm:"index"`
	Status     string `gorm:"type:varchar(40);default:active"`
	DeletedAt  gorm.DeletedAt
}

func (ObjectV2) TableName() string { return "objects" }

type QualCat struct {
	ID    uint
	N     int64      `gorm:"counter:counts=Items"`
	H     int64      `gorm:"counter:counts=Items,hooks"`
	Items []QualItem `gorm:"foreignKey:CatID"`
}

func (QualCat) TableName() string { return countSchema + ".qual_cats" }

type QualItem struct {
	ID        uint
	CatID     *uint `gorm:"index"`
	DeletedAt gorm.DeletedAt
}

func (QualItem) TableName() string { return countSchema + ".qual_items" }

// --- a child field without a column ----------------------------------------

type GapCat struct {
	ID    uint
	N     int64     `gorm:"counter:counts=Items"`
	Items []GapItem `gorm:"foreignKey:CatID"`
}

type GapItem struct {
	ID        uint
	CatID     *uint  `gorm:"index"`
	Extra     string `gorm:"->;-:migration"` // filled by a select, no column
	DeletedAt gorm.DeletedAt
}

// Clip counts its plays on slot rows that no other transaction holds.
type Clip struct {
	ID    uint
	Title string
	Plays int64 `gorm:"counter:slots=4,precreate,skiplocked"`
	Saves int64 `gorm:"counter:slots=8,rollup,skiplocked"`
	// Shares has two slots for many writers: most increments find both held.
	Shares int64 `gorm:"counter:slots=2,precreate,skiplocked"`
}

// Tally has two pre-created skip-locked slots. (Name is there because GORM
// inserts one row, not three, for a batch of a model with no column to write.)
type Tally struct {
	ID    uint
	Name  string
	Count int64 `gorm:"counter:slots=2,precreate,skiplocked"`
}

// exact loads a post with exact values of both counters.
func exact(t testing.TB, db *gorm.DB, id uint) Post {
	t.Helper()
	var p Post
	must(t, db.Clauses(gormcounter.Live).First(&p, id).Error)
	return p
}

func newPost(t testing.TB, db *gorm.DB, title string) Post {
	t.Helper()
	p := Post{Title: title}
	must(t, db.Create(&p).Error)
	return p
}

// Guarded pre-creates its slot rows, so that no increment ever inserts one.
type Guarded struct {
	ID    uint
	Likes int64 `gorm:"counter:precreate"`
}

// Stat has nothing GORM writes on create but its key: two counters.
type Stat struct {
	ID    uint
	Hits  int64 `gorm:"counter"`
	Total int64 `gorm:"counter:rollup"`
}

type Slug struct {
	ID   string `gorm:"primaryKey;size:64"`
	Hits int64  `gorm:"counter"`
}

// freshPosts creates n posts whose counters are zero.
func freshPosts(t *testing.T, db *gorm.DB, n int) []Post {
	t.Helper()
	posts := make([]Post, n)
	for i := range posts {
		posts[i].Title = "fresh"
	}
	must(t, db.Create(&posts).Error)
	return posts
}
