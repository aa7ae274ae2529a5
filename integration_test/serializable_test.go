package integration_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"gorm.io/gorm"

	"github.com/hotcounter/hotcounter/entcounter"
	"github.com/hotcounter/hotcounter/gormcounter"
	"github.com/hotcounter/hotcounter/integration_test/ent"
	"github.com/hotcounter/hotcounter/integration_test/ent/book"
	"github.com/hotcounter/hotcounter/internal/dberr"
)

// serializableDSN is dsn with every transaction SERIALIZABLE, as a role or
// a database set with default_transaction_isolation (and CockroachDB)
// runs them: a startup parameter of the session, nothing changed on the
// server.
func serializableDSN(dsn string) string { return dsn + " default_transaction_isolation=serializable" }

// attempt runs fn as a caller retries a transaction the database aborted
// for a serialization failure or a deadlock: up to 100 times. It returns
// fn's last error and how many attempts failed so.
func attempt(fn func() error) (error, int) {
	retried := 0
	for {
		err := fn()
		if err == nil || !dberr.Transient(err) || retried == 100 {
			return err, retried
		}
		retried++
	}
}

// With every transaction SERIALIZABLE (PostgreSQL), counters stay exact:
// increments outside transactions (the library's own statements, retried
// by it: no 40001 reaches the caller) and in the caller's (which the
// caller retries when the database aborts them with 40001, as SERIALIZABLE
// asks),
// counts of child rows written in transactions, Take (whose transactions
// the library owns and retries: no serialization failure reaches the
// buyer), and the rollup and compaction passes. Run for GORM and ent.
func TestCountersUnderSerializableStayExact(t *testing.T) {
	parallel(t)
	t.Run("gorm", func(t *testing.T) {
		e := open(t, pg, pool(writersPool))
		db, err := gorm.Open(dialectorFor(pg, serializableDSN(e.dsn)), &gorm.Config{Logger: e.log})
		must(t, err)
		e.limit(t, db)
		must(t, db.Use(gormcounter.New(gormcounter.Config{})))
		var level string
		must(t, db.Raw("SHOW default_transaction_isolation").Row().Scan(&level))
		if level != "serializable" {
			t.Fatalf("default_transaction_isolation is %q", level)
		}
		must(t, db.AutoMigrate(&Author{}, &Post{}, &Comment{}, &Category{}, &Object{}, &Product{}))
		post, cat, prod := Post{Title: "p"}, Category{Name: "c"}, Product{Name: "p", Stock: 50}
		must(t, db.Create(&post).Error)
		must(t, db.Create(&cat).Error)
		must(t, db.Create(&prod).Error)
		s := serializableStorm{
			increment: func(inTx bool) error {
				if !inTx {
					return gormcounter.Increment(db.Model(&Post{ID: post.ID}), "Likes", 1).Error
				}
				return db.Transaction(func(tx *gorm.DB) error {
					if err := gormcounter.Increment(tx.Model(&Post{ID: post.ID}), "Likes", 1).Error; err != nil {
						return err
					}
					return tx.Model(&Post{ID: post.ID}).UpdateColumn("views", gorm.Expr("views + ?", 2)).Error
				})
			},
			child: func() error {
				return db.Transaction(func(tx *gorm.DB) error { return tx.Create(&Object{CategoryID: &cat.ID}).Error })
			},
			take: func() error { return gormcounter.Take(db.Model(&Product{ID: prod.ID}), "Stock", 1).Error },
			passes: func() error {
				if err := gormcounter.RollupPass(db, &Post{}, &Category{}); err != nil {
					return err
				}
				return errOf(gormcounter.CompactPass(db, &Post{}))
			},
			totals: func() (likes, views, count, children, stock int64) {
				var p Post
				var c Category
				var pr Product
				must(t, db.Clauses(gormcounter.Live).First(&p, post.ID).Error)
				must(t, db.First(&c, cat.ID).Error)
				must(t, db.Clauses(gormcounter.Live).First(&pr, prod.ID).Error)
				return p.Likes, p.Views, c.ObjectCount, rawInt(t, db, "SELECT COUNT(*) FROM objects WHERE category_id = ?", cat.ID), pr.Stock
			},
		}
		s.run(t)
	})
	t.Run("ent", func(t *testing.T) {
		e := open(t, pg, pool(writersPool))
		se := *e
		se.dsn = serializableDSN(e.dsn)
		ee := &entEnv{env: &se}
		c := reopenEnt(t, ee)
		ctx := context.Background()
		must(t, entMigrate(ctx, c, entcounter.WithCounters(c)))
		post := c.Post.Create().SetTitle("p").SaveX(ctx)
		sh := c.Shelf.Create().SetName("s").SaveX(ctx)
		prod := c.Product.Create().SetStock(50).SaveX(ctx)
		s := serializableStorm{
			increment: func(inTx bool) error {
				if !inTx {
					return c.Post.UpdateOneID(post.ID).AddLikes(1).Exec(ctx)
				}
				return inTxRollingBack(ctx, c, false, func(tx *ent.Tx) error {
					return tx.Post.UpdateOneID(post.ID).AddLikes(1).AddViews(2).Exec(ctx)
				})
			},
			child: func() error {
				return inTxRollingBack(ctx, c, false, func(tx *ent.Tx) error { return tx.Book.Create().SetShelfID(sh.ID).Exec(ctx) })
			},
			take: func() error { return entcounter.Take(ctx, c, "Product", "stock", prod.ID, 1) },
			passes: func() error {
				if err := entcounter.RollupPass(ctx, c); err != nil {
					return err
				}
				return errOf(entcounter.CompactPass(ctx, c))
			},
			totals: func() (likes, views, count, children, stock int64) {
				p := c.Post.GetX(ctx, post.ID)
				return p.Likes, p.Views, c.Shelf.GetX(ctx, sh.ID).BookCount,
					int64(c.Book.Query().Where(book.ShelfIDEQ(sh.ID)).CountX(ctx)), c.Product.GetX(ctx, prod.ID).Stock
			},
		}
		s.run(t)
	})
}

// serializableStorm is one ORM's part of TestCountersUnderSerializableStayExact.
type serializableStorm struct {
	increment func(inTx bool) error // a like (and, in a transaction, 2 views)
	child     func() error          // a counted child, in a transaction
	take      func() error          // Take(1) of the product's stock of 50
	passes    func() error
	totals    func() (likes, views, count, children, stock int64)
}

func (s serializableStorm) run(t *testing.T) {
	var likes, views, children, tried, sold, refused, retried atomic.Int64
	var wg sync.WaitGroup
	fail := func(what string, err error) { t.Errorf("%s under SERIALIZABLE: %v", what, err) }
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 10 {
				inTx := w%2 == 1
				// Outside a transaction the statement is the library's
				// own: it retries it, and the caller never sees 40001.
				var err error
				n := 0
				if inTx {
					err, n = attempt(func() error { return s.increment(true) })
				} else {
					err = s.increment(false)
				}
				retried.Add(int64(n))
				if err != nil {
					fail("an increment", err)
					return
				}
				likes.Add(1)
				if inTx {
					views.Add(2)
				}
				switch i % 4 {
				case 0:
					err, n := attempt(s.child)
					retried.Add(int64(n))
					if err != nil {
						fail("a counted child", err)
						return
					}
					children.Add(1)
				case 1:
					// Take owns its transactions: a serialization failure
					// must not reach the buyer.
					tried.Add(1)
					switch err := s.take(); {
					case err == nil:
						sold.Add(1)
					case errors.Is(err, gormcounter.ErrInsufficient):
						refused.Add(1)
					default:
						fail("a take", err)
					}
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range 5 {
			if err := s.passes(); err != nil {
				fail("the passes", err)
				return
			}
		}
	}()
	wg.Wait()
	must(t, s.passes())
	gotLikes, gotViews, count, rows, stock := s.totals()
	if gotLikes != likes.Load() || gotViews != views.Load() {
		t.Errorf("likes %d, views %d; the acknowledged increments were %d and %d", gotLikes, gotViews, likes.Load(), views.Load())
	}
	if count != rows || rows != children.Load() {
		t.Errorf("the count is %d; COUNT(*) %d, children acknowledged %d", count, rows, children.Load())
	}
	if sold.Load()+stock != 50 || sold.Load()+refused.Load() != tried.Load() {
		t.Errorf("%d takes: %d sold, %d refused, %d left, from 50", tried.Load(), sold.Load(), refused.Load(), stock)
	}
	t.Log(fmt.Sprintf("%d caller transactions retried after a serialization failure", retried.Load()))
}

// TestAnExprIncrementInGormsDefaultTransactionIsNotAbortedUnderSerializable:
// with every transaction SERIALIZABLE, 32 writers x 20
// UpdateColumn("likes", gorm.Expr("likes + ?", 1)) on one post, through
// GORM's default transaction (no SkipDefaultTransaction), all succeed and
// count exactly: for an update that writes one counter and nothing else
// GORM opens no transaction, and the increment is written as Increment
// writes it, its serialization failures retried by the library. Before,
// some failed with 40001. A model with update hooks keeps the increment in the transaction
// with them (TestIncrementIsInTheCallersTransaction covers the caller's).
func TestAnExprIncrementInGormsDefaultTransactionIsNotAbortedUnderSerializable(t *testing.T) {
	parallel(t)
	e := open(t, pg, pool(writersPool))
	db, err := gorm.Open(dialectorFor(pg, serializableDSN(e.dsn)), &gorm.Config{Logger: e.log})
	must(t, err)
	e.limit(t, db)
	must(t, db.Use(gormcounter.New(gormcounter.Config{})))
	must(t, db.AutoMigrate(&Author{}, &Post{}))
	post := Post{Title: "p"}
	must(t, db.Create(&post).Error)
	const writers, rounds = 32, 20
	var failed atomic.Int64
	var first atomic.Value
	var wg sync.WaitGroup
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				if err := db.Model(&Post{ID: post.ID}).UpdateColumn("likes", gorm.Expr("likes + ?", 1)).Error; err != nil {
					failed.Add(1)
					first.CompareAndSwap(nil, err)
				}
			}
		}()
	}
	wg.Wait()
	var got Post
	must(t, db.First(&got, post.ID).Error)
	if failed.Load() != 0 || got.Likes != writers*rounds-failed.Load() {
		t.Fatalf("%d of %d increments failed (first: %v); likes %d", failed.Load(), writers*rounds, first.Load(), got.Likes)
	}
}
