package integration_test

import (
	"fmt"
	"testing"

	"github.com/hotcounter/hotcounter/gormcounter"
	"gorm.io/gorm"
)

// Every query shape reads a counter's exact value, the same on every
// database: a sum counter (likes, no column) in Where, Order, Group,
// Pluck, Count, Select, Scan and maps, with and without Live and Joins; a
// rollup counter (views) by its column in a plain query and by its exact
// value under Live.
func TestEveryQueryShapeReadsTheExactValue(t *testing.T) {
	eachDB(t, func(t *testing.T, e *env) {
		db := e.db
		must(t, migrateAll(db))
		author := Author{Name: "a"}
		must(t, db.Create(&author).Error)
		// likes 3, 1, 2, 2 (in slot rows); views pending 30, 10, 20, 20 (the column holds 0).
		var posts []Post
		for i, likes := range []int64{3, 1, 2, 2} {
			p := Post{Title: fmt.Sprint("p", i), AuthorID: &author.ID}
			must(t, db.Create(&p).Error)
			must(t, gormcounter.Increment(db.Model(&p), "Likes", likes).Error)
			must(t, gormcounter.Increment(db.Model(&p), "Views", 10*likes).Error)
			posts = append(posts, p)
		}
		a, b, c, d := posts[0].ID, posts[1].ID, posts[2].ID, posts[3].ID
		ids := func(ps []Post) []uint {
			out := []uint{}
			for _, p := range ps {
				out = append(out, p.ID)
			}
			return out
		}
		live := db.Clauses(gormcounter.Live).Session(&gorm.Session{})
		check := func(shape string, got, want any) {
			t.Helper()
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("%s: got %v, want %v", shape, got, want)
			}
		}
		find := func(shape string, q *gorm.DB, want []uint) {
			t.Helper()
			var ps []Post
			if err := q.Find(&ps).Error; err != nil {
				t.Errorf("%s: %v", shape, err)
				return
			}
			check(shape, ids(ps), want)
		}

		find(`Order("likes desc, id")`, db.Order("likes desc, id"), []uint{a, c, d, b})
		find(`Live, Order("likes desc, id")`, live.Order("likes desc, id"), []uint{a, c, d, b})
		find(`Joins("Author"), Order("likes desc, posts.id")`, db.Joins("Author").Order("likes desc, posts.id"), []uint{a, c, d, b})
		find(`Order("posts.likes"), Order("id")`, db.Order("posts.likes").Order("id"), []uint{b, c, d, a})
		find(`Where("likes > ?", 1)`, db.Where("likes > ?", 1).Order("id"), []uint{a, c, d})
		find(`Live, Where("likes > ?", 1)`, live.Where("likes > ?", 1).Order("id"), []uint{a, c, d})
		find(`Joins("Author"), Where("posts.likes = ?", 2)`, db.Joins("Author").Where("posts.likes = ?", 2).Order("posts.id"), []uint{c, d})
		find(`Where(&Post{Likes: 3})`, db.Where(&Post{Likes: 3}), []uint{a})
		find(`Where(map likes 1)`, db.Where(map[string]any{"likes": 1}), []uint{b})
		find(`Not("likes = ?", 2)`, db.Not("likes = ?", 2).Order("id"), []uint{a, b})
		find(`Order("views desc") (the column: all 0)`, db.Order("views desc, id"), []uint{a, b, c, d})
		find(`Live, Order("views desc, id")`, live.Order("views desc, id"), []uint{a, c, d, b})
		find(`Where("views > ?", 15) (the column)`, db.Where("views > ?", 15), []uint{})
		find(`Live, Where("views > ?", 15)`, live.Where("views > ?", 15).Order("id"), []uint{a, c, d})

		var n int64
		must(t, db.Model(&Post{}).Where("likes >= ?", 2).Count(&n).Error)
		check(`Where("likes >= ?", 2).Count`, n, 3)

		var likes []int64
		must(t, db.Model(&Post{}).Order("id").Pluck("likes", &likes).Error)
		check(`Pluck("likes")`, likes, []int64{3, 1, 2, 2})
		var views []int64
		must(t, live.Model(&Post{}).Order("id").Pluck("views", &views).Error)
		check(`Live, Pluck("views")`, views, []int64{30, 10, 20, 20})

		var maps []map[string]any
		must(t, db.Model(&Post{}).Order("id").Find(&maps).Error)
		got := []int64{}
		for _, m := range maps {
			v, _ := toInt(m["likes"])
			got = append(got, v)
		}
		check(`Find(&maps)`, got, []int64{3, 1, 2, 2})

		var sums []PostSummary
		must(t, db.Model(&Post{}).Order("id").Scan(&sums).Error)
		got = got[:0]
		for _, s := range sums {
			got = append(got, s.Likes)
		}
		check(`Scan(&[]PostSummary{})`, got, []int64{3, 1, 2, 2})

		var selected []PostSummary
		must(t, db.Model(&Post{}).Select("id", "likes").Order("id").Scan(&selected).Error)
		got = got[:0]
		for _, s := range selected {
			got = append(got, s.Likes)
		}
		check(`Select("id", "likes").Scan`, got, []int64{3, 1, 2, 2})

		type group struct {
			Likes int64
			N     int64
		}
		var groups []group
		must(t, db.Model(&Post{}).Select("likes, COUNT(*) AS n").Group("likes").Order("likes").Scan(&groups).Error)
		check(`Group("likes")`, groups, []group{{1, 1}, {2, 2}, {3, 1}})

		// An update's conditions read the value too.
		must(t, gormcounter.Increment(db.Model(&Post{}).Where("likes = ?", 2), "Likes", 10).Error)
		must(t, db.Model(&Post{}).Order("id").Pluck("likes", &likes).Error)
		check(`an Increment where likes = 2`, likes, []int64{3, 1, 12, 12})
	})
}

func toInt(v any) (int64, bool) {
	switch n := v.(type) {
	case int64:
		return n, true
	case int32:
		return int64(n), true
	case int:
		return int64(n), true
	case float64:
		return int64(n), true
	case []byte:
		var x int64
		_, err := fmt.Sscan(string(n), &x)
		return x, err == nil
	case string:
		var x int64
		_, err := fmt.Sscan(n, &x)
		return x, err == nil
	}
	return 0, false
}
