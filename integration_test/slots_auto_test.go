package integration_test

import (
	"sync"
	"testing"
	"time"
)

// reelSlotRows is how many slot rows a reel's plays have.
func reelSlotRows(t testing.TB, o counterORM, id int64) int64 {
	t.Helper()
	return rawInt(t, o.db(), "SELECT COUNT(*) FROM reel_plays_slots WHERE reel_id = ?", id)
}

// TestAutoSlotsWidenAViralRowAndCountExactly: 32 writers on one reel of a
// slots=auto counter: it widens past one row (never past 16) and counts
// every increment. Both ORMs. On SQLite, which writes one statement at a
// time, a width never saves a wait, and whether it grows at all depends on
// two of the 8 writers' statements being in flight at once (GORM combines
// them): there it only counts every increment, on at most 16 rows.
func TestAutoSlotsWidenAViralRowAndCountExactly(t *testing.T) {
	eachORM(t, func(t *testing.T, o counterORM) {
		id, done, writers, each := playAViralReel(t, o)
		if plays := o.cached(t, modelReel, id, "plays"); plays != done || done != int64(writers*each) {
			t.Fatalf("plays %d after %d of %d increments", plays, done, writers*each)
		}
		if rows := reelSlotRows(t, o, id); (rows < 2 && o.kind() != lite) || rows > 16 {
			t.Fatalf("%d slot rows after %d writers at once: want it widened, to at most 16", rows, writers)
		}
	}, pool(writersPool))
}

// TestAutoSlotsKeepColdRowsOnOneRow: reels played a few times each, by
// writers that never write one reel at once, keep one slot row each. Both
// ORMs.
func TestAutoSlotsKeepColdRowsOnOneRow(t *testing.T) {
	eachORM(t, func(t *testing.T, o counterORM) {
		ids := o.createMany(t, modelReel, 100)
		var wg sync.WaitGroup
		for w := range 4 { // 4 writers, each its own reels
			wg.Go(func() {
				for i := w; i < len(ids); i += 4 {
					for range 1 + i%5 {
						if err := o.increment(modelReel, ids[i], "plays", 1); err != nil {
							t.Error(err)
							return
						}
					}
				}
			})
		}
		wg.Wait()
		for i, id := range ids {
			if plays := o.cached(t, modelReel, id, "plays"); plays != int64(1+i%5) {
				t.Fatalf("reel %d: plays %d, want %d", i, plays, 1+i%5)
			}
		}
		if n := rawInt(t, o.db(), "SELECT COUNT(*) FROM reel_plays_slots"); n != int64(len(ids)) {
			t.Fatalf("%d slot rows for %d cold reels, want one each", n, len(ids))
		}
	}, pool(8))
}

// TestAutoSlotsNarrowAfterCooldownAndCompact: a reel that turned hot and
// then cold goes back to one slot row after CompactPass, and its later
// increments stay on it. Both ORMs, with AutoCooldown set to 100 ms.
func TestAutoSlotsNarrowAfterCooldownAndCompact(t *testing.T) {
	eachORM(t, func(t *testing.T, o counterORM) {
		o = o.with(t, settings{AutoCooldown: 100 * time.Millisecond})
		id, hot, _, _ := playAViralReel(t, o)
		if rows := reelSlotRows(t, o, id); rows < 2 && o.kind() != lite {
			t.Fatalf("%d slot rows while hot, want more than one", rows)
		}
		time.Sleep(time.Second) // 10 cooldowns: 16 -> 1 takes 4
		must(t, errOf(o.compact(modelReel)))
		for range 20 {
			must(t, o.increment(modelReel, id, "plays", 1))
		}
		if plays, rows := o.cached(t, modelReel, id, "plays"), reelSlotRows(t, o, id); plays != hot+20 || rows != 1 {
			t.Fatalf("cold again after Compact: plays %d (want %d), %d slot rows (want 1)", plays, hot+20, rows)
		}
	}, on(pg, lite), pool(writersPool)) // the databases Compact supports
}

// playAViralReel creates a reel and has the concurrency tests' writers play
// it 20 times each at once (a width is learned within a few dozen
// statements): the reel, the plays done, writers and each.
func playAViralReel(t *testing.T, o counterORM) (id, done int64, writers, each int) {
	t.Helper()
	id = o.create(t, modelReel)
	writers, _ = writersFor(o.kind())
	each = 20
	done = hammer(t, writers, each, func() error { return o.increment(modelReel, id, "plays", 1) })
	return id, done, writers, each
}
