package integration_test

import (
	"context"
	"testing"

	"github.com/hotcounter/hotcounter/entcounter"
	"github.com/hotcounter/hotcounter/integration_test/ent/fandom"
	"github.com/hotcounter/hotcounter/integration_test/ent/rating"
)

// TestEntCountsThroughEdgeSchemas: counts of the rows of an edge schema
// (ent's edge.Through), one with a composite id (Fandom) and one with an
// id of its own and a column a condition reads (Rating), declared on
// either side by the M2M edge or by the O2M edge ent adds for the edge
// schema, follow every way ent writes those rows: the M2M edge setters of
// both sides, the edge schema's own creates, updates and deletes. After
// each step every count equals what ent's own query counts, and a recount
// changes nothing. Triggers keep them, on every database.
func TestEntCountsThroughEdgeSchemas(t *testing.T) {
	eachDB(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		ee := withEnt(t, e, false)
		c := ee.client
		must(t, entMigrateOnly(ctx, c, []string{"films", "viewers"}, entcounter.WithCounters(c)))
		f1, f2 := c.Film.Create().SaveX(ctx).ID, c.Film.Create().SaveX(ctx).ID
		v1, v2, v3 := c.Viewer.Create().SaveX(ctx).ID, c.Viewer.Create().SaveX(ctx).ID, c.Viewer.Create().SaveX(ctx).ID
		check := func(step string) {
			t.Helper()
			for _, id := range []int{f1, f2} {
				f := c.Film.GetX(ctx, id)
				want := [3]int{f.QueryFans().CountX(ctx), f.QueryRatings().CountX(ctx), f.QueryRatings().Where(rating.ScoreGTE(4)).CountX(ctx)}
				if got := [3]int{int(f.FanCount), int(f.RatingCount), int(f.HighCount)}; got != want {
					t.Errorf("after %s: film %d counts fans, ratings, high ratings %v; ent's queries %v", step, id, got, want)
				}
			}
			for _, id := range []int{v1, v2, v3} {
				v := c.Viewer.GetX(ctx, id)
				want := [2]int{v.QueryFandoms().CountX(ctx), v.QueryRated().CountX(ctx)}
				if got := [2]int{int(v.FilmCount), int(v.RatedCount)}; got != want {
					t.Errorf("after %s: viewer %d counts films, rated %v; ent's queries %v", step, id, got, want)
				}
			}
		}
		c.Film.UpdateOneID(f1).AddFanIDs(v1, v2, v3).ExecX(ctx)
		c.Viewer.UpdateOneID(v1).AddFilmIDs(f2).ExecX(ctx)
		check("the M2M edge setters of both sides add rows")
		c.Fandom.Create().SetFilmID(f2).SetViewerID(v2).ExecX(ctx)
		c.Rating.CreateBulk(
			c.Rating.Create().SetFilmID(f1).SetViewerID(v1).SetScore(5),
			c.Rating.Create().SetFilmID(f1).SetViewerID(v2).SetScore(2),
			c.Rating.Create().SetFilmID(f2).SetViewerID(v3).SetScore(4),
		).ExecX(ctx)
		c.Film.UpdateOneID(f2).AddRaterIDs(v1).ExecX(ctx) // a rating of the default score
		check("the edge schemas' own creates, and a setter, add rows")
		c.Rating.Update().Where(rating.FilmID(f1), rating.ViewerID(v2)).SetScore(4).ExecX(ctx)
		c.Rating.Update().Where(rating.FilmID(f2), rating.ViewerID(v3)).SetScore(1).ExecX(ctx)
		check("updates of the rating the condition reads")
		c.Film.UpdateOneID(f1).RemoveFanIDs(v2).ExecX(ctx)
		c.Viewer.UpdateOneID(v1).ClearRated().ExecX(ctx)
		c.Fandom.Delete().Where(fandom.FilmID(f2), fandom.ViewerID(v2)).ExecX(ctx)
		check("setters and the edge schema's own delete remove rows")
		for _, recount := range []func() (int64, error){
			func() (int64, error) { return c.Film.RecountFanCount(ctx) },
			func() (int64, error) { return c.Film.RecountRatingCount(ctx) },
			func() (int64, error) { return c.Film.RecountHighCount(ctx) },
			func() (int64, error) { return c.Viewer.RecountFilmCount(ctx) },
			func() (int64, error) { return c.Viewer.RecountRatedCount(ctx) },
		} {
			if changed, err := recount(); err != nil || changed != 0 {
				t.Errorf("a recount changed %d counts (%v), want none", changed, err)
			}
		}
	})
}
