package integration_test

import (
	"context"
	stdsql "database/sql"
	"testing"

	"github.com/google/uuid"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/hotcounter/hotcounter/entcounter"
	"github.com/hotcounter/hotcounter/gormcounter"
	"github.com/hotcounter/hotcounter/integration_test/ent"
	"github.com/hotcounter/hotcounter/integration_test/entprivacy"
)

// poolWriters is how many goroutines the pool benchmarks write from.
const poolWriters = 16

// BenchmarkDefaultPool: 16 writers increment one row on PostgreSQL
// through a database/sql pool as sql.Open leaves it (no limit on open
// connections, 2 idle) and through one of 40 connections, all kept idle:
// GORM, ent, and ent on a schema with a query interceptor and a privacy policy
// (entprivacy's Post: ent's documented soft-delete mixin), whose adds read
// the row's visibility before they write. ns/op is wall time per increment;
// compare each default with its pool40.
func BenchmarkDefaultPool(b *testing.B) {
	// GORM's Post, ent's and entprivacy's share a table name: a database each.
	dsn, entDSN, plainDSN := benchDSN(b, pg), benchDSN(b, pg), benchDSN(b, pg)
	pools := []struct {
		name string
		set  func(*stdsql.DB)
	}{
		{"default", func(*stdsql.DB) {}},
		{"pool40", func(db *stdsql.DB) { db.SetMaxOpenConns(40); db.SetMaxIdleConns(40) }},
	}
	ctx := context.Background()
	for _, p := range pools {
		b.Run("gorm/"+p.name, func(b *testing.B) {
			db, err := gorm.Open(dialectorFor(pg, dsn), &gorm.Config{Logger: logger.Discard})
			if err != nil {
				b.Fatal(err)
			}
			sqlDB, _ := db.DB()
			p.set(sqlDB)
			b.Cleanup(func() { sqlDB.Close() })
			if err := db.Use(gormcounter.New(gormcounter.Config{})); err != nil {
				b.Fatal(err)
			}
			if err := db.AutoMigrate(&Author{}, &Post{}); err != nil {
				b.Fatal(err)
			}
			post := Post{Title: "viral"}
			if err := db.Create(&post).Error; err != nil {
				b.Fatal(err)
			}
			writersLoopN(b, poolWriters, func() error {
				return gormcounter.Increment(db.Model(&Post{ID: post.ID}), "Likes", 1).Error
			})
		})
		b.Run("ent/"+p.name, func(b *testing.B) {
			sqlDB, err := stdsql.Open("pgx", plainDSN)
			if err != nil {
				b.Fatal(err)
			}
			p.set(sqlDB)
			b.Cleanup(func() { sqlDB.Close() })
			client := ent.NewClient(ent.Driver(entDriverSending(pg, sqlDB, func(string) {})))
			if err := entMigrate(ctx, client, entcounter.WithCounters(client)); err != nil {
				b.Fatal(err)
			}
			post, err := client.Post.Create().SetTitle("viral").Save(ctx)
			if err != nil {
				b.Fatal(err)
			}
			writersLoopN(b, poolWriters, func() error { return client.Post.UpdateOneID(post.ID).AddLikes(1).Exec(ctx) })
		})
		b.Run("ent-intercepted/"+p.name, func(b *testing.B) {
			sqlDB, err := stdsql.Open("pgx", entDSN)
			if err != nil {
				b.Fatal(err)
			}
			p.set(sqlDB)
			b.Cleanup(func() { sqlDB.Close() })
			client := entprivacy.NewClient(entprivacy.Driver(entDriverSending(pg, sqlDB, func(string) {})))
			if err := oneMigrationAtATime(func() error { return client.Schema.Create(ctx, entcounter.WithCounters(client)) }); err != nil {
				b.Fatal(err)
			}
			post, err := client.Post.Create().SetTitle(uuid.NewString()).Save(ctx) // b.N grows over runs: a post each
			if err != nil {
				b.Fatal(err)
			}
			before := sqlDB.Stats().MaxIdleClosed
			writersLoopN(b, poolWriters, func() error { return client.Post.UpdateOneID(post.ID).AddLikes(1).Exec(ctx) })
			b.ReportMetric(float64(sqlDB.Stats().MaxIdleClosed-before)/float64(b.N), "closed/op")
		})
	}
}
