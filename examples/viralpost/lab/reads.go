package lab

import (
	"context"
	"fmt"
	"slices"
	"time"

	"gorm.io/gorm"

	"github.com/hotcounter/hotcounter/gormcounter"
)

// ReadPlain reads the posts of the read side with no counter: the baseline.
type ReadPlain struct {
	ID    uint
	Title string
	Views int64
}

// TableName keeps the lab's tables apart from an application's.
func (ReadPlain) TableName() string { return "viral_read_posts" }

// ReadRollup reads the same posts with views as a rollup counter: the
// cached column, or column + pending slots with Live.
type ReadRollup struct {
	ID    uint
	Title string
	Views int64 `gorm:"counter:rollup"`
}

// TableName keeps the lab's tables apart from an application's.
func (ReadRollup) TableName() string { return "viral_read_posts" }

// ReadSum has likes as a sum counter: every load sums the slots.
type ReadSum struct {
	ID    uint
	Title string
	Likes int64 `gorm:"counter"`
}

// TableName keeps the lab's tables apart from an application's.
func (ReadSum) TableName() string { return "viral_sum_posts" }

// ReadResult is the cost of one kind of load.
type ReadResult struct {
	Posts   int     `json:"posts"`
	Variant string  `json:"variant"`
	Micros  float64 `json:"us_per_load"` // median over rounds
	VsPlain float64 `json:"vs_plain"`    // median of the per-round ratios
}

// readPosts is how many posts the read side creates and loads at most.
const readPosts = 100

// seedReads creates readPosts posts whose counters were each incremented 50
// times on random slots (so most slots hold a row, as on a post that was
// viral a moment ago), rolled up, and then incremented 5 more times, which
// stay pending for Live to add.
func seedReads(ctx context.Context, db *gorm.DB) ([]uint, error) {
	db = db.WithContext(ctx)
	if err := db.Migrator().DropTable(&ReadRollup{}, &ReadSum{}); err != nil {
		return nil, err
	}
	if err := db.AutoMigrate(&ReadRollup{}, &ReadSum{}); err != nil {
		return nil, err
	}
	rolled, summed := make([]ReadRollup, readPosts), make([]ReadSum, readPosts)
	for i := range readPosts {
		rolled[i].Title = fmt.Sprintf("post %d", i+1)
		summed[i].Title = rolled[i].Title
	}
	if err := db.Create(&rolled).Error; err != nil {
		return nil, err
	}
	if err := db.Create(&summed).Error; err != nil {
		return nil, err
	}
	ids := make([]uint, readPosts)
	for i := range ids {
		ids[i] = rolled[i].ID
		if summed[i].ID != rolled[i].ID {
			return nil, fmt.Errorf("read side: post ids differ between tables")
		}
	}
	bump := func(model any, field string, times int) error {
		for range times {
			if err := gormcounter.Increment(db.Model(model).Where("id IN ?", ids), field, 1).Error; err != nil {
				return err
			}
		}
		return nil
	}
	if err := bump(&ReadSum{}, "Likes", 50); err != nil {
		return nil, err
	}
	if err := bump(&ReadRollup{}, "Views", 50); err != nil {
		return nil, err
	}
	if err := gormcounter.RollupPass(db, &ReadRollup{}); err != nil {
		return nil, err
	}
	return ids, bump(&ReadRollup{}, "Views", 5)
}

// measureReads times loads of 1 and 100 posts: plain, sum-filled, rollup
// from the cached column, and rollup Live. The variants alternate within
// each round, and each figure is a median over rounds, because the machine
// is shared and noisy.
func measureReads(ctx context.Context, cfg Config, tg target) ([]ReadResult, error) {
	p, err := tg.openPool(cfg, false)
	if err != nil {
		return nil, err
	}
	defer p.sql.Close()
	ids, err := seedReads(ctx, p.db)
	if err != nil {
		return nil, fmt.Errorf("read side: seed: %w", err)
	}
	db := p.db.WithContext(ctx)
	live := db.Clauses(gormcounter.Live).Session(&gorm.Session{}) // reusable, as GORM requires
	lo, hi := ids[0], ids[len(ids)-1]
	type variant struct {
		name string
		load func(n int) error
	}
	find := func(db *gorm.DB, dest any, n int) error {
		if n == 1 {
			return db.Take(dest, lo).Error
		}
		return db.Where("id BETWEEN ? AND ?", lo, hi).Find(dest).Error
	}
	variants := []variant{
		{"plain", func(n int) error { var ps []ReadPlain; return find(db, &ps, n) }},
		{"sum", func(n int) error { var ps []ReadSum; return find(db, &ps, n) }},
		{"rollup", func(n int) error { var ps []ReadRollup; return find(db, &ps, n) }},
		{"rollup-live", func(n int) error { var ps []ReadRollup; return find(live, &ps, n) }},
	}
	const perRound = 30
	var out []ReadResult
	for _, n := range []int{1, readPosts} {
		times := make([][]float64, len(variants)) // µs per load, per round
		for round := range cfg.ReadRounds {
			for k := range variants {
				v := variants[(k+round)%len(variants)]
				i := (k + round) % len(variants)
				start := time.Now()
				for range perRound {
					if err := v.load(n); err != nil {
						return nil, fmt.Errorf("read side: %s of %d: %w", v.name, n, err)
					}
				}
				times[i] = append(times[i], float64(time.Since(start).Microseconds())/perRound)
			}
			if round == 0 { // the first round warms caches and statements up
				for i := range times {
					times[i] = times[i][:0]
				}
			}
		}
		for i, v := range variants {
			ratios := make([]float64, len(times[i]))
			for r := range ratios {
				ratios[r] = times[i][r] / times[0][r]
			}
			out = append(out, ReadResult{Posts: n, Variant: v.name, Micros: median(times[i]), VsPlain: median(ratios)})
		}
	}
	return out, nil
}

// median returns the median of xs, 0 for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
