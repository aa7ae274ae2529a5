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

// A load of one node (Get, Only, First) selects its sum counters' totals in
// its own statement: one statement, the totals exact. An eager-loaded edge
// of one node is still filled (its own query is not the one that selected
// totals), and so is a count of child rows loaded the same way.
func TestEntLoadOfOneNodeIsOneStatement(t *testing.T) {
	parallel(t)
	eachEnt(t, func(t *testing.T, e *entEnv) {
		ctx := context.Background()
		c := e.client
		a := c.Author.Create().SetName("ann").SaveX(ctx)
		c.Author.UpdateOneID(a.ID).AddFollowers(4).ExecX(ctx)
		p := c.Post.Create().SetTitle("viral").SetAuthorID(a.ID).SaveX(ctx)
		for range 20 {
			c.Post.UpdateOneID(p.ID).AddLikes(1).ExecX(ctx)
		}
		for name, load := range map[string]func() *ent.Post{
			"Get":   func() *ent.Post { return c.Post.GetX(ctx, p.ID) },
			"Only":  func() *ent.Post { return c.Post.Query().Where(post.ID(p.ID)).OnlyX(ctx) },
			"First": func() *ent.Post { return c.Post.Query().Where(post.TitleEQ("viral")).FirstX(ctx) },
		} {
			var got *ent.Post
			if n := entStatements(e, func() { got = load() }); n != 1 {
				t.Fatalf("%s sent %d statements, want 1", name, n)
			}
			if got.Likes != 20 || got.Title != "viral" {
				t.Fatalf("%s: likes=%d title=%q, want 20 and viral", name, got.Likes, got.Title)
			}
		}
		got := c.Post.Query().Where(post.ID(p.ID)).WithAuthor().OnlyX(ctx)
		if got.Likes != 20 || got.Edges.Author.Followers != 4 {
			t.Fatalf("with its author: likes=%d followers=%d, want 20 and 4", got.Likes, got.Edges.Author.Followers)
		}
		if n := entStatements(e, func() { c.Post.Query().AllX(ctx) }); n != 2 {
			t.Fatalf("a load of many posts sent %d statements, want 2 (the load and one grouped fill)", n)
		}
	})
}
