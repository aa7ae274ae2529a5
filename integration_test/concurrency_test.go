package integration_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/hotcounter/hotcounter/gormcounter"
)

// hammer runs writers goroutines that each call inc n times, and returns the
// number of calls that succeeded. Every failure fails the test.
// errStop, returned by a hammer's increment, ends that writer without an
// error (and without counting).
var errStop = errors.New("stop")

func hammer(t *testing.T, writers, n int, inc func() error) int64 {
	t.Helper()
	var ok atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < n; i++ {
				if err := inc(); err != nil {
					if errors.Is(err, errStop) {
						return
					}
					errs <- err
					return
				}
				ok.Add(1)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("increment failed: %v", err)
	}
	return ok.Load()
}

// watchNeverBackwards starts one reader per post that reads value(id) over
// and over. The returned stop ends them, waits for them, and returns the
// first read error, or a report of a value that went backwards (named what).
func watchNeverBackwards(posts []Post, what string, value func(id uint) (int64, error)) (stop func() error) {
	var readerErr atomic.Value
	ctx, cancel := context.WithCancel(context.Background())
	var readers sync.WaitGroup
	for _, p := range posts {
		readers.Add(1)
		go func(id uint) {
			defer readers.Done()
			var last int64
			for ctx.Err() == nil {
				v, err := value(id)
				if err != nil {
					readerErr.Store(err)
					return
				}
				if v < last {
					readerErr.Store(fmt.Errorf("post %d: %s went from %d to %d", id, what, last, v))
					return
				}
				last = v
			}
		}(p.ID)
	}
	return func() error {
		cancel()
		readers.Wait()
		err, _ := readerErr.Load().(error)
		return err
	}
}

// writersFor is the load of the concurrency tests: the 32 x 500 on
// PostgreSQL and MariaDB; SQLite runs one writer at a time, so fewer suffice
// there.
func writersFor(k dbKind) (writers, each int) {
	if k == lite {
		return 8, 100
	}
	return 32, 500
}

// TestConcurrentIncrementsLoseNothing: the 32 x 500 on one post,
// with concurrent increments combined (the default) and with every
// increment its own statement (Config.InFlight < 0), so that 32 statements
// race for the slot rows.
func TestConcurrentIncrementsLoseNothing(t *testing.T) {
	eachDB(t, func(t *testing.T, e *env) {
		must(t, migrateAll(e.db))
		alone := withPlugin(t, e, gormcounter.Config{InFlight: -1})
		for name, db := range map[string]*gorm.DB{"combined": e.db, "alone": alone} {
			post := newPost(t, db, "viral")
			writers, each := writersFor(e.kind)
			want := int64(writers * each)

			for _, field := range []string{"Likes", "Views"} {
				done := hammer(t, writers, each, func() error {
					return gormcounter.Increment(db.Model(&Post{ID: post.ID}), field, 1).Error
				})
				if done != want {
					t.Fatalf("%s, %s: %d of %d increments succeeded", name, field, done, want)
				}
			}
			got := exact(t, db, post.ID)
			if got.Likes != want || got.Views != want {
				t.Fatalf("%s: after %d x %d increments: likes=%d views=%d, want %d", name, writers, each, got.Likes, got.Views, want)
			}
			if _, sum := slotRows(t, db, "post_likes_slots", "post_id", post.ID); sum != want {
				t.Fatalf("%s: slot table sum %d, want %d", name, sum, want)
			}
		}
	})
}

func TestRollupUnderConcurrentIncrementsIsExact(t *testing.T) {
	eachDB(t, func(t *testing.T, e *env) {
		db := e.db
		must(t, migrateAll(db))
		posts := []Post{newPost(t, db, "a"), newPost(t, db, "b"), newPost(t, db, "c")}

		ctx, stop := context.WithCancel(context.Background())
		loopDone := make(chan error, 1)
		go func() { loopDone <- gormcounter.RollupLoop(ctx, db, 2*time.Millisecond, &Post{}) }()

		// Readers check while everything runs that the exact value never goes
		// backwards: a fold counted twice or missed would show as a jump.
		stopReaders := watchNeverBackwards(posts, "exact views", func(id uint) (int64, error) {
			var got Post
			err := db.Clauses(gormcounter.Live).First(&got, id).Error
			return got.Views, err
		})

		const writers, each = 8, 100
		var next atomic.Int64
		done := hammer(t, writers, each, func() error {
			p := posts[next.Add(1)%int64(len(posts))]
			return gormcounter.Increment(db.Model(&Post{ID: p.ID}), "Views", 1).Error
		})
		readErr := stopReaders()
		stop()
		if err := <-loopDone; err != nil {
			t.Fatalf("RollupLoop: %v", err)
		}
		if readErr != nil {
			t.Fatal(readErr)
		}

		var total int64
		for _, p := range posts {
			total += exact(t, db, p.ID).Views
		}
		if done != writers*each || total != done {
			t.Fatalf("exact total %d after %d acknowledged increments", total, done)
		}
		var column int64
		must(t, db.Raw("SELECT COALESCE(SUM(views), 0) FROM posts").Row().Scan(&column))
		if column == 0 {
			t.Fatal("the rollup loop folded nothing while the writers ran")
		}
		// With the writers gone, passes fold everything: the column alone is
		// then exact. (Cancelling the loop aborts its last transaction, and
		// database/sql rolls it back in the background: until it has, its
		// slot rows are locked and a pass skips them, leaving them pending.)
		var pending int64
		for pass := 0; pass < 100; pass++ {
			must(t, gormcounter.Rollup(db, &Post{}))
			must(t, db.Raw("SELECT COALESCE(SUM(views), 0) FROM posts").Row().Scan(&column))
			_, pending = slotRowsAll(t, db)
			if column+pending != done {
				t.Fatalf("pass %d: column %d + pending %d != %d acknowledged", pass, column, pending, done)
			}
			if pending == 0 {
				break
			}
			t.Logf("pass %d left %d pending (locked by the cancelled loop's transaction)", pass, pending)
			time.Sleep(20 * time.Millisecond)
		}
		if column != done || pending != 0 {
			t.Fatalf("after final passes the column holds %d (pending %d), want %d", column, pending, done)
		}
	})
}

// slotRowsAll returns (rows, sum of n) over the whole post_views_slots table.
func slotRowsAll(t testing.TB, db *gorm.DB) (int64, int64) {
	t.Helper()
	var rows, sum int64
	must(t, db.Raw("SELECT COUNT(*), COALESCE(SUM(n), 0) FROM post_views_slots").Row().Scan(&rows, &sum))
	return rows, sum
}

func TestRollupFoldsAndCachedReadsLag(t *testing.T) {
	eachDB(t, func(t *testing.T, e *env) {
		db := e.db
		must(t, migrateAll(db))
		a, b := newPost(t, db, "a"), newPost(t, db, "b")
		for i := 0; i < 30; i++ {
			must(t, gormcounter.Increment(db.Model(&a), "Views", 1).Error)
		}
		must(t, gormcounter.Increment(db.Model(&b), "Views", 5).Error)

		var cached Post
		must(t, db.First(&cached, a.ID).Error)
		if cached.Views != 0 {
			t.Fatalf("cached views = %d before a rollup, want 0", cached.Views)
		}
		must(t, gormcounter.Rollup(db, &Post{}))
		must(t, db.First(&cached, a.ID).Error)
		if cached.Views != 30 {
			t.Fatalf("cached views = %d after a rollup, want 30", cached.Views)
		}
		// The rollup column is a real column: ORDER BY and WHERE work on it.
		var top []Post
		must(t, db.Where("views > ?", 1).Order("views DESC").Find(&top).Error)
		if len(top) != 2 || top[0].ID != a.ID || top[1].ID != b.ID {
			t.Fatalf("ordered by views: %+v", top)
		}
		must(t, gormcounter.Increment(db.Model(&a), "Views", 2).Error)
		if got := exact(t, db, a.ID).Views; got != 32 {
			t.Fatalf("live views = %d, want 32", got)
		}
	})
}

func TestRollupLoopStopsWithItsContext(t *testing.T) {
	e := open(t, lite)
	must(t, migrateAll(e.db))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- gormcounter.RollupLoop(ctx, e.db, time.Hour, &Post{}) }()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("RollupLoop returned %v, want nil on cancel", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("RollupLoop did not return after its context was cancelled")
	}
	if err := gormcounter.RollupLoop(context.Background(), e.db, time.Second, &Author{}); err == nil {
		t.Fatal("RollupLoop on a model without rollup counters must fail at once")
	}
}

// TestFirstUseFromManyGoroutines starts 32 goroutines on models this *gorm.DB
// has never seen (another one migrated them), so that settling the counter
// fields of the shared schema races with every kind of statement. Run with
// -race.
func TestFirstUseFromManyGoroutines(t *testing.T) {
	for _, k := range allKinds {
		t.Run(string(k), func(t *testing.T) {
			e := open(t, k)
			seed(t, e.db, 4)
			fresh, err := gorm.Open(dialectorFor(k, e.dsn), &gorm.Config{Logger: e.log})
			must(t, err)
			// Config.Models settles Post before any statement, so that struct
			// conditions built in the goroutines below read settled fields.
			must(t, fresh.Use(gormcounter.New(gormcounter.Config{Models: []any{&Post{}}})))
			var wg sync.WaitGroup
			errs := make(chan error, 32)
			for g := 0; g < 32; g++ {
				wg.Add(1)
				go func(g int) {
					defer wg.Done()
					var err error
					switch g % 5 {
					case 4:
						var ps []Post
						err = fresh.Where(&Post{Title: "post"}).Find(&ps).Error
					case 0:
						var ps []Post
						err = fresh.Joins("Author").Preload("Comments").Find(&ps).Error
					case 1:
						err = gormcounter.Increment(fresh.Model(&Post{}).Where("id > 0"), "Likes", 1).Error
					case 2:
						var cs []Comment
						err = fresh.Find(&cs).Error
					case 3:
						err = fresh.Create(&Author{Name: "new"}).Error
					}
					errs <- err
				}(g)
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
			var p Post
			must(t, fresh.Order("id").First(&p).Error)
			if p.Likes != 1+7 { // seeded 1, then 7 goroutines (g%5 == 1) added 1 to every post
				t.Fatalf("likes = %d, want 8", p.Likes)
			}
		})
	}
}

func TestUseStartsNoGoroutine(t *testing.T) {
	e := open(t, lite)
	raw, err := gorm.Open(dialectorFor(lite, e.dsn), &gorm.Config{Logger: e.log})
	must(t, err)
	settled := func() int {
		time.Sleep(50 * time.Millisecond)
		return runtime.NumGoroutine()
	}
	before := settled()
	must(t, raw.Use(gormcounter.New(gormcounter.Config{})))
	must(t, raw.AutoMigrate(&Post{}))
	after := settled()
	if after > before {
		t.Fatalf("goroutines went from %d to %d across Use and AutoMigrate", before, after)
	}
}
