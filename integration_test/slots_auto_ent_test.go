package integration_test

import (
	"context"
	"sync"
	"testing"

	"github.com/hotcounter/hotcounter/integration_test/ent"
	"github.com/hotcounter/hotcounter/integration_test/ent/reel"
)

// TestEntAutoSlotsWidenAViralReelAndKeepColdOnesOnOneRow: a counter
// declared AutoSlots widens past one row (never past 16) for a reel that
// 32 writers play at once, counting every play, and keeps one row for
// reels played a few times by writers that never play one reel at once.
func TestEntAutoSlotsWidenAViralReelAndKeepColdOnesOnOneRow(t *testing.T) {
	eachEnt(t, func(t *testing.T, e *entEnv) {
		ctx, c := context.Background(), e.client
		viral := c.Reel.Create().SetTitle("viral").SaveX(ctx)
		writers, _ := writersFor(e.kind)
		each := 20 // a width is learned within a few dozen statements
		done := hammer(t, writers, each, func() error { return c.Reel.UpdateOneID(viral.ID).AddPlays(1).Exec(ctx) })
		if got := c.Reel.GetX(ctx, viral.ID).Plays; got != done || done != int64(writers*each) {
			t.Fatalf("plays %d after %d of %d increments", got, done, writers*each)
		}
		if rows := rawInt(t, e.db, "SELECT COUNT(*) FROM reel_plays_slots WHERE reel_id = ?", viral.ID); rows < 2 || rows > 16 {
			t.Fatalf("%d slot rows after %d writers at once: want it widened, to at most 16", rows, writers)
		}

		cold := c.Reel.CreateBulk(func() []*ent.ReelCreate {
			out := make([]*ent.ReelCreate, 100)
			for i := range out {
				out[i] = c.Reel.Create().SetTitle("cold")
			}
			return out
		}()...).SaveX(ctx)
		var wg sync.WaitGroup
		for w := range 4 { // 4 writers, each its own reels
			wg.Go(func() {
				for i := w; i < len(cold); i += 4 {
					for range 1 + i%5 {
						if err := c.Reel.UpdateOneID(cold[i].ID).AddPlays(1).Exec(ctx); err != nil {
							t.Error(err)
							return
						}
					}
				}
			})
		}
		wg.Wait()
		for i, r := range c.Reel.Query().Where(reel.Title("cold")).Order(ent.Asc(reel.FieldID)).AllX(ctx) {
			if r.Plays != int64(1+i%5) {
				t.Fatalf("cold reel %d: plays %d, want %d", i, r.Plays, 1+i%5)
			}
		}
		if n := rawInt(t, e.db, "SELECT COUNT(*) FROM reel_plays_slots WHERE reel_id <> ?", viral.ID); n != int64(len(cold)) {
			t.Fatalf("%d slot rows for %d cold reels, want one each", n, len(cold))
		}
	}, pool(writersPool))
}
