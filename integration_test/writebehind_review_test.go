package integration_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hotcounter/hotcounter/gormcounter"
)

// Flush after a failed flush writes the batch that failed and then what is
// pending (it once wrote only the old batch and returned nil).
func TestBufferFlushWritesPendingAfterAFailure(t *testing.T) {
	e := open(t, lite)
	db := e.db
	must(t, migrateAll(db))
	posts := freshPosts(t, db, 2)
	ctx := context.Background()
	buf, err := gormcounter.NewBuffer(db, gormcounter.BufferConfig{Interval: time.Hour})
	must(t, err)
	must(t, db.Exec("ALTER TABLE post_likes_slots RENAME TO post_likes_slots_away").Error)
	must(t, buf.Increment(ctx, &Post{ID: posts[0].ID}, "Likes", 1))
	if err := buf.Flush(ctx); err == nil {
		t.Fatal("flush with the table away succeeded")
	}
	must(t, db.Exec("ALTER TABLE post_likes_slots_away RENAME TO post_likes_slots").Error)
	must(t, buf.Increment(ctx, &Post{ID: posts[1].ID}, "Likes", 1))
	must(t, buf.Flush(ctx)) // returns nil
	if got := exact(t, db, posts[1].ID).Likes; got != 1 {
		t.Errorf("Flush returned nil but post 1 likes=%d, want 1 (pending=%d)", got, must2(buf.Pending(&Post{ID: posts[1].ID}, "Likes")))
	}
	must(t, buf.Close(ctx))
}

func must2(n int64, _ error) int64 { return n }

// A second Close after a timed-out one flushes what is held (it once
// returned nil at once).
func TestBufferSecondCloseFlushes(t *testing.T) {
	e := open(t, lite)
	db := e.db
	must(t, migrateAll(db))
	posts := freshPosts(t, db, 1)
	ctx := context.Background()
	buf, err := gormcounter.NewBuffer(db, gormcounter.BufferConfig{Interval: time.Hour})
	must(t, err)
	must(t, db.Exec("ALTER TABLE post_likes_slots RENAME TO post_likes_slots_away").Error)
	must(t, buf.Increment(ctx, &Post{ID: posts[0].ID}, "Likes", 1))
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if err := buf.Close(short); err == nil {
		t.Fatal("first Close succeeded")
	}
	must(t, db.Exec("ALTER TABLE post_likes_slots_away RENAME TO post_likes_slots").Error)
	err = buf.Close(ctx)
	got := exact(t, db, posts[0].ID).Likes
	if err == nil && got != 1 {
		t.Errorf("second Close returned nil, but likes=%d, want 1 (pending %d)", got, must2(buf.Pending(&Post{ID: posts[0].ID}, "Likes")))
	}
}

// Close returns at its deadline while the background flush is blocked.
func TestBufferCloseHonoursItsDeadline(t *testing.T) {
	e := open(t, pg)
	db := e.db
	must(t, migrateAll(db))
	posts := freshPosts(t, db, 1)
	ctx := context.Background()
	buf, err := gormcounter.NewBuffer(db, gormcounter.BufferConfig{Interval: 20 * time.Millisecond})
	must(t, err)
	tx := db.Begin()
	must(t, tx.Exec("LOCK TABLE hotcounter_ledger IN ACCESS EXCLUSIVE MODE").Error)
	must(t, buf.Increment(ctx, &Post{ID: posts[0].ID}, "Likes", 1))
	time.Sleep(200 * time.Millisecond) // the loop's flush is now waiting
	release := time.AfterFunc(3*time.Second, func() { tx.Rollback() })
	defer release.Stop()
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	err = buf.Close(short)
	if took := time.Since(start); took > time.Second {
		t.Errorf("Close(ctx 300ms) took %v (err %v): it waited for the blocked loop flush", took, err)
	}
}

// One key that could never be written would poison every later flush:
// Increment refuses it, and the valid increments are written.
func TestBufferRefusesKeysItCouldNeverWrite(t *testing.T) {
	e := open(t, pg)
	db := e.db
	must(t, migrateAll(db))
	posts := freshPosts(t, db, 1)
	ctx := context.Background()
	buf, err := gormcounter.NewBuffer(db, gormcounter.BufferConfig{Interval: 10 * time.Millisecond})
	must(t, err)
	must(t, buf.Increment(ctx, &Post{ID: posts[0].ID}, "Likes", 1))
	// A key no database integer holds is refused, not acknowledged: it could
	// never be flushed, and its batch would hold up every other increment.
	if err := buf.Increment(ctx, &Post{ID: ^uint(0)}, "Likes", 1); err == nil || !strings.Contains(err.Error(), "Post.Likes") {
		t.Fatalf("Increment of a key out of range: %v, want an error naming Post.Likes", err)
	}
	time.Sleep(100 * time.Millisecond)
	must(t, buf.Increment(ctx, &Post{ID: posts[0].ID}, "Likes", 1))
	short, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	err = buf.Close(short)
	if got := exact(t, db, posts[0].ID).Likes; got != 2 {
		t.Errorf("likes=%d, want 2; Close: %v", got, err)
	}
}

var _ = errors.New
var _ sync.Mutex

type Slug struct {
	ID   string `gorm:"primaryKey;size:64"`
	Hits int64  `gorm:"counter"`
}

func slugHits(t *testing.T, e *env, id string) int64 {
	var s Slug
	must(t, e.db.First(&s, "id = ?", id).Error)
	return s.Hits
}

// A string key that the database matches but that is not spelled as it
// reads back (MariaDB case-insensitive collation) counts in the buffer as
// it does through Increment.
func TestBufferKeysSpelledAsTheDatabaseMatchesThem(t *testing.T) {
	e := open(t, my)
	must(t, e.db.AutoMigrate(&Slug{}))
	must(t, e.db.Create(&Slug{ID: "abc"}).Error)
	ctx := context.Background()
	must(t, gormcounter.Increment(e.db.Model(&Slug{ID: "ABC"}), "Hits", 1).Error)
	if got := slugHits(t, e, "abc"); got != 1 {
		t.Fatalf("direct increment: %d", got)
	}
	buf, err := gormcounter.NewBuffer(e.db, gormcounter.BufferConfig{Interval: time.Hour})
	must(t, err)
	must(t, buf.Increment(ctx, &Slug{ID: "ABC"}, "Hits", 5))
	must(t, buf.Flush(ctx))
	must(t, buf.Close(ctx))
	if got := slugHits(t, e, "abc"); got != 6 {
		t.Errorf("after buffered +5: %d, want 6", got)
	}
}

// The MariaDB append fold does not wait for an open increment transaction
// of another parent (its uncommitted delta row, or the next-key lock).
func TestMariaDBAppendFoldDoesNotWait(t *testing.T) {
	e := open(t, my)
	db := e.db
	must(t, db.AutoMigrate(&Story{}))
	a, b := Story{Title: "a"}, Story{Title: "b"}
	must(t, db.Create(&a).Error)
	must(t, db.Create(&b).Error)
	must(t, gormcounter.Increment(db.Model(&Story{ID: a.ID}), "Claps", 1).Error)
	tx := db.Begin()
	must(t, gormcounter.Increment(tx.Model(&Story{ID: b.ID}), "Claps", 1).Error)
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- gormcounter.Rollup(db, &Story{}) }()
	select {
	case err := <-done:
		must(t, err)
		tx.Rollback()
		return
	case <-time.After(2 * time.Second):
	}
	// Still waiting: now the caller's transaction increments a.
	errTx := gormcounter.Increment(tx.Model(&Story{ID: a.ID}), "Claps", 1).Error
	errRollup := <-done
	t.Errorf("Rollup waited %v for an unrelated open increment; then caller's increment of a: %v; rollup: %v",
		time.Since(start), errTx, errRollup)
	tx.Rollback()
}

// Two buffers flushing concurrently on MariaDB do not deadlock (a prune in
// every flush once scanned, and locked, the whole ledger).
func TestMariaDBConcurrentBuffersDoNotDeadlock(t *testing.T) {
	e := open(t, my)
	db := e.db
	must(t, migrateAll(db))
	posts := freshPosts(t, db, 2)
	ctx := context.Background()
	var bufs [2]*gormcounter.Buffer
	for i := range bufs {
		b, err := gormcounter.NewBuffer(db, gormcounter.BufferConfig{Interval: time.Hour})
		must(t, err)
		bufs[i] = b
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for i := range bufs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				if err := bufs[i].Increment(ctx, &Post{ID: posts[i].ID}, "Likes", 1); err != nil {
					t.Error(err)
					return
				}
				if err := bufs[i].Flush(ctx); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	for _, b := range bufs {
		must(t, b.Close(ctx))
	}
	if len(errs) > 0 {
		t.Errorf("%d of 200 flushes failed; first: %v", len(errs), errs[0])
	}
}

// Parents deleted before the flush, mixed with live ones, in all three
// modes: the live ones count exactly, the deleted ones leave nothing, and
// the flush costs a few statements per deleted parent, not one per key.
func TestBufferDropsDeletedParents(t *testing.T) {
	eachDB(t, func(t *testing.T, e *env) {
		db := e.db
		must(t, migrateAll(db))
		posts := freshPosts(t, db, 3)
		st := []Story{{Title: "a"}, {Title: "b"}, {Title: "c"}}
		must(t, db.Create(&st).Error)
		ctx := context.Background()
		buf, err := gormcounter.NewBuffer(db, gormcounter.BufferConfig{Interval: time.Hour})
		must(t, err)
		for i := range posts {
			must(t, buf.Increment(ctx, &Post{ID: posts[i].ID}, "Likes", int64(i+1)))
			must(t, buf.Increment(ctx, &Post{ID: posts[i].ID}, "Views", int64(i+1)))
			must(t, buf.Increment(ctx, &Story{ID: st[i].ID}, "Claps", int64(i+1)))
		}
		must(t, db.Delete(&Post{}, posts[1].ID).Error)
		must(t, db.Delete(&Story{}, st[1].ID).Error)
		must(t, buf.Flush(ctx))
		must(t, buf.Close(ctx))
		for _, i := range []int{0, 2} {
			p := exact(t, db, posts[i].ID)
			if p.Likes != int64(i+1) || p.Views != int64(i+1) {
				t.Errorf("post %d likes=%d views=%d want %d", i, p.Likes, p.Views, i+1)
			}
			if got := storyClaps(t, db, st[i].ID, true); got != int64(i+1) {
				t.Errorf("story %d claps=%d want %d", i, got, i+1)
			}
		}
		if n := rawInt(t, db, "SELECT COUNT(*) FROM post_likes_slots WHERE post_id = ?", posts[1].ID); n != 0 {
			t.Errorf("%d slot rows of a deleted post", n)
		}
		if e.kind != pg {
			return
		}
		// 3,000 posts, one deleted in each chunk of 1,000.
		many := freshPosts(t, db, 3000)
		buf, err = gormcounter.NewBuffer(db, gormcounter.BufferConfig{Interval: time.Hour})
		must(t, err)
		for i := range many {
			must(t, buf.Increment(ctx, &Post{ID: many[i].ID}, "Likes", 1))
		}
		for _, i := range []int{5, 1005, 2005} {
			must(t, db.Delete(&Post{}, many[i].ID).Error)
		}
		e.log.reset()
		must(t, buf.Flush(ctx))
		if n := e.log.count(); n > 300 {
			t.Fatalf("a flush of 3,000 keys with 3 deleted parents sent %d statements", n)
		}
		must(t, buf.Close(ctx))
		if got := exact(t, db, many[6].ID); got.Likes != 1 {
			t.Fatalf("likes=%d, want 1", got.Likes)
		}
	})
}

// Batch ids older than LedgerKeep are pruned.
func TestBufferPrunesTheLedger(t *testing.T) {
	e := open(t, lite)
	db := e.db
	must(t, migrateAll(db))
	posts := freshPosts(t, db, 1)
	ctx := context.Background()
	buf, err := gormcounter.NewBuffer(db, gormcounter.BufferConfig{Interval: time.Hour})
	must(t, err)
	old := time.Now().Add(-48 * time.Hour).UnixMilli()
	must(t, db.Exec("INSERT INTO hotcounter_ledger (batch, at) VALUES ('old', ?)", old).Error)
	must(t, buf.Increment(ctx, &Post{ID: posts[0].ID}, "Likes", 1))
	must(t, buf.Flush(ctx))
	must(t, buf.Close(ctx))
	if n := rawInt(t, db, "SELECT COUNT(*) FROM hotcounter_ledger WHERE batch = 'old'"); n != 0 {
		t.Fatal("a batch id 48 h old is still in the ledger after a flush")
	}
}
