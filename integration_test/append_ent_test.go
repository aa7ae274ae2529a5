package integration_test

import (
	"context"
	"testing"

	"github.com/hotcounter/hotcounter/entcounter"
	"github.com/hotcounter/hotcounter/gormcounter"
)

// Append counters through ent: every increment a delta row, exact live
// reads, rollup folds them all, SetX sets the total; GORM reads the same.
func TestEntAppend(t *testing.T) {
	parallel(t)
	eachEnt(t, func(t *testing.T, e *entEnv) {
		ctx := context.Background()
		c := e.client
		s := c.Story.Create().SetTitle("s").SaveX(ctx)
		writers, each := writersFor(e.kind)
		done := hammer(t, writers, each, func() error { return c.Story.UpdateOneID(s.ID).AddClaps(1).Exec(ctx) })
		if n := rawInt(t, e.db, "SELECT COUNT(*) FROM story_claps_deltas"); n != done {
			t.Fatalf("%d delta rows after %d increments", n, done)
		}
		if got := c.Story.GetX(entcounter.WithLive(ctx), s.ID); got.Claps != done {
			t.Fatalf("live claps=%d, want %d", got.Claps, done)
		}
		must(t, gormcounter.Increment(e.db.Model(&Story{ID: uint(s.ID)}), "Claps", 3).Error)
		must(t, entcounter.RollupPass(ctx, c))
		if got := c.Story.GetX(ctx, s.ID); got.Claps != done+3 {
			t.Fatalf("after rollup claps=%d, want %d", got.Claps, done+3)
		}
		if n := rawInt(t, e.db, "SELECT COUNT(*) FROM story_claps_deltas"); n != 0 {
			t.Fatalf("rollup left %d delta rows", n)
		}
		c.Story.UpdateOneID(s.ID).AddClaps(2).ExecX(ctx)
		c.Story.UpdateOneID(s.ID).SetClaps(7).ExecX(ctx)
		var gs Story
		must(t, e.db.Clauses(gormcounter.Live).First(&gs, s.ID).Error)
		if gs.Claps != 7 {
			t.Fatalf("after SetClaps(7) GORM reads %d", gs.Claps)
		}
	}, pool(writersPool))
}
