package integration_test

import (
	"context"
	"sync"
	"testing"

	"github.com/hotcounter/hotcounter/entcounter"
	"github.com/hotcounter/hotcounter/gormcounter"
	"github.com/hotcounter/hotcounter/integration_test/entversions/remarked"
	"github.com/hotcounter/hotcounter/integration_test/entversions/remarkedkind"
	"github.com/hotcounter/hotcounter/integration_test/entversions/remarkedkind/remark"
	_ "github.com/hotcounter/hotcounter/integration_test/entversions/remarkedkind/runtime"
)

// RackOpen and RackClosed are two releases of one model: the same count of
// a rack's boxes, first of the open ones, then of the closed ones.
type RackOpen struct {
	ID    uint
	Boxes int64     `gorm:"counter:counts=Items,where=status = 'open'"`
	Items []RackBox `gorm:"foreignKey:RackID"`
}

func (RackOpen) TableName() string { return "racks" }

type RackClosed struct {
	ID    uint
	Boxes int64     `gorm:"counter:counts=Items,where=status = 'closed'"`
	Items []RackBox `gorm:"foreignKey:RackID"`
}

func (RackClosed) TableName() string { return "racks" }

// RackBox is a box on a rack.
type RackBox struct {
	ID     uint
	RackID uint
	Status string `gorm:"size:16"`
}

// TestAMigrationRecountsACountWhoseDefinitionChanged: a release that
// changes a count's condition (GORM's where=, ent's Where) replaces its
// triggers, and the migration recounts it: the counts held were counted
// by the old condition. Then writers' rows count by the new one. Both
// ORMs, every database.
func TestAMigrationRecountsACountWhoseDefinitionChanged(t *testing.T) {
	t.Run("gorm", func(t *testing.T) {
		eachDB(t, func(t *testing.T, e *env) {
			must(t, e.db.AutoMigrate(&RackOpen{}, &RackBox{}))
			r := RackOpen{}
			must(t, e.db.Create(&r).Error)
			for _, s := range []string{"open", "open", "closed"} {
				must(t, e.db.Create(&RackBox{RackID: r.ID, Status: s}).Error)
			}
			var open RackOpen
			must(t, e.db.First(&open, r.ID).Error)
			if open.Boxes != 2 {
				t.Fatalf("open boxes %d, want 2", open.Boxes)
			}
			// The next release is another process: its plugin knows only
			// the new declaration.
			next := withPlugin(t, e, gormcounter.Config{})
			must(t, next.AutoMigrate(&RackClosed{}, &RackBox{}))
			var closed RackClosed
			must(t, next.First(&closed, r.ID).Error)
			if closed.Boxes != 1 {
				t.Fatalf("after the release that counts closed boxes: %d, want 1 (recounted by the new condition)", closed.Boxes)
			}
			var wg sync.WaitGroup
			for i := range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					status := []string{"open", "closed"}[i%2]
					for range 5 {
						if err := next.Create(&RackBox{RackID: r.ID, Status: status}).Error; err != nil {
							t.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			must(t, next.First(&closed, r.ID).Error)
			if closed.Boxes != 1+20 {
				t.Fatalf("closed boxes %d after 20 more closed and 20 open, want 21", closed.Boxes)
			}
		})
	})
	t.Run("ent", func(t *testing.T) {
		eachDB(t, func(t *testing.T, e *env) {
			ctx := context.Background()
			drv := entDriverSending(e.kind, openPool(t, e, 4), func(string) {})
			v1 := remarked.NewClient(remarked.Driver(drv))
			must(t, oneMigrationAtATime(func() error { return v1.Schema.Create(ctx, entcounter.WithCounters(v1)) }))
			reel := v1.Reel.Create().SaveX(ctx)
			for _, kind := range []bool{true, true, false} {
				v1.Remark.Create().SetReelID(reel.ID).SetKind(kind).ExecX(ctx)
			}
			if got := v1.Reel.GetX(ctx, reel.ID).RemarkCount; got != 3 {
				t.Fatalf("remarks %d, want 3", got)
			}
			v2 := remarkedkind.NewClient(remarkedkind.Driver(drv))
			must(t, oneMigrationAtATime(func() error { return v2.Schema.Create(ctx, entcounter.WithCounters(v2)) }))
			if got, err := v2.Reel.Get(ctx, reel.ID); err != nil || got.RemarkCount != 2 {
				t.Fatalf("after the release that counts remarks of the kind: %+v, %v; want 2 (recounted by the new condition)", got, err)
			}
			var wg sync.WaitGroup
			for i := range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range 5 {
						if err := v2.Remark.Create().SetReelID(reel.ID).SetKind(i%2 == 0).Exec(ctx); err != nil {
							t.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			has := v2.Remark.Query().Where(remark.Kind(true)).CountX(ctx)
			if got := v2.Reel.GetX(ctx, reel.ID).RemarkCount; got != int64(has) || has != 2+20 {
				t.Fatalf("remarks of the kind %d, the reel counts %d; want 22", has, got)
			}
		})
	})
}
