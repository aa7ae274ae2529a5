package integration_test

import (
	"context"
	stdsql "database/sql"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"entgo.io/ent/dialect"
	entsql "entgo.io/ent/dialect/sql"
	"gorm.io/gorm"

	"github.com/hotcounter/hotcounter/gormcounter"
	"github.com/hotcounter/hotcounter/integration_test/ent"
)

// recycleEvery is the connections' lifetime in TestCountsStayExactOnRecycledConnections:
// far shorter than the test, so that every writer's session ends many times.
const recycleEvery = 100 * time.Millisecond

// On MySQL/MariaDB the library keeps a session's claim of its own slot row
// (a named lock, GET_LOCK, and the user variable @hc_slot) across that
// session's transactions. Connections recycled every 100 ms
// (SetConnMaxLifetime) while 16 writers increment two posts in
// transactions and outside them lose or double nothing: a claim is checked
// before each use and taken again by a new session. GORM and ent.
func TestCountsStayExactOnRecycledConnections(t *testing.T) {
	parallel(t)
	run := func(t *testing.T, inTx func(id int) error, outside func(id int) error, ids []int, total func(id int) int64) {
		var acked [2]atomic.Int64
		deadline := time.Now().Add(1500 * time.Millisecond)
		hammer(t, 16, 1<<30, func() error {
			if time.Now().After(deadline) {
				return errStop
			}
			i := rand.IntN(2)
			var err error
			if rand.IntN(2) == 0 {
				err, _ = attempt(func() error { return inTx(ids[i]) })
			} else {
				err = outside(ids[i])
			}
			if err == nil {
				acked[i].Add(1)
			}
			return err
		})
		for i, id := range ids {
			if got := total(id); got != acked[i].Load() {
				t.Errorf("post %d: likes %d after %d acknowledged increments on connections recycled every %v", id, got, acked[i].Load(), recycleEvery)
			}
		}
	}
	t.Run("gorm", func(t *testing.T) {
		e := open(t, my, pool(writersPool))
		db := e.db
		sqlDB, err := db.DB()
		must(t, err)
		sqlDB.SetConnMaxLifetime(recycleEvery)
		sqlDB.SetMaxIdleConns(4)
		must(t, db.AutoMigrate(&Post{}))
		posts := []Post{{Title: "a"}, {Title: "b"}}
		must(t, db.Create(&posts).Error)
		run(t,
			func(id int) error {
				return db.Transaction(func(tx *gorm.DB) error {
					return gormcounter.Increment(tx.Model(&Post{ID: uint(id)}), "Likes", 1).Error
				})
			},
			func(id int) error { return gormcounter.Increment(db.Model(&Post{ID: uint(id)}), "Likes", 1).Error },
			[]int{int(posts[0].ID), int(posts[1].ID)},
			func(id int) int64 {
				var p Post
				must(t, db.First(&p, id).Error)
				return p.Likes
			})
	})
	t.Run("ent", func(t *testing.T) {
		e := openEnt(t, my, true, pool(writersPool))
		db, err := stdsql.Open("mysql", e.dsn)
		must(t, err)
		t.Cleanup(func() { db.Close() })
		db.SetMaxOpenConns(e.pool)
		db.SetConnMaxLifetime(recycleEvery)
		db.SetMaxIdleConns(4)
		ctx := context.Background()
		c := ent.NewClient(ent.Driver(entsql.OpenDB(dialect.MySQL, db)))
		a, b := c.Post.Create().SetTitle("a").SaveX(ctx), c.Post.Create().SetTitle("b").SaveX(ctx)
		run(t,
			func(id int) error {
				return inTxRollingBack(ctx, c, false, func(tx *ent.Tx) error { return tx.Post.UpdateOneID(id).AddLikes(1).Exec(ctx) })
			},
			func(id int) error { return c.Post.UpdateOneID(id).AddLikes(1).Exec(ctx) },
			[]int{a.ID, b.ID},
			func(id int) int64 { return c.Post.GetX(ctx, id).Likes })
	})
}
