package integration_test

import (
	"database/sql"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/hotcounter/hotcounter/gormcounter"
)

var errRollBack = errors.New("rolled back by the test")

// Through PgBouncer in transaction pooling mode (more clients than server
// connections, so that transactions of different clients take turns on
// them), with pgx set not to prepare statements by name: increments in and
// out of transactions (rolled back ones leaving nothing), Live loads,
// rollup and compaction passes, counts by triggers and by hooks, Take and
// MoveToSlots are exact, and the library leaves no session state on the
// server connections (no advisory lock held, no temporary table).
func TestGormThroughPgBouncerIsExact(t *testing.T) {
	parallel(t)
	b := pgBouncer(t)
	through, direct := b.database(t)
	db, err := gorm.Open(postgres.Open(through), &gorm.Config{Logger: logger.Discard})
	must(t, err)
	sqlDB, err := db.DB()
	must(t, err)
	sqlDB.SetMaxOpenConns(16)
	t.Cleanup(func() { sqlDB.Close() })
	must(t, db.Use(gormcounter.New(gormcounter.Config{})))
	must(t, db.AutoMigrate(&Author{}, &Post{}, &Comment{}, &Category{}, &Object{}, &Album{}, &Photo{}, &Product{}))

	// Increments: 16 writers, half of them in transactions of their own,
	// a third of those rolled back.
	post := Post{Title: "p"}
	must(t, db.Create(&post).Error)
	var acked atomic.Int64
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 25 {
				var err error
				if w%2 == 0 {
					err = gormcounter.Increment(db.Model(&Post{ID: post.ID}), "Likes", 1).Error
				} else {
					err = db.Transaction(func(tx *gorm.DB) error {
						if err := gormcounter.Increment(tx.Model(&Post{ID: post.ID}), "Likes", 1).Error; err != nil {
							return err
						}
						if err := tx.Model(&Post{ID: post.ID}).UpdateColumn("views", gorm.Expr("views + ?", 2)).Error; err != nil {
							return err
						}
						if i%3 == 0 {
							return errRollBack
						}
						return nil
					})
				}
				switch {
				case err == nil:
					acked.Add(1)
				case !errors.Is(err, errRollBack):
					t.Errorf("an increment through PgBouncer: %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	inTx := acked.Load() - 8*25
	var got Post
	must(t, db.Clauses(gormcounter.Live).First(&got, post.ID).Error)
	if got.Likes != acked.Load() || got.Views != 2*inTx {
		t.Fatalf("after %d acknowledged increments (%d in committed transactions): likes %d, views %d; want %d and %d",
			acked.Load(), inTx, got.Likes, got.Views, acked.Load(), 2*inTx)
	}
	must(t, gormcounter.RollupPass(db, &Post{}))
	must(t, gormcounter.CompactPass(db, &Post{}))
	var cached Post
	must(t, db.First(&cached, post.ID).Error)
	if cached.Likes != acked.Load() || cached.Views != 2*inTx {
		t.Fatalf("after the rollup and compaction passes: likes %d, views %d (cached); want %d and %d", cached.Likes, cached.Views, acked.Load(), 2*inTx)
	}

	// Counts by triggers and by hooks, written by concurrent clients.
	cat, album := Category{Name: "c"}, Album{Name: "a"}
	must(t, db.Create(&cat).Error)
	must(t, db.Create(&album).Error)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 10 {
				o, ph := Object{CategoryID: &cat.ID}, Photo{AlbumID: &album.ID}
				if err := db.Create(&o).Error; err != nil {
					t.Errorf("an object: %v", err)
					return
				}
				if err := db.Create(&ph).Error; err != nil {
					t.Errorf("a photo: %v", err)
					return
				}
				if (w+i)%4 == 0 {
					if err := db.Delete(&o).Error; err != nil {
						t.Errorf("deleting an object: %v", err)
						return
					}
					if err := db.Delete(&ph).Error; err != nil {
						t.Errorf("deleting a photo: %v", err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	var c Category
	var a Album
	must(t, db.Clauses(gormcounter.Live).First(&c, cat.ID).Error)
	must(t, db.First(&a, album.ID).Error)
	objects := rawInt(t, db, "SELECT COUNT(*) FROM objects WHERE category_id = ? AND deleted_at IS NULL", cat.ID)
	photos := rawInt(t, db, "SELECT COUNT(*) FROM photos WHERE album_id = ? AND deleted_at IS NULL", album.ID)
	if c.ObjectCount != objects || a.PhotoCount != photos || objects != 60 {
		t.Fatalf("counts: objects %d (COUNT(*) %d), photos %d (COUNT(*) %d); want both 60", c.ObjectCount, objects, a.PhotoCount, photos)
	}

	// Take: 80 buyers of 1 from a stock of 50.
	prod := Product{Name: "p", Stock: 50}
	must(t, db.Create(&prod).Error)
	var sold, refused atomic.Int64
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 5 {
				err := gormcounter.Take(db.Model(&Product{ID: prod.ID}), "Stock", 1).Error
				switch {
				case err == nil:
					sold.Add(1)
				case errors.Is(err, gormcounter.ErrInsufficient):
					refused.Add(1)
				default:
					t.Errorf("a take through PgBouncer: %v", err)
				}
			}
		}()
	}
	wg.Wait()
	var left Product
	must(t, db.Clauses(gormcounter.Live).First(&left, prod.ID).Error)
	if sold.Load() != 50 || refused.Load() != 30 || left.Stock != 0 {
		t.Fatalf("80 takes of 1 from 50: %d sold, %d refused, %d left; want 50, 30, 0", sold.Load(), refused.Load(), left.Stock)
	}

	// MoveToSlots of a column the table had before its counter.
	ids := oldShows(t, db, i64(1234), i64(0), nil, i64(-5))
	must(t, db.AutoMigrate(&SumShow{}))
	moved, err := gormcounter.MoveToSlots(db, &SumShow{})
	must(t, err)
	if (moved != gormcounter.Moved{Parents: 3, Amount: 1229, Nulls: 1}) {
		t.Fatalf("MoveToSlots: %+v", moved)
	}
	if got := sumLikes(t, db, ids); len(got) != 4 || got[0] != 1234 || got[3] != -5 {
		t.Fatalf("totals after the move: %v", got)
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
