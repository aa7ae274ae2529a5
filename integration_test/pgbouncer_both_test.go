package integration_test

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"entgo.io/ent/dialect"
	entsql "entgo.io/ent/dialect/sql"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/hotcounter/hotcounter"
	"github.com/hotcounter/hotcounter/entcounter"
	"github.com/hotcounter/hotcounter/gormcounter"
	"github.com/hotcounter/hotcounter/integration_test/ent"
	"github.com/hotcounter/hotcounter/integration_test/ent/book"
	"github.com/hotcounter/hotcounter/integration_test/ent/item"
)

var errRollBack = errors.New("rolled back by the test")

// Through PgBouncer in transaction pooling mode (more clients than server
// connections, so that transactions of different clients take turns on
// them), with pgx set not to prepare statements by name: increments in and
// out of transactions (rolled back ones leaving nothing), loads, the
// rollup and compaction passes, counts by triggers and by hooks, Take and
// (GORM) MoveToSlots are exact, and the library leaves no session state on
// the server connections (no advisory lock held, no temporary table). Run
// for GORM and ent.
func TestThroughPgBouncerCountersAreExact(t *testing.T) {
	parallel(t)
	b := pgBouncer(t)
	t.Run("gorm", func(t *testing.T) {
		through, direct := b.database(t)
		db, err := gorm.Open(postgres.Open(through), &gorm.Config{Logger: logger.Discard})
		must(t, err)
		sqlDB, err := db.DB()
		must(t, err)
		sqlDB.SetMaxOpenConns(16)
		t.Cleanup(func() { sqlDB.Close() })
		must(t, db.Use(gormcounter.New(gormcounter.Config{})))
		must(t, db.AutoMigrate(&Author{}, &Post{}, &Comment{}, &Category{}, &Object{}, &Album{}, &Photo{}, &Product{}))
		post, cat, album, prod := Post{Title: "p"}, Category{Name: "c"}, Album{Name: "a"}, Product{Name: "p", Stock: 50}
		for _, row := range []any{&post, &cat, &album, &prod} {
			must(t, db.Create(row).Error)
		}
		bouncedFront{
			increment: func(inTx, rollBack bool) error {
				if !inTx {
					return gormcounter.Increment(db.Model(&Post{ID: post.ID}), "Likes", 1).Error
				}
				return db.Transaction(func(tx *gorm.DB) error {
					if err := gormcounter.Increment(tx.Model(&Post{ID: post.ID}), "Likes", 1).Error; err != nil {
						return err
					}
					if err := tx.Model(&Post{ID: post.ID}).UpdateColumn("views", gorm.Expr("views + ?", 2)).Error; err != nil {
						return err
					}
					if rollBack {
						return errRollBack
					}
					return nil
				})
			},
			children: func(remove bool) error {
				o, ph := Object{CategoryID: &cat.ID}, Photo{AlbumID: &album.ID}
				if err := errors.Join(db.Create(&o).Error, db.Create(&ph).Error); err != nil || !remove {
					return err
				}
				return errors.Join(db.Delete(&o).Error, db.Delete(&ph).Error)
			},
			take: func() error { return gormcounter.Take(db.Model(&Product{ID: prod.ID}), "Stock", 1).Error },
			passes: func() error {
				return errors.Join(gormcounter.RollupPass(db, &Post{}), errOf(gormcounter.CompactPass(db, &Post{})))
			},
			totals: func() (tt bouncedTotals) {
				var p, cached Post
				var c Category
				var a Album
				var pr Product
				must(t, db.Clauses(gormcounter.Live).First(&p, post.ID).Error)
				must(t, db.First(&cached, post.ID).Error)
				must(t, db.First(&c, cat.ID).Error)
				must(t, db.First(&a, album.ID).Error)
				must(t, db.Clauses(gormcounter.Live).First(&pr, prod.ID).Error)
				return bouncedTotals{likes: p.Likes, views: p.Views, cachedViews: cached.Views,
					triggers: c.ObjectCount, triggerRows: rawInt(t, db, "SELECT COUNT(*) FROM objects WHERE category_id = ? AND deleted_at IS NULL", cat.ID),
					hooks: a.PhotoCount, hookRows: rawInt(t, db, "SELECT COUNT(*) FROM photos WHERE album_id = ? AND deleted_at IS NULL", album.ID),
					stock: pr.Stock}
			},
			more: func(t *testing.T) {
				ids := oldShows(t, db, i64(1234), i64(0), nil, i64(-5))
				must(t, db.AutoMigrate(&SumShow{}))
				moved, err := gormcounter.MoveToSlots(db, &SumShow{})
				must(t, err)
				if (moved != hotcounter.Moved{Parents: 3, Amount: 1229, Nulls: 1}) {
					t.Fatalf("MoveToSlots: %+v", moved)
				}
				if got := sumLikes(t, db, ids); len(got) != 4 || got[0] != 1234 || got[3] != -5 {
					t.Fatalf("totals after the move: %v", got)
				}
			},
		}.run(t, direct)
	})
	t.Run("ent", func(t *testing.T) {
		through, direct := b.database(t)
		db, err := sql.Open("pgx", through)
		must(t, err)
		db.SetMaxOpenConns(16)
		t.Cleanup(func() { db.Close() })
		c := ent.NewClient(ent.Driver(entsql.OpenDB(dialect.Postgres, db)))
		ctx := context.Background()
		must(t, entMigrate(ctx, c, entcounter.WithCounters(c)))
		post, s, r := c.Post.Create().SetTitle("p").SaveX(ctx), c.Shelf.Create().SetName("s").SaveX(ctx), c.Rack.Create().SetName("r").SaveX(ctx)
		prod := c.Product.Create().SetStock(50).SaveX(ctx)
		bouncedFront{
			increment: func(inTx, rollBack bool) error {
				if !inTx {
					return c.Post.UpdateOneID(post.ID).AddLikes(1).Exec(ctx)
				}
				return inTxRollingBack(ctx, c, rollBack, func(tx *ent.Tx) error {
					return tx.Post.UpdateOneID(post.ID).AddLikes(1).AddViews(2).Exec(ctx)
				})
			},
			children: func(remove bool) error {
				bk, err := c.Book.Create().SetShelfID(s.ID).Save(ctx)
				if err != nil {
					return err
				}
				var it *ent.Item
				if err := inTxRollingBack(ctx, c, false, func(tx *ent.Tx) (err error) {
					it, err = tx.Item.Create().SetRackID(r.ID).Save(ctx)
					return err
				}); err != nil || !remove {
					return err
				}
				return errors.Join(c.Book.DeleteOneID(bk.ID).Exec(ctx),
					inTxRollingBack(ctx, c, false, func(tx *ent.Tx) error { return tx.Item.DeleteOneID(it.ID).Exec(ctx) }))
			},
			take:   func() error { return entcounter.Take(ctx, c, "Product", "stock", prod.ID, 1) },
			passes: func() error { return errors.Join(entcounter.RollupPass(ctx, c), errOf(entcounter.CompactPass(ctx, c))) },
			totals: func() bouncedTotals {
				p := c.Post.GetX(ctx, post.ID)
				return bouncedTotals{likes: p.Likes, views: p.Views, cachedViews: p.Views,
					triggers: c.Shelf.GetX(ctx, s.ID).BookCount, triggerRows: int64(c.Book.Query().Where(book.ShelfIDEQ(s.ID)).CountX(ctx)),
					hooks: c.Rack.GetX(ctx, r.ID).ItemCount, hookRows: int64(c.Item.Query().Where(item.RackIDEQ(r.ID)).CountX(ctx)),
					stock: c.Product.GetX(ctx, prod.ID).Stock}
			},
		}.run(t, direct)
	})
}

// bouncedFront is one ORM's part of TestThroughPgBouncerCountersAreExact:
// a post's likes (sum) and views (rollup), a count kept by triggers and
// one kept by hooks, and a product's stock of 50 (guarded).
type bouncedFront struct {
	increment func(inTx, rollBack bool) error // a like; in a transaction also 2 views
	children  func(remove bool) error         // a child of each count, removed again if asked
	take      func() error
	passes    func() error
	totals    func() bouncedTotals
	more      func(t *testing.T) // what only this ORM has, if anything
}

type bouncedTotals struct {
	likes, views, cachedViews              int64
	triggers, triggerRows, hooks, hookRows int64
	stock                                  int64
}

func (f bouncedFront) run(t *testing.T, direct string) {
	// 16 clients: half increment outside transactions, half in
	// transactions of their own, a third of those rolled back.
	var acked, committed atomic.Int64
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 12 {
				inTx, rollBack := w%2 == 1, w%2 == 1 && i%3 == 0
				switch err := f.increment(inTx, rollBack); {
				case err == nil:
					acked.Add(1)
					if inTx {
						committed.Add(1)
					}
				case !errors.Is(err, errRollBack):
					t.Errorf("an increment through PgBouncer: %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	must(t, f.passes())
	if got := f.totals(); got.likes != acked.Load() || got.views != 2*committed.Load() || got.cachedViews != got.views {
		t.Fatalf("after %d acknowledged increments (%d in committed transactions) and the passes: likes %d, views %d (cached %d)",
			acked.Load(), committed.Load(), got.likes, got.views, got.cachedViews)
	}

	// 8 clients add 80 children to each count and remove 20 again.
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 10 {
				if err := f.children((w+i)%4 == 0); err != nil {
					t.Errorf("a counted child through PgBouncer: %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if got := f.totals(); got.triggers != got.triggerRows || got.hooks != got.hookRows || got.triggerRows != 60 || got.hookRows != 60 {
		t.Fatalf("counts: by triggers %d (COUNT(*) %d), by hooks %d (COUNT(*) %d); want all 60", got.triggers, got.triggerRows, got.hooks, got.hookRows)
	}

	// 80 takes of 1 from a stock of 50.
	var sold, refused atomic.Int64
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 5 {
				switch err := f.take(); {
				case err == nil:
					sold.Add(1)
				case errors.Is(err, hotcounter.ErrInsufficient):
					refused.Add(1)
				default:
					t.Errorf("a take through PgBouncer: %v", err)
				}
			}
		}()
	}
	wg.Wait()
	if left := f.totals().stock; sold.Load() != 50 || refused.Load() != 30 || left != 0 {
		t.Fatalf("80 takes of 1 from 50: %d sold, %d refused, %d left; want 50, 30, 0", sold.Load(), refused.Load(), left)
	}
	if f.more != nil {
		f.more(t)
	}
	expectNoSessionState(t, direct)
}

// expectNoSessionState checks, on the server itself, that no connection to
// the database of the DSN holds an advisory lock outside a transaction and
// that no temporary table exists there: what a transaction pool would hand
// to the next client.
func expectNoSessionState(t *testing.T, direct string) {
	t.Helper()
	srv, err := sql.Open("pgx", direct)
	must(t, err)
	defer srv.Close()
	var locks, temps int
	must(t, srv.QueryRow(`SELECT COUNT(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
		WHERE l.locktype = 'advisory' AND a.datname = current_database() AND a.pid <> pg_backend_pid()`).Scan(&locks))
	must(t, srv.QueryRow(`SELECT COUNT(*) FROM pg_class WHERE relpersistence = 't'`).Scan(&temps))
	if locks != 0 || temps != 0 {
		t.Errorf("left on the server connections: %d advisory locks, %d temporary tables; want none", locks, temps)
	}
}

// inTxRollingBack runs fn in a transaction of c, committed unless
// rollBack (then the error is errRollBack).
func inTxRollingBack(ctx context.Context, c *ent.Client, rollBack bool, fn func(tx *ent.Tx) error) error {
	tx, err := c.Tx(ctx)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	if rollBack {
		if err := tx.Rollback(); err != nil {
			return err
		}
		return errRollBack
	}
	return tx.Commit()
}
