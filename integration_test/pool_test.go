package integration_test

import (
	"context"
	stdsql "database/sql"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/hotcounter/hotcounter/entcounter"
	"github.com/hotcounter/hotcounter/gormcounter"
	"github.com/hotcounter/hotcounter/integration_test/entprivacy"
)

// poolFront is an ORM's add of one like to one post, outside a
// transaction and inside one, on a pool the test sizes.
type poolFront struct {
	add   func(ctx context.Context) error
	addTx func(ctx context.Context) error
	likes func(t *testing.T) int64
	pool  *stdsql.DB
}

// TestCounterWritesNeedAtMostOneConnectionMoreThanTheOperation: an add
// outside a transaction needs one connection (16 writers on one row share
// a pool of 1), and an add inside a transaction needs none but the
// transaction's (one writer's transactions on a pool of 2, the second
// connection to spare): nothing waits forever, every add counts. GORM, and
// ent on a schema whose adds read the row through a query interceptor and
// a privacy policy (entprivacy's Post).
func TestCounterWritesNeedAtMostOneConnectionMoreThanTheOperation(t *testing.T) {
	parallel(t)
	fronts := map[string]func(t *testing.T, e *env) poolFront{
		"gorm": func(t *testing.T, e *env) poolFront {
			must(t, e.db.AutoMigrate(&Author{}, &Post{}))
			p := newPost(t, e.db, "pool")
			db := sharedGorm(t, e, gormcounter.Config{})
			pool, err := db.DB()
			must(t, err)
			return poolFront{
				add: func(ctx context.Context) error {
					return gormcounter.Increment(db.WithContext(ctx).Model(&Post{ID: p.ID}), "Likes", 1).Error
				},
				addTx: func(ctx context.Context) error {
					return db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
						return gormcounter.Increment(tx.Model(&Post{ID: p.ID}), "Likes", 1).Error
					})
				},
				likes: func(t *testing.T) int64 {
					var got Post
					must(t, e.db.First(&got, p.ID).Error)
					return got.Likes
				},
				pool: pool,
			}
		},
		"ent": func(t *testing.T, e *env) poolFront {
			ctx := context.Background()
			pool := openPool(t, e, 4)
			client := entprivacy.NewClient(entprivacy.Driver(entDriverSending(e.kind, pool, func(string) {})))
			must(t, oneMigrationAtATime(func() error { return client.Schema.Create(ctx, entcounter.WithCounters(client)) }))
			p := client.Post.Create().SetTitle("pool").SaveX(ctx)
			return poolFront{
				add: func(ctx context.Context) error { return client.Post.UpdateOneID(p.ID).AddLikes(1).Exec(ctx) },
				addTx: func(ctx context.Context) error {
					tx, err := client.Tx(ctx)
					if err != nil {
						return err
					}
					if err := tx.Post.UpdateOneID(p.ID).AddLikes(1).Exec(ctx); err != nil {
						_ = tx.Rollback()
						return err
					}
					return tx.Commit()
				},
				likes: func(t *testing.T) int64 { return client.Post.GetX(context.Background(), p.ID).Likes },
				pool:  pool,
			}
		},
	}
	for _, orm := range []string{"gorm", "ent"} {
		t.Run(orm, func(t *testing.T) {
			eachDB(t, func(t *testing.T, e *env) {
				f := fronts[orm](t, e)
				// Nothing may wait forever: a bound far above what the adds take.
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				defer cancel()
				f.pool.SetMaxOpenConns(1)
				const writers, each = 16, 10
				done := hammer(t, writers, each, func() error { return f.add(ctx) })
				f.pool.SetMaxOpenConns(2)
				for range each {
					must(t, f.addTx(ctx))
				}
				f.pool.SetMaxOpenConns(4)
				if got := f.likes(t); done != writers*each || got != done+each {
					t.Fatalf("likes %d after %d adds outside transactions and %d inside", got, done, each)
				}
			}, on(pg, my))
		})
	}
}
