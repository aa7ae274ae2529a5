package integration_test

import (
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/hotcounter/hotcounter/gormcounter"
	"gorm.io/gorm"
)

// TestConcurrentIncrementsLoseNothing: 32 x 25 on one post, in both ORMs,
// with concurrent increments combined (the default) and with every
// increment its own statement (InFlight < 0), so that 32 statements race
// for the slot rows.
func TestConcurrentIncrementsLoseNothing(t *testing.T) {
	eachORM(t, func(t *testing.T, o counterORM) {
		for name, o := range map[string]counterORM{"combined": o, "alone": o.with(t, settings{InFlight: -1})} {
			id := o.create(t, modelPost)
			writers, each := writersFor(o.kind())
			want := int64(writers * each)
			for _, field := range []string{"likes", "views"} {
				done := hammer(t, writers, each, func() error { return o.increment(modelPost, id, field, 1) })
				if done != want {
					t.Fatalf("%s, %s: %d of %d increments succeeded", name, field, done, want)
				}
			}
			if likes, views := exactly(t, o, modelPost, id, "likes"), exactly(t, o, modelPost, id, "views"); likes != want || views != want {
				t.Fatalf("%s: after %d x %d increments: likes=%d views=%d, want %d", name, writers, each, likes, views, want)
			}
			if _, sum := slotRows(t, o.db(), "post_likes_slots", "post_id", id); sum != want {
				t.Fatalf("%s: slot table sum %d, want %d", name, sum, want)
			}
		}
	}, pool(writersPool))
}

// TestFirstUseFromManyGoroutines starts 32 goroutines on models this *gorm.DB
// has never seen (another one migrated them), so that settling the counter
// fields of the shared schema races with every kind of statement. Run with
// -race.
func TestFirstUseFromManyGoroutines(t *testing.T) {
	parallel(t)
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
	exclusive(t) // it counts the goroutines of the process
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
