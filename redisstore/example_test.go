package redisstore_test

import (
	"context"

	"github.com/glebarez/sqlite"
	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"

	"github.com/hotcounter/hotcounter"
	"github.com/hotcounter/hotcounter/gormcounter"
	"github.com/hotcounter/hotcounter/redisstore"
)

type Post struct {
	ID    int64
	Likes int64 `gorm:"counter"`
}

// One store serves a gormcounter or an entcounter Buffer alike; every app
// instance that shares the Redis and the prefix shares the increments.
func ExampleNew() {
	db, _ := gorm.Open(sqlite.Open("file::memory:"), &gorm.Config{})
	_ = db.Use(gormcounter.New(gormcounter.Config{}))
	_ = db.AutoMigrate(&Post{})

	rdb := redis.NewUniversalClient(&redis.UniversalOptions{Addrs: []string{"127.0.0.1:6379"}})
	buf, err := gormcounter.NewBuffer(context.Background(), db, hotcounter.BufferConfig{Store: redisstore.New(rdb, redisstore.Options{})})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	defer buf.Close(ctx)
	// Returns once Redis holds the increment; a flush writes it to SQL.
	_ = buf.Increment(ctx, &Post{ID: 1}, "Likes", 1)
}
