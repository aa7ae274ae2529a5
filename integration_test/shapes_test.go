package integration_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/hotcounter/hotcounter/gormcounter"
	"gorm.io/gorm"
)

// The query shapes GORM has beyond those both ORMs share
// (TestQueryShapesReadTheExactValueInBothORMs) read a counter's exact
// value too, on every database: with Joins, qualified by the table, in
// struct and map conditions and Not, Live predicates, Pluck under Live,
// maps, and Scan into another struct.
func TestGormQueryShapesReadTheExactValue(t *testing.T) {
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

		find(`Joins("Author"), Order("likes desc, posts.id")`, db.Joins("Author").Order("likes desc, posts.id"), []uint{a, c, d, b})
		find(`Order("posts.likes"), Order("id")`, db.Order("posts.likes").Order("id"), []uint{b, c, d, a})
		find(`Live, Where("likes > ?", 1)`, live.Where("likes > ?", 1).Order("id"), []uint{a, c, d})
		find(`Joins("Author"), Where("posts.likes = ?", 2)`, db.Joins("Author").Where("posts.likes = ?", 2).Order("posts.id"), []uint{c, d})
		find(`Where(&Post{Likes: 3})`, db.Where(&Post{Likes: 3}), []uint{a})
		find(`Where(map likes 1)`, db.Where(map[string]any{"likes": 1}), []uint{b})
		find(`Not("likes = ?", 2)`, db.Not("likes = ?", 2).Order("id"), []uint{a, b})

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

// A dry run of a counter write (gorm.Session{DryRun: true}, db.ToSQL)
// shows the statements it would send, on every database, and sends none,
// also in a process that has not learned where the counter lives.
// A read whose rows decide the writes returns the rows the write names by
// key, or none.
func TestDryRunShowsTheCounterStatementsAndSendsNone(t *testing.T) {
	eachDB(t, func(t *testing.T, e *env) {
		db := e.db
		must(t, migrateAll(db))
		post := Post{Title: "p", Likes: 4, Views: 4}
		must(t, db.Create(&post).Error)
		must(t, db.AutoMigrate(&Product{}))
		item := Product{Name: "i", Stock: 10}
		must(t, db.Create(&item).Error)
		before := func() [3]int64 {
			return [3]int64{rawInt(t, db, "SELECT COALESCE(SUM(n), 0) FROM post_likes_slots"),
				rawInt(t, db, "SELECT COUNT(*) FROM post_likes_slots"), rawInt(t, db, "SELECT COALESCE(SUM(n), 0) FROM product_stock_slots")}
		}
		was := before()
		dry := db.Session(&gorm.Session{DryRun: true})
		for name, run := range map[string]func() *gorm.DB{
			"UpdateColumn of likes + 1": func() *gorm.DB {
				return dry.Model(&post).UpdateColumn("likes", gorm.Expr("likes + ?", 1))
			},
			"Increment": func() *gorm.DB { return gormcounter.Increment(dry.Model(&post), "Likes", 2) },
			"Increment by condition": func() *gorm.DB {
				return gormcounter.Increment(dry.Model(&Post{}).Where("title = ?", "p"), "Likes", 2)
			},
			"Update to a value": func() *gorm.DB { return dry.Model(&post).Update("likes", 9) },
			"Updates of the title and likes": func() *gorm.DB {
				return dry.Model(&post).Updates(map[string]any{"title": "q", "likes": gorm.Expr("likes + ?", 1)})
			},
			"Take": func() *gorm.DB { return gormcounter.Take(dry.Model(&item), "Stock", 1) },
		} {
			res := run()
			if res.Error != nil {
				t.Errorf("%s in a dry run: %v", name, res.Error)
				continue
			}
			sql := res.Statement.SQL.String()
			table := "post_likes_slots"
			switch {
			case name == "Take":
				table = "product_stock_slots"
			case name == "Increment by condition" && e.kind == my:
				// MariaDB reads the keys first and writes each key's slot
				// rows: a dry run reads nothing, so it shows the read.
				table = "FROM `posts` WHERE title = ?"
			}
			if !strings.Contains(sql, table) {
				t.Errorf("%s in a dry run shows %q, which writes no %s", name, sql, table)
			}
		}
		// A process that has not yet learned where the counter's values
		// live (a new plugin; the same holds once what it learned is older
		// than engine.AbsentRecheck) shows the assignment as migrated, and
		// reads nothing to learn it.
		fresh := sharedGorm(t, e, gormcounter.Config{}).Session(&gorm.Session{DryRun: true})
		if res := fresh.Model(&post).Update("likes", 9); res.Error != nil || !strings.Contains(res.Statement.SQL.String(), "post_likes_slots") {
			t.Errorf("a dry run of an assignment by a new plugin: %v, shows %q", res.Error, res.Statement.SQL.String())
		}
		shown := db.ToSQL(func(tx *gorm.DB) *gorm.DB { return gormcounter.Increment(tx.Model(&post), "Likes", 1) })
		if !strings.Contains(shown, "post_likes_slots") {
			t.Errorf("ToSQL of an Increment: %q", shown)
		}
		if now := before(); now != was {
			t.Errorf("dry runs changed the counters: %v, before %v", now, was)
		}
		var got Post
		must(t, db.First(&got, post.ID).Error)
		if got.Title != "p" || got.Likes != 4 {
			t.Errorf("dry runs changed the post: %+v", got)
		}
	})
}

// A dry run of a load (gorm.Session{DryRun: true}, db.ToSQL) shows a
// statement that returns the counters' totals, as the load itself reads
// them, also in a process that has not learned where the counter's values
// live (a new plugin; the same holds once what it learned is older than
// engine.AbsentRecheck): run by hand, it returns the rows with their
// totals. Before, such a dry run probed the database through the dry
// session, found nothing and showed the load without its totals. Every
// database.
func TestDryRunOfALoadShowsAStatementThatReturnsTheTotals(t *testing.T) {
	eachDB(t, func(t *testing.T, e *env) {
		db := e.db
		must(t, migrateAll(db))
		want := map[int64]int64{}
		var ids []uint
		for i := range 3 {
			p := Post{Title: "p"}
			must(t, db.Create(&p).Error)
			must(t, gormcounter.Increment(db.Model(&p), "Likes", int64(i+1)).Error)
			want[int64(p.ID)] = int64(i + 1)
			ids = append(ids, p.ID)
		}
		pool, err := db.DB()
		must(t, err)
		for name, load := range map[string]func(tx *gorm.DB) *gorm.DB{
			"by key":                  func(tx *gorm.DB) *gorm.DB { return tx.Find(&[]Post{}, ids) },
			"by a condition":          func(tx *gorm.DB) *gorm.DB { return tx.Where("title = ?", "p").Find(&[]Post{}) },
			"filtered by its counter": func(tx *gorm.DB) *gorm.DB { return tx.Where("likes >= ?", 1).Find(&[]Post{}) },
		} {
			fresh := sharedGorm(t, e, gormcounter.Config{}).Session(&gorm.Session{DryRun: true})
			st := load(fresh).Statement
			if st.Error != nil {
				t.Errorf("%s: the dry run: %v", name, st.Error)
				continue
			}
			got, err := queryLoad(pool.Query(st.SQL.String(), st.Vars...))
			if err != nil {
				t.Errorf("%s: the dry run's statement: %v\n%s", name, err, st.SQL.String())
				continue
			}
			if len(got) != len(want) {
				t.Errorf("%s: the dry run's statement returned %d rows, want %d", name, len(got), len(want))
			}
			for _, r := range got {
				if r.likes != want[r.id] {
					t.Errorf("%s: the dry run's statement returned post %d with %d likes, want %d\n%s", name, r.id, r.likes, want[r.id], st.SQL.String())
				}
			}
		}
	})
}
