package integration_test

import (
	"context"
	"fmt"
	"testing"

	entsql "entgo.io/ent/dialect/sql"

	"github.com/hotcounter/hotcounter/integration_test/ent/author"
	"github.com/hotcounter/hotcounter/integration_test/ent/post"
)

// TestAJoinedModelsCounterFiltersAndOrders: a condition or an order on the
// counter of a model the query reaches through a relation reads its exact
// value: GORM's Joins("Author") with Where and Order on Author.followers,
// and a Count of the same; ent's HasAuthorWith(author.FollowersGT) in a
// query and in an update, and an order by the author's followers
// (ByAuthorField). Four posts whose authors have 2, 3, 4 and 5
// followers (in slot rows, no column), every database.
func TestAJoinedModelsCounterFiltersAndOrders(t *testing.T) {
	parallel(t)
	t.Run("gorm", func(t *testing.T) {
		eachDB(t, func(t *testing.T, e *env) {
			db := e.db
			posts := seed(t, db, 4) // authors' followers i+2
			want := func(idx ...int) string {
				var ids []uint
				for _, i := range idx {
					ids = append(ids, posts[i].ID)
				}
				return fmt.Sprint(ids)
			}
			ids := func(ps []Post) string {
				var out []uint
				for _, p := range ps {
					out = append(out, p.ID)
				}
				return fmt.Sprint(out)
			}
			var ps []Post
			must(t, db.Joins("Author").Where("Author.followers > ?", 3).Order("posts.id").Find(&ps).Error)
			if ids(ps) != want(2, 3) || ps[0].Author == nil || ps[0].Author.Followers != 4 {
				t.Errorf(`Joins("Author").Where("Author.followers > ?", 3): posts %s; want %s, the first one's author with 4 followers`, ids(ps), want(2, 3))
			}
			ps = nil
			must(t, db.Joins("Author").Order("Author.followers desc").Find(&ps).Error)
			if ids(ps) != want(3, 2, 1, 0) {
				t.Errorf(`Joins("Author").Order("Author.followers desc"): posts %s; want %s`, ids(ps), want(3, 2, 1, 0))
			}
			var n int64
			must(t, db.Model(&Post{}).Joins("Author").Where("Author.followers BETWEEN ? AND ?", 3, 4).Count(&n).Error)
			if n != 2 {
				t.Errorf(`Count of posts whose author has 3 to 4 followers: %d; want 2`, n)
			}
		})
	})
	t.Run("ent", func(t *testing.T) {
		eachEnt(t, func(t *testing.T, e *entEnv) {
			ctx := context.Background()
			c := e.client
			var ids []int
			for i := range 4 {
				a := c.Author.Create().SetName(fmt.Sprint("a", i)).SaveX(ctx)
				c.Author.UpdateOneID(a.ID).AddFollowers(int64(i + 2)).ExecX(ctx)
				ids = append(ids, c.Post.Create().SetTitle("p").SetAuthorID(a.ID).SaveX(ctx).ID)
			}
			got := c.Post.Query().Where(post.HasAuthorWith(author.FollowersGT(3))).Order(post.ByID()).IDsX(ctx)
			if fmt.Sprint(got) != fmt.Sprint(ids[2:]) {
				t.Errorf("HasAuthorWith(author.FollowersGT(3)): posts %v; want %v", got, ids[2:])
			}
			ordered := c.Post.Query().Order(post.ByAuthorField(author.FieldFollowers, entsql.OrderDesc())).IDsX(ctx)
			if fmt.Sprint(ordered) != fmt.Sprint([]int{ids[3], ids[2], ids[1], ids[0]}) {
				t.Errorf("ordered by the author's followers, descending: posts %v; want %v", ordered, []int{ids[3], ids[2], ids[1], ids[0]})
			}
			// A write whose predicate reaches the counter through the edge.
			n := c.Post.Update().Where(post.HasAuthorWith(author.FollowersGT(3))).SetTitle("popular").SaveX(ctx)
			popular := c.Post.Query().Where(post.Title("popular")).Order(post.ByID()).IDsX(ctx)
			if n != 2 || fmt.Sprint(popular) != fmt.Sprint(ids[2:]) {
				t.Errorf("Update().Where(HasAuthorWith(FollowersGT(3))): %d updated, titled %v; want 2, %v", n, popular, ids[2:])
			}
		})
	})
}
