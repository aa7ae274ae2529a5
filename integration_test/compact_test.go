package integration_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hotcounter/hotcounter/entcounter"
	"github.com/hotcounter/hotcounter/gormcounter"
	"gorm.io/gorm"
)

// slotsOf returns how many slot rows owner has in table, and how many of
// them hold a value.
func slotsOf(t testing.TB, db *gorm.DB, table, owner string, id uint) (rows, valued int64) {
	t.Helper()
	must(t, db.Raw(fmt.Sprintf("SELECT COUNT(*), COALESCE(SUM(CASE WHEN n <> 0 THEN 1 ELSE 0 END), 0) FROM %s WHERE %s = ?", table, owner), id).
		Row().Scan(&rows, &valued))
	return rows, valued
}

// eachCompactDB runs fn as a subtest on the databases Compact supports.
func eachCompactDB(t *testing.T, fn func(t *testing.T, e *env)) {
	t.Helper()
	eachDB(t, fn, on(pg, lite))
}

// TestCompactRefusesMySQL: on MariaDB, Compact and CompactPass return an
// error wrapping errors.ErrUnsupported and leave the slot rows as they are.
func TestCompactRefusesMySQL(t *testing.T) {
	parallel(t)
	e := openEnt(t, my, true)
	db := e.db
	post := newPost(t, db, "mysql")
	likes := spread(t, db, &Post{ID: post.ID}, "Likes", "post_likes_slots", "post_id", post.ID, 3)
	if err := gormcounter.CompactPass(db, &Post{}); !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("Compact on MariaDB = %v, want errors.ErrUnsupported", err)
	}
	if err := entcounter.CompactPass(context.Background(), e.client); !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("CompactPass on MariaDB = %v, want errors.ErrUnsupported", err)
	}
	if _, valued := slotsOf(t, db, "post_likes_slots", "post_id", post.ID); valued < 3 || exact(t, db, post.ID).Likes != likes {
		t.Fatalf("after the refused passes: %d valued slot rows, likes %d; want the 3 or more rows as they were, %d", valued, exact(t, db, post.ID).Likes, likes)
	}
}

// crowdedPost opens a fresh database of kind k and returns it with a post
// whose 16 likes slot rows all hold a value, and its likes.
func crowdedPost(t *testing.T, k dbKind, title string) (*gorm.DB, Post, int64) {
	t.Helper()
	db := open(t, k).db
	must(t, migrateAll(db))
	post := newPost(t, db, title)
	return db, post, spread(t, db, &Post{ID: post.ID}, "Likes", "post_likes_slots", "post_id", post.ID, 16)
}

// spread increments field of the row that model targets until at least
// want of its slot rows hold a value, and returns how many increments that
// took.
func spread(t testing.TB, db *gorm.DB, model any, field, table, owner string, id uint, want int64) int64 {
	t.Helper()
	var n int64
	for {
		if _, valued := slotsOf(t, db, table, owner, id); valued >= want {
			return n
		}
		must(t, gormcounter.Increment(db.Model(model), field, 1).Error)
		n++
	}
}

// TestCompactSumCounters: a pass leaves one slot row holding a value
// per parent (deleting the others, or emptying them where slots are
// pre-created) and every total as it was.
func TestCompactSumCounters(t *testing.T) {
	parallel(t)
	eachCompactDB(t, func(t *testing.T, e *env) {
		db := e.db
		must(t, db.AutoMigrate(&Post{}, &Clip{}))
		spreadOut, single, zero := newPost(t, db, "spread"), newPost(t, db, "single"), newPost(t, db, "zero")
		likes := spread(t, db, &Post{ID: spreadOut.ID}, "Likes", "post_likes_slots", "post_id", spreadOut.ID, 5)
		must(t, gormcounter.Increment(db.Model(&Post{ID: single.ID}), "Likes", 7).Error)
		// Two rows that cancel out: the total is 0 but two rows hold values.
		must(t, db.Exec("DELETE FROM post_likes_slots WHERE post_id = ?", zero.ID).Error)
		must(t, db.Exec("INSERT INTO post_likes_slots (post_id, slot, n) VALUES (?, 3, 5), (?, 9, -5)", zero.ID, zero.ID).Error)
		clip := Clip{} // Plays pre-creates its 4 slot rows: compaction empties the others

		must(t, db.Create(&clip).Error)
		plays := spread(t, db, &Clip{ID: clip.ID}, "Plays", "clip_plays_slots", "clip_id", clip.ID, 3)

		must(t, gormcounter.CompactPass(db, &Post{}, &Clip{}))

		for _, c := range []struct {
			id   uint
			want int64
		}{{spreadOut.ID, likes}, {single.ID, 7}, {zero.ID, 0}} {
			var p Post
			must(t, db.First(&p, c.id).Error)
			if p.Likes != c.want {
				t.Errorf("post %d: likes %d after compaction, want %d", c.id, p.Likes, c.want)
			}
			rows, valued := slotsOf(t, db, "post_likes_slots", "post_id", c.id)
			if wantValued := min(c.want, 1); valued != wantValued {
				t.Errorf("post %d: %d slot rows hold a value after compaction, want %d", c.id, valued, wantValued)
			}
			if c.id == spreadOut.ID && rows != 1 {
				t.Errorf("post %d: %d slot rows after compaction, want 1", c.id, rows)
			}
		}
		var got Clip
		must(t, db.First(&got, clip.ID).Error)
		if rows, valued := slotsOf(t, db, "clip_plays_slots", "clip_id", clip.ID); got.Plays != plays || rows != 4 || valued != 1 {
			t.Errorf("clip: plays %d in %d slot rows (%d holding a value), want %d in 4 (1)", got.Plays, rows, valued, plays)
		}

		// A second pass finds nothing to do and changes nothing.
		must(t, gormcounter.CompactPass(db, &Post{}, &Clip{}))
		var p Post
		must(t, db.First(&p, spreadOut.ID).Error)
		if _, valued := slotsOf(t, db, "post_likes_slots", "post_id", spreadOut.ID); p.Likes != likes || valued != 1 {
			t.Errorf("after a second pass: likes %d in %d valued rows, want %d in 1", p.Likes, valued, likes)
		}
	})
}

// TestCompactSkipsHeldSlotRows: a transaction holding one of a
// post's slot rows does not hold up the pass, which gathers the rest; the
// held row stays apart until a later pass.
func TestCompactSkipsHeldSlotRows(t *testing.T) {
	parallel(t)
	for _, k := range []dbKind{pg} {
		t.Run(string(k), func(t *testing.T) {
			// Every slot row holds a value, so the held increment holds one of them.
			db, post, likes := crowdedPost(t, k, "held")

			holder := db.Begin()
			defer holder.Rollback()
			must(t, gormcounter.Increment(holder.Model(&Post{ID: post.ID}), "Likes", 1).Error)

			done := make(chan error, 1)
			go func() { done <- gormcounter.CompactPass(db, &Post{}) }()
			select {
			case err := <-done:
				must(t, err)
			case <-time.After(time.Minute):
				t.Fatal("Compact waited for a slot row that another transaction holds")
			}
			if got := exact(t, db, post.ID).Likes; got != likes {
				t.Fatalf("likes %d while the holder is open, want %d", got, likes)
			}
			must(t, holder.Commit().Error)
			// The held row is the one not gathered.
			if _, valued := slotsOf(t, db, "post_likes_slots", "post_id", post.ID); valued != 2 {
				t.Fatalf("%d slot rows hold a value after the holder committed, want 2", valued)
			}
			must(t, gormcounter.CompactPass(db, &Post{}))
			if _, valued := slotsOf(t, db, "post_likes_slots", "post_id", post.ID); valued != 1 {
				t.Fatalf("%d slot rows hold a value after the next pass, want 1", valued)
			}
			if got := exact(t, db, post.ID).Likes; got != likes+1 {
				t.Fatalf("likes %d, want %d", got, likes+1)
			}
		})
	}
}

// TestCompactionUnderConcurrentIncrementsIsExact: writers increment a sum
// counter while compaction passes run one after another; readers never see a total go
// backwards (a compaction seen half done would), and the final totals equal
// the acknowledged increments.
func TestCompactionUnderConcurrentIncrementsIsExact(t *testing.T) {
	parallel(t)
	eachCompactDB(t, func(t *testing.T, e *env) {
		db := e.db
		must(t, migrateAll(db))
		posts := []Post{newPost(t, db, "a"), newPost(t, db, "b"), newPost(t, db, "c")}

		ctx, stop := context.WithCancel(context.Background())
		loopDone := make(chan error, 1)
		passes := 0
		go func() {
			for ctx.Err() == nil {
				if err := gormcounter.CompactPass(db, &Post{}); err != nil {
					loopDone <- err
					return
				}
				passes++
				time.Sleep(2 * time.Millisecond)
			}
			loopDone <- nil
		}()

		stopReaders := watchNeverBackwards(posts, "likes", func(id uint) (int64, error) {
			var got Post
			err := db.First(&got, id).Error
			return got.Likes, err
		})

		const writers, each = 8, 100
		var next atomic.Int64
		done := hammer(t, writers, each, func() error {
			p := posts[next.Add(1)%int64(len(posts))]
			return gormcounter.Increment(db.Model(&Post{ID: p.ID}), "Likes", 1).Error
		})
		readErr := stopReaders()
		stop()
		if err := <-loopDone; err != nil {
			t.Fatalf("Compact: %v", err)
		}
		if passes == 0 {
			t.Fatal("no compaction pass ran while the writers did")
		}
		if readErr != nil {
			t.Fatal(readErr)
		}
		var total int64
		for _, p := range posts {
			var got Post
			must(t, db.First(&got, p.ID).Error)
			total += got.Likes
		}
		if done != writers*each || total != done {
			t.Fatalf("total %d after %d acknowledged increments", total, done)
		}
		// With the writers gone, a pass gathers every post into one row.
		must(t, gormcounter.CompactPass(db, &Post{}))
		for _, p := range posts {
			if _, valued := slotsOf(t, db, "post_likes_slots", "post_id", p.ID); valued != 1 {
				t.Fatalf("post %d: %d valued slot rows after the final pass, want 1", p.ID, valued)
			}
		}
		total = 0
		for _, p := range posts {
			var got Post
			must(t, db.First(&got, p.ID).Error)
			total += got.Likes
		}
		if total != done {
			t.Fatalf("total %d after the final pass, want %d", total, done)
		}
	})
}

// TestCompactNeedsSumCounters: Compact of a model without sum counters, or
// of no model, is an error naming what is wrong; Rollup still refuses a
// model without rollup counters.
func TestCompactNeedsSumCounters(t *testing.T) {
	parallel(t)
	e := open(t, lite)
	must(t, e.db.AutoMigrate(&Board{}, &Post{}))
	if err := gormcounter.CompactPass(e.db, &Board{}); err == nil || !strings.Contains(err.Error(), "Board has no sum counter") {
		t.Fatalf("Compact(&Board{}) = %v, want an error naming Board", err)
	}
	if err := gormcounter.CompactPass(e.db); err == nil {
		t.Fatal("Compact of no model succeeded")
	}
	if err := gormcounter.CompactPass(e.db, &Post{}); err != nil {
		t.Fatalf("Compact(&Post{}) = %v", err)
	}
	if err := gormcounter.RollupPass(e.db, &Author{}); err == nil || !strings.Contains(err.Error(), "Author has no rollup counter") {
		t.Fatalf("Rollup(&Author{}) = %v, want an error naming Author", err)
	}
}

// TestPassesRefuseTransactions: Rollup, RollupLoop and Compact run
// transactions of their own; given the caller's transaction they fail at
// once, changing nothing.
func TestPassesRefuseTransactions(t *testing.T) {
	parallel(t)
	e := open(t, lite)
	must(t, migrateAll(e.db))
	post := newPost(t, e.db, "tx")
	must(t, gormcounter.Increment(e.db.Model(&Post{ID: post.ID}), "Views", 3).Error)
	tx := e.db.Begin()
	defer tx.Rollback()
	cancelled, cancel := context.WithCancel(context.Background())
	cancel() // were the loop to start, it would run one pass and return nil
	for name, err := range map[string]error{
		"RollupPass":  gormcounter.RollupPass(tx, &Post{}),
		"RollupLoop":  gormcounter.RollupLoop(cancelled, tx, time.Second, &Post{}),
		"CompactPass": gormcounter.CompactPass(tx, &Post{}),
		"MoveToSlots": func() error { _, err := gormcounter.MoveToSlots(tx, &Post{}); return err }(),
	} {
		if err == nil || !strings.Contains(err.Error(), "must not run inside a transaction") {
			t.Errorf("%s in a transaction = %v, want a refusal", name, err)
		}
	}
	must(t, tx.Rollback().Error)
	if v := rawInt(t, e.db, "SELECT views FROM posts WHERE id = ?", post.ID); v != 0 {
		t.Fatalf("posts.views = %d after the refused passes, want 0 (nothing folded)", v)
	}
}
