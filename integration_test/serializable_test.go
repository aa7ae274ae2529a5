package integration_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/hotcounter/hotcounter"
	"github.com/hotcounter/hotcounter/entcounter"
	"github.com/hotcounter/hotcounter/gormcounter"
	"github.com/hotcounter/hotcounter/integration_test/ent"
	"github.com/hotcounter/hotcounter/integration_test/ent/book"
	entpost "github.com/hotcounter/hotcounter/integration_test/ent/post"
	"github.com/hotcounter/hotcounter/internal/dberr"
)

// serializableDSN is dsn with every transaction SERIALIZABLE, as a role or
// a database set with default_transaction_isolation (and CockroachDB)
// runs them: a startup parameter of the session, nothing changed on the
// server.
func serializableDSN(dsn string) string { return dsn + " default_transaction_isolation=serializable" }

// attempt runs fn as a caller retries a transaction the database aborted
// for a serialization failure or a deadlock: up to 100 times, after a
// pause that grows from 1 ms to 64 ms, half of it random (immediate
// retries of 32 writers on one row abort one another without end). It
// returns fn's last error and how many attempts failed so.
func attempt(fn func() error) (error, int) {
	retried := 0
	for {
		err := fn()
		if err == nil || !dberr.Transient(err) || retried == 100 {
			return err, retried
		}
		pause := time.Millisecond << min(retried, 6)
		time.Sleep(pause/2 + rand.N(pause/2+1))
		retried++
	}
}

// With every transaction SERIALIZABLE (PostgreSQL), counters stay exact
// with 32 writers on one post, combining on and off: increments outside
// transactions (by key, by the ORM's own update, by a condition: the
// library's own statements, retried by it, so no 40001 reaches the caller)
// and in the caller's (which the caller retries when the database aborts
// them with 40001, as SERIALIZABLE asks), counts of child rows written in
// transactions, Take (whose transactions the library owns and retries: no
// serialization failure reaches the buyer), beside rollup and compaction
// passes that loop until the writers are done. Run for GORM and ent.
func TestCountersUnderSerializableStayExact(t *testing.T) {
	parallel(t)
	for _, combining := range []bool{true, false} {
		t.Run(fmt.Sprintf("combining=%v", combining), func(t *testing.T) {
			parallel(t)
			inFlight := 0 // the default: combining on
			if !combining {
				inFlight = -1
			}
			serializableStorms(t, inFlight)
		})
	}
}

// serializableStorms runs a serializableStorm through GORM and through
// ent, with InFlight inFlight.
func serializableStorms(t *testing.T, inFlight int) {
	t.Run("gorm", func(t *testing.T) {
		e := open(t, pg, pool(writersPool))
		db, err := gorm.Open(dialectorFor(pg, serializableDSN(e.dsn)), &gorm.Config{Logger: e.log})
		must(t, err)
		e.limit(t, db)
		must(t, db.Use(gormcounter.New(gormcounter.Config{InFlight: inFlight})))
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
			increment: func(inTx bool, form int) error {
				if !inTx {
					switch form {
					case 0:
						return gormcounter.Increment(db.Model(&Post{ID: post.ID}), "Likes", 1).Error
					case 1:
						return db.Model(&Post{ID: post.ID}).UpdateColumn("likes", gorm.Expr("likes + ?", 1)).Error
					default:
						return gormcounter.Increment(db.Model(&Post{}).Where("id = ?", post.ID), "Views", 1).Error
					}
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
		if _, err := entcounter.Configure(c, entcounter.Config{InFlight: inFlight}); err != nil {
			t.Fatal(err)
		}
		must(t, entMigrate(ctx, c, entcounter.WithCounters(c)))
		post := c.Post.Create().SetTitle("p").SaveX(ctx)
		sh := c.Shelf.Create().SetName("s").SaveX(ctx)
		prod := c.Product.Create().SetStock(50).SaveX(ctx)
		s := serializableStorm{
			increment: func(inTx bool, form int) error {
				if !inTx {
					switch form {
					case 0:
						return c.Post.UpdateOneID(post.ID).AddLikes(1).Exec(ctx)
					case 1:
						return c.Post.Update().Where(entpost.ID(post.ID)).AddLikes(1).Exec(ctx)
					default:
						return c.Post.Update().Where(entpost.ID(post.ID)).AddViews(1).Exec(ctx)
					}
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
	// increment adds a like and, in a transaction, 2 views; outside one,
	// form 0 a like by key, 1 a like by the ORM's own update (GORM's
	// UpdateColumn with an expression, ent's Update().Where), 2 a view by a
	// condition.
	increment func(inTx bool, form int) error
	child     func() error // a counted child, in a transaction
	take      func() error // Take(1) of the product's stock of 50
	passes    func() error
	totals    func() (likes, views, count, children, stock int64)
}

func (s serializableStorm) run(t *testing.T) {
	var likes, views, children, tried, sold, refused, retried atomic.Int64
	var wg sync.WaitGroup
	fail := func(what string, err error) { t.Errorf("%s under SERIALIZABLE: %v", what, err) }
	const writers = 32
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 10 {
				inTx := w%2 == 1
				// Outside a transaction the statement is the library's
				// own: it retries it, and the caller never sees 40001.
				var err error
				n := 0
				form := (w/2 + i) % 3
				if inTx {
					err, n = attempt(func() error { return s.increment(true, 0) })
				} else {
					err = s.increment(false, form)
				}
				retried.Add(int64(n))
				if err != nil {
					what := fmt.Sprintf("an increment of form %d (the library's own statement)", form)
					if inTx {
						what = fmt.Sprintf("an increment in a caller's transaction (retried %d times)", n)
					}
					fail(what, err)
					return
				}
				switch {
				case inTx:
					likes.Add(1)
					views.Add(2)
				case form == 2:
					views.Add(1)
				default:
					likes.Add(1)
				}
				switch i % 4 {
				case 0:
					err, n := attempt(s.child)
					retried.Add(int64(n))
					if err != nil {
						fail(fmt.Sprintf("a counted child in a caller's transaction (retried %d times)", n), err)
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
					case errors.Is(err, hotcounter.ErrInsufficient):
						refused.Add(1)
					default:
						fail("a take", err)
					}
				}
			}
		}()
	}
	// The rollup and compaction passes loop until the writers are done.
	writing := make(chan struct{})
	passes := make(chan int)
	go func() {
		n := 0
		defer func() { passes <- n }()
		for {
			select {
			case <-writing:
				return
			default:
			}
			if err := s.passes(); err != nil {
				fail("the passes", err)
				return
			}
			n++
		}
	}()
	wg.Wait()
	close(writing)
	ran := <-passes
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
	if ran == 0 {
		t.Error("no rollup and compaction pass ran beside the writers")
	}
	t.Logf("%d writers, %d rollup and compaction passes beside them; %d caller transactions retried after a serialization failure",
		writers, ran, retried.Load())
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
