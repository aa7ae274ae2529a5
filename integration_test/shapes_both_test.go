package integration_test

import (
	"context"
	"fmt"
	"sort"
	"testing"

	"github.com/hotcounter/hotcounter/entcounter"
	"github.com/hotcounter/hotcounter/gormcounter"
	"github.com/hotcounter/hotcounter/integration_test/ent"
	"github.com/hotcounter/hotcounter/integration_test/ent/post"
	"gorm.io/gorm"
)

// The query shapes both ORMs have read a counter's exact value, the same in
// GORM and ent on every database: a sum counter (likes, no column) in a
// predicate, an order, a count, a select of it alone or beside the key, a
// group by; a rollup counter (views) by its column in a plain query and by
// its exact value under Live; an update whose condition names the counter.
// Written once against shapeFront.

// shapeFront is one ORM's way to ask for each shape. ids lists posts in
// the order asked (ties by id).
type shapeFront interface {
	seed(t *testing.T, likes []int64) []int // likes in slot rows, views = 10 x likes pending
	byLikesDesc(t *testing.T, live bool) []int
	likesAbove(t *testing.T, n int64) []int
	countLikesAtLeast(t *testing.T, n int64) int64
	likesOnly(t *testing.T) []int64 // ordered by id
	idAndLikes(t *testing.T) [][2]int64
	groupsByLikes(t *testing.T) [][2]int64 // (likes, posts), by likes
	byViewsDesc(t *testing.T, live bool) []int
	viewsAbove(t *testing.T, n int64, live bool) []int
	addLikesWhereLikes(t *testing.T, eq, delta int64)
}

func TestQueryShapesReadTheExactValueInBothORMs(t *testing.T) {
	parallel(t)
	for _, orm := range []string{"gorm", "ent"} {
		t.Run(orm, func(t *testing.T) {
			eachDB(t, func(t *testing.T, e *env) {
				var f shapeFront
				if orm == "gorm" {
					must(t, migrateAll(e.db))
					f = gormShapes{e.db}
				} else {
					f = entShapes{withEnt(t, e, true).client}
				}
				ids := f.seed(t, []int64{3, 1, 2, 2})
				a, b, c, d := ids[0], ids[1], ids[2], ids[3]
				check := func(shape string, got, want any) {
					t.Helper()
					if fmt.Sprint(got) != fmt.Sprint(want) {
						t.Errorf("%s: got %v, want %v", shape, got, want)
					}
				}
				check("order by likes desc", f.byLikesDesc(t, false), []int{a, c, d, b})
				check("Live, order by likes desc", f.byLikesDesc(t, true), []int{a, c, d, b})
				check("likes > 1", f.likesAbove(t, 1), []int{a, c, d})
				check("count of likes >= 2", f.countLikesAtLeast(t, 2), 3)
				check("select likes", f.likesOnly(t), []int64{3, 1, 2, 2})
				check("select id, likes", f.idAndLikes(t), [][2]int64{{int64(a), 3}, {int64(b), 1}, {int64(c), 2}, {int64(d), 2}})
				check("group by likes", f.groupsByLikes(t), [][2]int64{{1, 1}, {2, 2}, {3, 1}})
				check("order by views desc (the column: all 0)", f.byViewsDesc(t, false), []int{a, b, c, d})
				check("Live, order by views desc", f.byViewsDesc(t, true), []int{a, c, d, b})
				check("views > 15 (the column)", f.viewsAbove(t, 15, false), []int{})
				check("Live, views > 15", f.viewsAbove(t, 15, true), []int{a, c, d})
				f.addLikesWhereLikes(t, 2, 10)
				check("likes after adding 10 where likes = 2", f.likesOnly(t), []int64{3, 1, 12, 12})
			})
		})
	}
}

// gormShapes asks through GORM.
type gormShapes struct{ db *gorm.DB }

func (g gormShapes) seed(t *testing.T, likes []int64) []int {
	var ids []int
	for i, l := range likes {
		p := Post{Title: fmt.Sprint("p", i)}
		must(t, g.db.Create(&p).Error)
		must(t, gormcounter.Increment(g.db.Model(&p), "Likes", l).Error)
		must(t, gormcounter.Increment(g.db.Model(&p), "Views", 10*l).Error)
		ids = append(ids, int(p.ID))
	}
	return ids
}

func (g gormShapes) q(live bool) *gorm.DB {
	if live {
		return g.db.Clauses(gormcounter.Live)
	}
	return g.db
}

func (g gormShapes) ids(t *testing.T, q *gorm.DB) []int {
	t.Helper()
	var ps []Post
	must(t, q.Find(&ps).Error)
	out := []int{}
	for _, p := range ps {
		out = append(out, int(p.ID))
	}
	return out
}

func (g gormShapes) byLikesDesc(t *testing.T, live bool) []int {
	return g.ids(t, g.q(live).Order("likes desc, id"))
}

func (g gormShapes) likesAbove(t *testing.T, n int64) []int {
	return g.ids(t, g.db.Where("likes > ?", n).Order("id"))
}

func (g gormShapes) countLikesAtLeast(t *testing.T, n int64) int64 {
	var c int64
	must(t, g.db.Model(&Post{}).Where("likes >= ?", n).Count(&c).Error)
	return c
}

func (g gormShapes) likesOnly(t *testing.T) []int64 {
	var out []int64
	must(t, g.db.Model(&Post{}).Order("id").Pluck("likes", &out).Error)
	return out
}

func (g gormShapes) idAndLikes(t *testing.T) [][2]int64 {
	var rows []PostSummary
	must(t, g.db.Model(&Post{}).Select("id", "likes").Order("id").Scan(&rows).Error)
	out := [][2]int64{}
	for _, r := range rows {
		out = append(out, [2]int64{int64(r.ID), r.Likes})
	}
	return out
}

func (g gormShapes) groupsByLikes(t *testing.T) [][2]int64 {
	var rows []struct{ Likes, N int64 }
	must(t, g.db.Model(&Post{}).Select("likes, COUNT(*) AS n").Group("likes").Order("likes").Scan(&rows).Error)
	out := [][2]int64{}
	for _, r := range rows {
		out = append(out, [2]int64{r.Likes, r.N})
	}
	return out
}

func (g gormShapes) byViewsDesc(t *testing.T, live bool) []int {
	return g.ids(t, g.q(live).Order("views desc, id"))
}

func (g gormShapes) viewsAbove(t *testing.T, n int64, live bool) []int {
	return g.ids(t, g.q(live).Where("views > ?", n).Order("id"))
}

func (g gormShapes) addLikesWhereLikes(t *testing.T, eq, delta int64) {
	must(t, gormcounter.Increment(g.db.Model(&Post{}).Where("likes = ?", eq), "Likes", delta).Error)
}

// entShapes asks through ent.
type entShapes struct{ c *ent.Client }

func (w entShapes) ctx(live bool) context.Context {
	if live {
		return entcounter.WithLive(context.Background())
	}
	return context.Background()
}

func (w entShapes) seed(t *testing.T, likes []int64) []int {
	ctx := context.Background()
	var ids []int
	for i, l := range likes {
		p, err := w.c.Post.Create().SetTitle(fmt.Sprint("p", i)).Save(ctx)
		must(t, err)
		must(t, w.c.Post.UpdateOneID(p.ID).AddLikes(l).AddViews(10*l).Exec(ctx))
		ids = append(ids, p.ID)
	}
	return ids
}

func (w entShapes) byLikesDesc(t *testing.T, live bool) []int {
	ids, err := w.c.Post.Query().Order(ent.Desc(post.FieldLikes), ent.Asc(post.FieldID)).IDs(w.ctx(live))
	must(t, err)
	return ids
}

func (w entShapes) likesAbove(t *testing.T, n int64) []int {
	ps, err := w.c.Post.Query().Where(post.LikesGT(n)).Order(ent.Asc(post.FieldID)).All(context.Background())
	must(t, err)
	out := []int{}
	for _, p := range ps {
		out = append(out, p.ID)
	}
	return out
}

func (w entShapes) countLikesAtLeast(t *testing.T, n int64) int64 {
	c, err := w.c.Post.Query().Where(post.LikesGTE(n)).Count(context.Background())
	must(t, err)
	return int64(c)
}

func (w entShapes) likesOnly(t *testing.T) []int64 {
	vs, err := w.c.Post.Query().Order(ent.Asc(post.FieldID)).Select(post.FieldLikes).Ints(context.Background())
	must(t, err)
	out := []int64{}
	for _, v := range vs {
		out = append(out, int64(v))
	}
	return out
}

func (w entShapes) idAndLikes(t *testing.T) [][2]int64 {
	var rows []struct {
		ID    int   `json:"id"`
		Likes int64 `json:"likes"`
	}
	must(t, w.c.Post.Query().Order(ent.Asc(post.FieldID)).Select(post.FieldID, post.FieldLikes).Scan(context.Background(), &rows))
	out := [][2]int64{}
	for _, r := range rows {
		out = append(out, [2]int64{int64(r.ID), r.Likes})
	}
	return out
}

func (w entShapes) groupsByLikes(t *testing.T) [][2]int64 {
	var rows []struct {
		Likes int64 `json:"likes"`
		Count int64 `json:"count"`
	}
	must(t, w.c.Post.Query().GroupBy(post.FieldLikes).Aggregate(ent.Count()).Scan(context.Background(), &rows))
	out := [][2]int64{}
	for _, r := range rows {
		out = append(out, [2]int64{r.Likes, r.Count})
	}
	sort.Slice(out, func(i, j int) bool { return out[i][0] < out[j][0] })
	return out
}

func (w entShapes) byViewsDesc(t *testing.T, live bool) []int {
	ids, err := w.c.Post.Query().Order(ent.Desc(post.FieldViews), ent.Asc(post.FieldID)).IDs(w.ctx(live))
	must(t, err)
	return ids
}

func (w entShapes) viewsAbove(t *testing.T, n int64, live bool) []int {
	ids, err := w.c.Post.Query().Where(post.ViewsGT(n)).Order(ent.Asc(post.FieldID)).IDs(w.ctx(live))
	must(t, err)
	if ids == nil {
		ids = []int{}
	}
	return ids
}

func (w entShapes) addLikesWhereLikes(t *testing.T, eq, delta int64) {
	must(t, w.c.Post.Update().Where(post.Likes(eq)).AddLikes(delta).Exec(context.Background()))
}
