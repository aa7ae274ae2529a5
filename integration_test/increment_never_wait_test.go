package integration_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"

	"github.com/hotcounter/hotcounter/gormcounter"
	"github.com/hotcounter/hotcounter/integration_test/ent"
	"github.com/hotcounter/hotcounter/internal/testdb"
	"gorm.io/gorm"
)

// Skip-locked increments inside open transactions never wait (PostgreSQL):
// three times as many transactions as Clip.Plays has slots (4, pre-created)
// and Clip.Saves (8, rollup, none pre-created) each increment one clip and
// stay open, on sessions where a lock wait fails (noWaitTimeout). Once every
// slot row is held, each next increment inserts a row of its own.
func TestSkipLockedIncrementsNeverWait(t *testing.T) {
	parallel(t)
	e := open(t, pg, pool(writersPool))
	db := e.db
	must(t, db.AutoMigrate(&Clip{}))
	clip := Clip{Title: "x"}
	must(t, db.Create(&clip).Error)
	const open = 24
	txs := make([]*gorm.DB, open)
	for i := range txs {
		txs[i] = db.Session(&gorm.Session{NewDB: true}).Begin()
		must(t, txs[i].Error)
		defer txs[i].Rollback()
		must(t, noWaitSession(txs[i]))
	}
	for _, field := range []string{"Plays", "Saves"} {
		for i, tx := range txs {
			if err := gormcounter.Increment(tx.Model(&Clip{ID: clip.ID}), field, 1).Error; err != nil {
				t.Fatalf("%s: increment in transaction %d, with %d transactions holding slot rows: %v; want no wait", field, i, i, err)
			}
		}
	}
	for _, tx := range txs {
		must(t, tx.Commit().Error)
	}
	var got Clip
	must(t, db.Clauses(gormcounter.Live).First(&got, clip.ID).Error)
	if got.Plays != open || got.Saves != open {
		t.Fatalf("plays=%d saves=%d, want %d each", got.Plays, got.Saves, open)
	}
}

// Transactions that increment two posts in opposite orders (32 writers,
// 16 random slots declared) never deadlock and lose nothing: inside a
// transaction an increment writes its session's own slot row, which no
// other transaction writes, so it never waits for another transaction and
// no cycle can form through counters. GORM and ent, on PostgreSQL and
// MariaDB.
func TestIncrementsInTransactionsInOppositeOrdersNeverDeadlock(t *testing.T) {
	eachORM(t, func(t *testing.T, o counterORM) {
		posts := []int64{o.create(t, modelPost), o.create(t, modelPost)}
		var deadlocks atomic.Int64
		writers, each := writersFor(o.kind())
		done := hammer(t, writers, each, func() error {
			first, second := posts[0], posts[1]
			if rand.IntN(2) == 0 {
				first, second = second, first
			}
			err := o.inTx(func(tx counterORM) error {
				for _, id := range []int64{first, second} {
					if err := tx.increment(modelPost, id, "likes", 1); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil && isDeadlock(err) {
				deadlocks.Add(1)
			}
			return err
		})
		if n := deadlocks.Load(); n != 0 {
			t.Fatalf("%d deadlocks", n)
		}
		for _, id := range posts {
			if got := exactly(t, o, modelPost, id, "likes"); got != done {
				t.Fatalf("post %d: likes=%d after %d acknowledged transactions", id, got, done)
			}
		}
	}, on(pg, my), pool(writersPool))
}

// Plainly declared counters (16 random slots) never wait inside open
// transactions on PostgreSQL, GORM and ent: 24 transactions add a like to
// one post each and stay open, on sessions where a lock wait fails after
// noWaitTimeout.
func TestIncrementsInTransactionsNeverWait(t *testing.T) {
	parallel(t)
	heldTransactions(t, pg)
}

// heldTransactions opens 24 transactions on the database of kind that add
// a like to one post each and stay open, on sessions where a lock wait
// fails (noWaitSession), through GORM and through ent.
func heldTransactions(t *testing.T, kind dbKind) {
	const held = 24
	t.Run("gorm", func(t *testing.T) {
		e := open(t, kind, pool(writersPool))
		db := e.db
		must(t, db.AutoMigrate(&Post{}))
		post := Post{Title: "x"}
		must(t, db.Create(&post).Error)
		txs := make([]*gorm.DB, held)
		for i := range txs {
			txs[i] = db.Session(&gorm.Session{NewDB: true}).Begin()
			must(t, txs[i].Error)
			defer txs[i].Rollback()
			must(t, noWaitSession(txs[i]))
			if err := gormcounter.Increment(txs[i].Model(&Post{ID: post.ID}), "Likes", 1).Error; err != nil {
				t.Fatalf("increment in transaction %d, with %d transactions holding slot rows: %v; want no wait", i, i, err)
			}
		}
		for _, tx := range txs {
			must(t, tx.Commit().Error)
		}
		var got Post
		must(t, db.First(&got, post.ID).Error)
		if got.Likes != held {
			t.Fatalf("likes=%d, want %d", got.Likes, held)
		}
	})
	t.Run("ent", func(t *testing.T) {
		e := openEnt(t, kind, true, pool(writersPool))
		ctx := context.Background()
		c := e.client
		p := c.Post.Create().SetTitle("x").SaveX(ctx)
		txs := make([]*ent.Tx, held)
		for i := range txs {
			tx, err := c.Tx(ctx)
			must(t, err)
			defer tx.Rollback()
			must(t, tx.HotCounter().Driver.Exec(ctx, noWaitSQL(e.db.Dialector.Name()), []any{}, nil))
			if err := tx.Post.UpdateOneID(p.ID).AddLikes(1).Exec(ctx); err != nil {
				t.Fatalf("increment in transaction %d, with %d transactions holding slot rows: %v; want no wait", i, i, err)
			}
			txs[i] = tx
		}
		for _, tx := range txs {
			must(t, tx.Commit())
		}
		if got := c.Post.GetX(ctx, p.ID); got.Likes != held {
			t.Fatalf("likes=%d, want %d", got.Likes, held)
		}
	})
}

// Skip-locked increments never wait while another transaction holds every
// slot row (PostgreSQL): one transaction locks all 64 pre-created slot rows
// of a skip-locked post; then eight transactions, each open while it
// opens the next, add a like each on sessions where a lock wait fails
// after noWaitTimeout: each inserts a row of its own. Both ORMs.
func TestSkipLockedIncrementsNeverWaitWhileEverySlotRowIsHeld(t *testing.T) {
	eachORM(t, func(t *testing.T, o counterORM) {
		id := o.create(t, modelSkipPost)
		holder := o.db().Begin()
		must(t, holder.Error)
		defer holder.Rollback()
		if n := rawInt(t, holder, "SELECT COUNT(*) FROM (SELECT 1 FROM skip_post_likes_slots WHERE skip_post_id = ? FOR UPDATE) held", id); n != 64 {
			t.Fatalf("holding %d slot rows, want 64", n)
		}
		noWait := o.through(t, testdb.WithParams(o.onEnv().dsn, map[string]string{"lock_timeout": noWaitTimeout}), settings{})
		const open = 8
		var nest func(i int) error
		nest = func(i int) error {
			if i == open {
				return nil
			}
			return noWait.inTx(func(tx counterORM) error {
				if err := tx.increment(modelSkipPost, id, "likes", 1); err != nil {
					return fmt.Errorf("increment in transaction %d, with every pre-created slot row held and %d transactions open: %w; want no wait", i, i, err)
				}
				return nest(i + 1)
			})
		}
		must(t, nest(0))
		must(t, holder.Rollback().Error)
		got, err := o.exact(modelSkipPost, id, "likes")
		must(t, err)
		if got != open {
			t.Fatalf("likes=%d, want %d", got, open)
		}
	}, on(pg))
}

// Increments that name their post by a condition (one statement over the
// rows a WHERE selects, in a transaction of hotcounter's own) beside
// increments in callers' transactions never deadlock, and every one is
// counted: 32 writers on one post's views (rollup, 64 slots, none
// pre-created, so first writes insert slot rows) and likes, a quarter by
// a condition alone, the rest in a transaction that adds to both. On MariaDB a
// transaction of hotcounter's own runs at READ COMMITTED: at REPEATABLE
// READ the UPDATE that finds no slot row locks the gap where the row
// would go, and two writers that each hold the gap the other inserts into
// deadlock, in their own transactions and in the callers'. GORM and ent,
// every database.
func TestIncrementsByConditionBesideTransactionsNeverDeadlock(t *testing.T) {
	eachORM(t, func(t *testing.T, o counterORM) {
		id := o.create(t, modelPost)
		var deadlocks atomic.Int64
		var byCondition, inTransactions atomic.Int64
		writers, each := writersFor(o.kind())
		hammer(t, writers, each, func() error {
			var err error
			if rand.IntN(4) == 0 {
				if _, err = o.incrementMany(modelPost, []int64{id}, "views", 1); err == nil {
					byCondition.Add(1)
				}
			} else {
				err = o.inTx(func(tx counterORM) error {
					if _, err := tx.incrementMany(modelPost, []int64{id}, "likes", 1); err != nil {
						return err
					}
					_, err := tx.incrementMany(modelPost, []int64{id}, "views", 1)
					return err
				})
				if err == nil {
					inTransactions.Add(1)
				}
			}
			if err != nil && isDeadlock(err) {
				deadlocks.Add(1)
			}
			return err
		})
		if n := deadlocks.Load(); n != 0 {
			t.Fatalf("%d deadlocks", n)
		}
		likes, views := exactly(t, o, modelPost, id, "likes"), exactly(t, o, modelPost, id, "views")
		if likes != inTransactions.Load() || views != byCondition.Load()+inTransactions.Load() {
			t.Fatalf("likes=%d views=%d after %d increments by a condition and %d transactions", likes, views, byCondition.Load(), inTransactions.Load())
		}
	}, pool(writersPool))
}
