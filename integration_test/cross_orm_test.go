package integration_test

import (
	"context"
	"testing"

	"github.com/hotcounter/hotcounter/entcounter"
	"github.com/hotcounter/hotcounter/gormcounter"
	"github.com/hotcounter/hotcounter/integration_test/ent"
	_ "github.com/hotcounter/hotcounter/integration_test/ent/runtime"
	_ "github.com/jackc/pgx/v5/stdlib"
)

// TestWhatOneORMWritesTheOtherReadsExactly: one database, both ORMs, the same slot tables and rollup
// column: what one writes the other reads exactly.
func TestWhatOneORMWritesTheOtherReadsExactly(t *testing.T) {
	parallel(t)
	for _, k := range allKinds {
		for _, owner := range []string{"ent", "gorm"} {
			t.Run(string(k)+"/"+owner+" migrates", func(t *testing.T) {
				e := openEnt(t, k, owner == "ent", everyEntTable())
				ctx := context.Background()
				if owner == "gorm" {
					must(t, migrateAll(e.db))
				}
				gp := Post{Title: "from gorm"}
				must(t, e.db.Create(&gp).Error)
				ep := e.client.Post.Create().SetTitle("from ent").SaveX(ctx)

				for i := 0; i < 10; i++ {
					must(t, gormcounter.Increment(e.db.Model(&Post{ID: gp.ID}), "Likes", 1).Error)
					must(t, gormcounter.Increment(e.db.Model(&Post{ID: uint(ep.ID)}), "Views", 2).Error)
					e.client.Post.UpdateOneID(int(gp.ID)).AddViews(3).ExecX(ctx)
					e.client.Post.UpdateOneID(ep.ID).AddLikes(4).ExecX(ctx)
				}
				check := func(stage string) {
					t.Helper()
					byEnt := map[int]*ent.Post{}
					for _, p := range e.client.Post.Query().AllX(entcounter.WithLive(ctx)) {
						byEnt[p.ID] = p
					}
					var byGorm []Post
					must(t, e.db.Clauses(gormcounter.Live).Order("id").Find(&byGorm).Error)
					want := map[int][2]int64{int(gp.ID): {10, 30}, ep.ID: {40, 20}}
					for _, g := range byGorm {
						w, en := want[int(g.ID)], byEnt[int(g.ID)]
						if g.Likes != w[0] || g.Views != w[1] || en.Likes != w[0] || en.Views != w[1] {
							t.Fatalf("%s: post %d: gorm reads %d/%d, ent reads %d/%d, want %v", stage, g.ID, g.Likes, g.Views, en.Likes, en.Views, w)
						}
					}
				}
				check("pending")
				must(t, gormcounter.RollupPass(e.db, &Post{}))
				check("after GORM's rollup")
				e.client.Post.UpdateOneID(ep.ID).AddViews(5).ExecX(ctx)
				must(t, entcounter.RollupPass(ctx, e.client))
				if got := e.client.Post.GetX(ctx, ep.ID); got.Views != 25 {
					t.Fatalf("after ent's rollup views=%d, want 25", got.Views)
				}
			})
		}
	}
}
