package integration_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/hotcounter/hotcounter/entcounter"
	"github.com/hotcounter/hotcounter/integration_test/ent"
	"github.com/hotcounter/hotcounter/integration_test/ent/post"
	_ "github.com/hotcounter/hotcounter/integration_test/ent/runtime"
	_ "github.com/jackc/pgx/v5/stdlib"
)

// Paths that select without ent's query spec (Select().Scan) leave sum
// counters out; transactions are recognised behind client.Debug().
func TestEntSelectScanAndDebug(t *testing.T) {
	parallel(t)
	eachEnt(t, func(t *testing.T, e *entEnv) {
		ctx := context.Background()
		c := e.client
		c.Post.Create().SetTitle("scan").SetLikes(2).ExecX(ctx)
		var rows []struct {
			ID       int    `json:"id"`
			Title    string `json:"title"`
			Views    int64  `json:"views"`
			AuthorID *int   `json:"author_id"`
		}
		c.Post.Query().Select().ScanX(ctx, &rows)
		if len(rows) != 1 || rows[0].Title != "scan" {
			t.Fatalf("Select().Scan = %+v", rows)
		}
		tx, err := c.Tx(ctx)
		must(t, err)
		defer tx.Rollback()
		if err := entcounter.RollupPass(ctx, tx.Client().Debug()); err == nil {
			t.Fatal("RollupPass accepted a transaction's client behind Debug()")
		}
	})
}

func TestEntLoadsAreNotNPlusOne(t *testing.T) {
	parallel(t)
	eachEnt(t, func(t *testing.T, e *entEnv) {
		ctx := context.Background()
		c := e.client
		a := c.Author.Create().SetName("ann").SaveX(ctx)
		c.Author.UpdateOneID(a.ID).AddFollowers(4).ExecX(ctx)
		for i := 0; i < 20; i++ { // one grouped query per level, whatever the count
			p := c.Post.Create().SetTitle(fmt.Sprint(i)).SetAuthorID(a.ID).SaveX(ctx)
			c.Post.UpdateOneID(p.ID).AddLikes(int64(i)).ExecX(ctx)
			cm := c.Comment.Create().SetPostID(p.ID).SetBody("x").SaveX(ctx)
			c.Comment.UpdateOneID(cm.ID).AddUpvote(int64(i % 3)).ExecX(ctx)
		}
		var posts []*ent.Post
		n := entStatements(e, func() { posts = c.Post.Query().WithAuthor().WithComments().Order(post.ByID()).AllX(ctx) })
		// posts, their likes; authors, followers; comments, upvotes.
		if n != 6 {
			t.Fatalf("loading 20 posts with author and comments sent %d statements, want 6", n)
		}
		for i, p := range posts {
			if p.Likes != int64(i) || p.Edges.Author.Followers != 4 || p.Edges.Comments[0].Upvote != int64(i%3) {
				t.Fatalf("post %d: likes=%d followers=%d upvote=%d", i, p.Likes, p.Edges.Author.Followers, p.Edges.Comments[0].Upvote)
			}
		}
		// Traversals fill too.
		if got := c.Author.QueryPosts(a).Where(post.TitleEQ("7")).OnlyX(ctx); got.Likes != 7 {
			t.Fatalf("traversal: likes=%d, want 7", got.Likes)
		}
	})
}
