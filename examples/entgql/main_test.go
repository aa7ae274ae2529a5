package main

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"

	"entgo.io/contrib/entgql"
	"entgo.io/ent/entc"
	"entgo.io/ent/entc/gen"

	"github.com/hotcounter/hotcounter/entcounter"
	"github.com/hotcounter/hotcounter/internal/testdb"
)

var migrating sync.Mutex

// TestGraphQLReadsFiltersAndOrdersCountersOverHTTP runs the generated
// GraphQL server on a loopback port and talks to it over HTTP, on each
// database: concurrent likePost and viewPost mutations, then the exact
// likes (a sum counter) in the posts connection, a node and a where
// filter; views (a rollup counter) as its column, before and after a
// rollup pass; the connection ordered by views and paged by cursor; and
// LIKES refused as an order field by the schema itself.
func TestGraphQLReadsFiltersAndOrdersCountersOverHTTP(t *testing.T) {
	for _, db := range []struct {
		name string
		dsn  func(testing.TB) string
	}{{"sqlite", testdb.SQLite}, {"postgres", testdb.Postgres}, {"mariadb", testdb.MySQL}} {
		t.Run(db.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			dsn := db.dsn(t)
			migrating.Lock() // ent's Schema.Create writes the generated package's table descriptors
			client, err := open(ctx, dsn)
			migrating.Unlock()
			if err != nil {
				t.Fatal(err)
			}
			defer client.Close()
			srv := httptest.NewServer(Handler(client))
			defer srv.Close()
			gql := Client{URL: srv.URL}

			views := map[string]int{"a": 2, "b": 9, "c": 5}
			ids := map[string]string{}
			for _, title := range []string{"a", "b", "c"} {
				var out struct{ CreatePost struct{ ID string } }
				if err := gql.Do(ctx, `mutation($t: String!) { createPost(input: {title: $t}) { id } }`, map[string]any{"t": title}, &out); err != nil {
					t.Fatal(err)
				}
				ids[title] = out.CreatePost.ID
			}
			const writers, each = 16, 10
			var wg sync.WaitGroup
			errs := make(chan error, writers+len(views))
			for range writers {
				wg.Go(func() {
					for range each {
						var out struct{ LikePost struct{ Likes int64 } }
						if err := gql.Do(ctx, `mutation($id: ID!) { likePost(id: $id) { likes } }`, map[string]any{"id": ids["a"]}, &out); err != nil {
							errs <- err
							return
						}
						if out.LikePost.Likes < 1 || out.LikePost.Likes > writers*each {
							errs <- fmt.Errorf("likePost returned likes %d, outside 1..%d", out.LikePost.Likes, writers*each)
							return
						}
					}
				})
			}
			for title, n := range views {
				wg.Go(func() {
					for range n {
						if err := gql.Do(ctx, `mutation($id: ID!) { viewPost(id: $id) { id } }`, map[string]any{"id": ids[title]}, nil); err != nil {
							errs <- err
							return
						}
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}

			var node struct {
				Node struct{ Likes, Views int64 }
			}
			if err := gql.Do(ctx, `query($id: ID!) { node(id: $id) { ... on Post { likes views } } }`, map[string]any{"id": ids["a"]}, &node); err != nil {
				t.Fatal(err)
			}
			if node.Node.Likes != writers*each || node.Node.Views != 0 {
				t.Errorf("node a before a rollup pass: likes %d views %d, want %d (exact) and 0 (the column, not folded yet)", node.Node.Likes, node.Node.Views, writers*each)
			}
			var filtered struct {
				Posts struct {
					TotalCount int
					Edges      []struct{ Node Post }
				}
			}
			if err := gql.Do(ctx, `{ posts(where: {likesGT: 100}) { totalCount edges { node { title likes } } } }`, nil, &filtered); err != nil {
				t.Fatal(err)
			}
			if e := filtered.Posts.Edges; filtered.Posts.TotalCount != 1 || len(e) != 1 || e[0].Node.Title != "a" || e[0].Node.Likes != writers*each {
				t.Errorf("posts(where: {likesGT: 100}): %+v, want post a alone with likes %d", filtered.Posts, writers*each)
			}

			if err := entcounter.RollupPass(ctx, client); err != nil {
				t.Fatal(err)
			}
			posts, err := gql.PostsByViews(ctx)
			if err != nil {
				t.Fatal(err)
			}
			got := make([]string, len(posts))
			for i, p := range posts {
				got[i] = fmt.Sprintf("%s likes=%d views=%d", p.Title, p.Likes, p.Views)
			}
			want := []string{fmt.Sprintf("b likes=0 views=%d", views["b"]), fmt.Sprintf("c likes=0 views=%d", views["c"]), fmt.Sprintf("a likes=%d views=%d", writers*each, views["a"])}
			if strings.Join(got, ", ") != strings.Join(want, ", ") {
				t.Errorf("posts by views, descending, after a rollup pass:\n got %v\nwant %v", got, want)
			}

			// Pages by cursor over the views order: two, then the rest.
			var page struct {
				Posts struct {
					Edges    []struct{ Node Post }
					PageInfo struct {
						EndCursor   string
						HasNextPage bool
					}
				}
			}
			const paged = `query($after: Cursor) { posts(first: 2, after: $after, orderBy: {field: VIEWS, direction: DESC}) { edges { node { title views } } pageInfo { endCursor hasNextPage } } }`
			var titles []string
			var after any
			for range 3 {
				if err := gql.Do(ctx, paged, map[string]any{"after": after}, &page); err != nil {
					t.Fatal(err)
				}
				for _, e := range page.Posts.Edges {
					titles = append(titles, e.Node.Title)
				}
				if !page.Posts.PageInfo.HasNextPage {
					break
				}
				after = page.Posts.PageInfo.EndCursor
			}
			if strings.Join(titles, ",") != "b,c,a" {
				t.Errorf("pages of 2 by views: %v, want b, c, a", titles)
			}

			err = gql.Do(ctx, `{ posts(orderBy: {field: LIKES}) { totalCount } }`, nil, nil)
			if err == nil || !strings.Contains(err.Error(), `"LIKES" does not exist`) {
				t.Errorf("ordering by LIKES, a sum counter: %v, want the schema's refusal", err)
			}
		})
	}
}

// TestGenerationRefusesASumCounterAsAGraphQLOrderField: entgql.OrderField
// on a sum counter fails code generation, naming the schema, the field and
// the way out (a rollup counter).
func TestGenerationRefusesASumCounterAsAGraphQLOrderField(t *testing.T) {
	gql, err := entgql.NewExtension()
	if err != nil {
		t.Fatal(err)
	}
	err = entc.Generate("./testdata/sumorder/schema", &gen.Config{Target: t.TempDir(), Package: "github.com/hotcounter/hotcounter/examples/entgql/testdata/sumorder/ent"},
		entc.Extensions(gql, entcounter.Extension()))
	if err == nil {
		t.Fatal("generation accepted a sum counter as an order field")
	}
	for _, want := range []string{"Post.likes", `entgql.OrderField("LIKES")`, "sum counter", "Rollup()"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}

// TestGeneratedGraphQLTypesSumCountersAsRequired: ent.graphql, as the
// generator wrote it, types both counters Int! (a sum counter is Optional
// in ent only so that a create may leave it out) and offers no isNil
// predicate for the sum counter.
func TestGeneratedGraphQLTypesSumCountersAsRequired(t *testing.T) {
	b, err := os.ReadFile("ent.graphql")
	if err != nil {
		t.Fatal(err)
	}
	schema := string(b)
	post := schema[strings.Index(schema, "type Post implements Node {"):]
	post = post[:strings.Index(post, "}")]
	for _, want := range []string{"likes: Int!", "views: Int!"} {
		if !strings.Contains(post, want) {
			t.Errorf("type Post does not say %q:\n%s", want, post)
		}
	}
	if strings.Contains(schema, "likesIsNil") {
		t.Error("PostWhereInput offers likesIsNil for a counter that is never null")
	}
}
