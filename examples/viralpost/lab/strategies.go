package lab

import (
	"context"
	"fmt"
	"reflect"

	"gorm.io/gorm"

	"github.com/hotcounter/hotcounter/gormcounter"
)

// NaivePost keeps its likes in one column, incremented in place: the
// incident.
type NaivePost struct {
	ID        uint
	Title     string
	LikeCount int64
}

// TableName keeps the lab's tables apart from an application's.
func (NaivePost) TableName() string { return "viral_naive_posts" }

// Slots16Post spreads its likes over 16 slot rows (the default).
type Slots16Post struct {
	ID    uint
	Title string
	Likes int64 `gorm:"counter"`
}

// TableName keeps the lab's tables apart from an application's.
func (Slots16Post) TableName() string { return "viral_s16_posts" }

// Slots64Post spreads its likes over 64 slot rows.
type Slots64Post struct {
	ID    uint
	Title string
	Likes int64 `gorm:"counter:slots=64"`
}

// TableName keeps the lab's tables apart from an application's.
func (Slots64Post) TableName() string { return "viral_s64_posts" }

// SkipLocked64Post takes the lowest of its 64 pre-created slot rows that no
// other transaction holds: with fewer concurrent writers than slots (the pool
// has 20), a like never waits for a slot lock.
type SkipLocked64Post struct {
	ID    uint
	Title string
	Likes int64 `gorm:"counter:slots=64,precreate,skiplocked"`
}

// TableName keeps the lab's tables apart from an application's.
func (SkipLocked64Post) TableName() string { return "viral_skl64_posts" }

// AppendPost inserts one delta row per like (append mode): no two likes
// share a row at all. Its total is read live (column + pending deltas): the
// lab runs no rollup.
type AppendPost struct {
	ID    uint
	Title string
	Likes int64 `gorm:"counter:append"`
}

// TableName keeps the lab's tables apart from an application's.
func (AppendPost) TableName() string { return "viral_append_posts" }

// RedisPost's likes go through the write-behind buffer with the Redis
// store: a like returns once Redis has it, and a flush writes them every
// second. Loads read SQL plus what Redis holds (buf.Live()).
type RedisPost struct {
	ID    uint
	Title string
	Likes int64 `gorm:"counter"`
}

// TableName keeps the lab's tables apart from an application's.
func (RedisPost) TableName() string { return "viral_redis_posts" }

// User is what the unrelated endpoint reads: a plain table the likes never
// touch, read through the same pool.
type User struct {
	ID   uint
	Name string
}

// TableName keeps the lab's tables apart from an application's.
func (User) TableName() string { return "viral_users" }

// Strategy is one way of counting likes that the lab puts under load.
type Strategy struct {
	// Name is what -strategies selects and the report prints.
	Name string
	// What says in a few words what one like does.
	What string
	// model is the post model; its tables are dropped and migrated before the run.
	model any
	// like records one like of the post.
	like func(db *gorm.DB, id uint) error
	// count reads the post's likes.
	count func(db *gorm.DB, id uint) (int64, error)
	// redis: like and count go through a write-behind buffer in Redis,
	// which runStrategy opens on the pool (like and count are then unset).
	redis bool
}

// oneRow fails a like that matched no post, so that it is never acknowledged.
func oneRow(tx *gorm.DB) error {
	if tx.Error == nil && tx.RowsAffected == 0 {
		return fmt.Errorf("no post updated")
	}
	return tx.Error
}

// likes loads a post with gormcounter's fill and returns its Likes.
func likes[P any](get func(*P) int64) func(db *gorm.DB, id uint) (int64, error) {
	return func(db *gorm.DB, id uint) (int64, error) {
		var p P
		err := db.First(&p, id).Error
		return get(&p), err
	}
}

// sharded is a gormcounter strategy on model P.
func sharded[P any](name, what string, get func(*P) int64) Strategy {
	return Strategy{
		Name: name, What: what, model: new(P),
		like: func(db *gorm.DB, id uint) error {
			post := new(P) // as an application has it: Increment(db.Model(&post), ...)
			reflect.ValueOf(post).Elem().FieldByName("ID").SetUint(uint64(id))
			return oneRow(gormcounter.Increment(db.Model(post), "Likes", 1))
		},
		count: likes(get),
	}
}

// appendOnly is the append-mode strategy: like sharded, but the total is
// read live, since nothing folds the deltas during the run.
func appendOnly() Strategy {
	s := sharded("append", "gormcounter.Increment, append mode (a delta row per like)", func(p *AppendPost) int64 { return p.Likes })
	s.count = func(db *gorm.DB, id uint) (int64, error) {
		var p AppendPost
		err := db.Clauses(gormcounter.Live).First(&p, id).Error
		return p.Likes, err
	}
	return s
}

// Strategies returns every strategy the lab knows, in the order it runs them.
func Strategies() []Strategy {
	return []Strategy{
		{
			Name: "naive", What: "UPDATE posts SET like_count = like_count + 1 through GORM (its default transaction)",
			model: &NaivePost{},
			like: func(db *gorm.DB, id uint) error {
				return oneRow(db.Model(&NaivePost{ID: id}).UpdateColumn("like_count", gorm.Expr("like_count + ?", 1)))
			},
			count: func(db *gorm.DB, id uint) (int64, error) {
				var p NaivePost
				err := db.First(&p, id).Error
				return p.LikeCount, err
			},
		},
		sharded("slots16", "gormcounter.Increment, 16 slots (random-slot upsert)", func(p *Slots16Post) int64 { return p.Likes }),
		sharded("slots64", "gormcounter.Increment, 64 slots (random-slot upsert)", func(p *Slots64Post) int64 { return p.Likes }),
		sharded("skiplocked64", "gormcounter.Increment, 64 pre-created slots, skiplocked (a slot no one holds)", func(p *SkipLocked64Post) int64 { return p.Likes }),
		appendOnly(),
		{Name: "redis", What: "write-behind buffer in Redis (Config.Redis): a like returns once Redis has it, flushed every second", model: &RedisPost{}, redis: true},
	}
}

// prepare drops and recreates the strategy's tables and creates the viral
// post, so every run starts from nothing.
func (s Strategy) prepare(ctx context.Context, db *gorm.DB) (uint, error) {
	db = db.WithContext(ctx)
	if err := db.Migrator().DropTable(s.model); err != nil {
		return 0, fmt.Errorf("%s: drop tables: %w", s.Name, err)
	}
	if err := db.AutoMigrate(s.model); err != nil {
		return 0, fmt.Errorf("%s: migrate: %w", s.Name, err)
	}
	post := reflect.New(reflect.TypeOf(s.model).Elem())
	post.Elem().FieldByName("Title").SetString("a celebrity's post")
	if err := db.Create(post.Interface()).Error; err != nil {
		return 0, fmt.Errorf("%s: create the post: %w", s.Name, err)
	}
	id := uint(post.Elem().FieldByName("ID").Uint())
	return id, nil
}
