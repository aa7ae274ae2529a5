package integration_test

import (
	"context"
	"strings"
	"testing"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/hotcounter/hotcounter/gormcounter"
	"github.com/hotcounter/hotcounter/integration_test/ent/tag"
)

// Badge has a unique name for upserts to meet, a sum counter and a
// rollup counter.
type Badge struct {
	ID   uint
	Name string `gorm:"uniqueIndex;size:64"`
	Uses int64  `gorm:"counter"`
	Hits int64  `gorm:"counter:rollup"`
}

// TestAnUpsertsConflictUpdateOfASumCounterSaysWhatToDoInstead: an upsert
// whose conflict update adds to a sum counter (ent's
// OnConflict(...).AddUses, GORM's clause.OnConflict with
// gorm.Expr("uses + 1")) writes a column that does not exist: the error
// names model and field and says what to do, and nothing is written. A
// rollup counter has a column for it: ent adds to it (exact, but the row
// is locked as a plain UPDATE locks it); GORM refuses any counter in
// DoUpdates but the row's own value, and says so. Both ORMs, every
// database.
func TestAnUpsertsConflictUpdateOfASumCounterSaysWhatToDoInstead(t *testing.T) {
	named := func(t *testing.T, err error, counter string) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), counter) || !strings.Contains(err.Error(), "after the upsert") {
			t.Fatalf("an upsert adding to the sum counter %s: %v, want an error naming it and what to do instead", counter, err)
		}
	}
	t.Run("ent", func(t *testing.T) {
		parallel(t)
		eachEnt(t, func(t *testing.T, e *entEnv) {
			ctx := context.Background()
			c := e.client
			g := c.Tag.Create().SetName("go").SaveX(ctx)
			c.Tag.UpdateOneID(g.ID).AddUses(2).ExecX(ctx)
			named(t, c.Tag.Create().SetName("go").OnConflictColumns(tag.FieldName).AddUses(1).Exec(ctx), "Tag.uses")
			c.Tag.Create().SetName("go").OnConflictColumns(tag.FieldName).AddHits(3).ExecX(ctx)
			c.Tag.Create().SetName("go").OnConflictColumns(tag.FieldName).AddHits(4).ExecX(ctx)
			if got := c.Tag.GetX(ctx, g.ID); got.Uses != 2 || got.Hits != 7 {
				t.Fatalf("uses %d, hits %d; want 2 (the refused upsert wrote nothing) and 7", got.Uses, got.Hits)
			}
		}, entTables("tags", "badges"))
	})
	t.Run("gorm", func(t *testing.T) {
		eachDB(t, func(t *testing.T, e *env) {
			must(t, e.db.AutoMigrate(&Badge{}))
			l := Badge{Name: "go"}
			must(t, e.db.Create(&l).Error)
			must(t, gormcounter.Increment(e.db.Model(&l), "Uses", 2).Error)
			upsert := func(col string, n int) error {
				return e.db.Clauses(clause.OnConflict{Columns: []clause.Column{{Name: "name"}},
					DoUpdates: clause.Assignments(map[string]any{col: gorm.Expr(col+" + ?", n)})}).Create(&Badge{Name: "go"}).Error
			}
			named(t, upsert("uses", 1), "Badge.Uses")
			named(t, upsert("hits", 3), "Badge.Hits")
			var got Badge
			must(t, e.db.First(&got, l.ID).Error)
			if got.Uses != 2 || got.Hits != 0 {
				t.Fatalf("uses %d, hits %d; want 2 and 0 (the refused upserts wrote nothing)", got.Uses, got.Hits)
			}
		})
	})
}
