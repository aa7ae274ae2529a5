package integration_test

import (
	"sync"
	"testing"
	"time"

	"github.com/hotcounter/hotcounter/gormcounter"
	"gorm.io/gorm"
)

// autoLikes returns post's likes as a load shows them, and its slot rows.
func autoLikes(t testing.TB, db *gorm.DB, id uint) (likes, rows int64) {
	t.Helper()
	var p AutoPost
	must(t, db.First(&p, id).Error)
	rows, _ = slotsOf(t, db, "auto_post_likes_slots", "auto_post_id", id)
	return p.Likes, rows
}

// TestAutoSlotsWidenAViralPostAndCountExactly: 32 writers on one post of a
// slots=auto counter: it widens past one row (never past 16) and counts
// every increment.
func TestAutoSlotsWidenAViralPostAndCountExactly(t *testing.T) {
	parallel(t)
	eachDB(t, func(t *testing.T, e *env) {
		db := e.db
		post, done, writers, each := likeAViralAutoPost(t, e, db)
		likes, rows := autoLikes(t, db, post.ID)
		if likes != done || done != int64(writers*each) {
			t.Fatalf("likes %d after %d of %d increments", likes, done, writers*each)
		}
		if rows < 2 || rows > 16 {
			t.Fatalf("%d slot rows after %d writers at once: want it widened, to at most 16", rows, writers)
		}
	}, pool(writersPool))
}

// TestAutoSlotsKeepColdPostsOnOneRow: posts liked a few times each, by
// writers that never write one post at once, keep one slot row each.
func TestAutoSlotsKeepColdPostsOnOneRow(t *testing.T) {
	parallel(t)
	eachDB(t, func(t *testing.T, e *env) {
		db := e.db
		must(t, db.AutoMigrate(&AutoPost{}))
		posts := make([]AutoPost, 200)
		must(t, db.Create(&posts).Error)
		var wg sync.WaitGroup
		for w := range 4 { // 4 writers, each its own posts
			wg.Go(func() {
				for i := w; i < len(posts); i += 4 {
					for range 1 + i%5 {
						if err := gormcounter.Increment(db.Model(&AutoPost{ID: posts[i].ID}), "Likes", 1).Error; err != nil {
							t.Error(err)
							return
						}
					}
				}
			})
		}
		wg.Wait()
		var got []AutoPost
		must(t, db.Order("id").Find(&got).Error)
		for i, p := range got {
			if p.Likes != int64(1+i%5) {
				t.Fatalf("post %d: likes %d, want %d", i, p.Likes, 1+i%5)
			}
		}
		if n := rawInt(t, db, "SELECT COUNT(*) FROM auto_post_likes_slots"); n != int64(len(posts)) {
			t.Fatalf("%d slot rows for %d cold posts, want one each", n, len(posts))
		}
	}, pool(8))
}

// TestAutoSlotsNarrowAfterCooldownAndCompact: a post that turned hot and
// then cold goes back to one slot row after CompactPass, and its later
// increments stay on it.
func TestAutoSlotsNarrowAfterCooldownAndCompact(t *testing.T) {
	parallel(t)
	eachDB(t, func(t *testing.T, e *env) {
		db := withPlugin(t, e, gormcounter.Config{AutoCooldown: 100 * time.Millisecond})
		post, hot, _, _ := likeAViralAutoPost(t, e, db)
		if _, rows := autoLikes(t, db, post.ID); rows < 2 && e.kind != lite {
			t.Fatalf("%d slot rows while hot, want more than one", rows)
		}
		time.Sleep(time.Second) // 10 cooldowns: 16 -> 1 takes 4
		must(t, errOf(gormcounter.CompactPass(db, &AutoPost{})))
		for range 20 {
			must(t, gormcounter.Increment(db.Model(&AutoPost{ID: post.ID}), "Likes", 1).Error)
		}
		likes, rows := autoLikes(t, db, post.ID)
		if likes != hot+20 || rows != 1 {
			t.Fatalf("cold again after Compact: likes %d (want %d), %d slot rows (want 1)", likes, hot+20, rows)
		}
	}, on(pg, lite), pool(writersPool)) // the databases Compact supports
}

// likeAViralAutoPost creates an AutoPost in db and has the concurrency
// tests' writers like it 20 times each at once (a width is learned within
// a few dozen statements): the post, the likes done, writers and each.
func likeAViralAutoPost(t *testing.T, e *env, db *gorm.DB) (post AutoPost, done int64, writers, each int) {
	t.Helper()
	must(t, db.AutoMigrate(&AutoPost{}))
	must(t, db.Create(&post).Error)
	writers, _ = writersFor(e.kind)
	each = 20
	done = hammer(t, writers, each, func() error {
		return gormcounter.Increment(db.Model(&AutoPost{ID: post.ID}), "Likes", 1).Error
	})
	return post, done, writers, each
}
