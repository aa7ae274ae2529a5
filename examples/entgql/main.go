// Command entgql serves counters over GraphQL: an ent schema with a sum
// counter (likes) and a rollup counter (views), generated with entgql and
// gqlgen, and entcounter's extension. The GraphQL type Post has likes and
// views as Int! fields; posts can be ordered by views (a column) but not by
// likes (a sum over slot rows per post, which the extension refuses as an
// order field).
//
// Without -addr it serves on a free loopback port, sends its own GraphQL
// requests over HTTP (concurrent likePost and viewPost mutations, then the
// posts connection ordered by views), prints what came back and exits.
// With -addr it serves until interrupted.
//
//	go run ./examples/entgql                                 # embedded SQLite, no server
//	go run ./examples/entgql -dsn "host=127.0.0.1 user=postgres dbname=test sslmode=disable"
//	go run ./examples/entgql -dsn "root@tcp(127.0.0.1:3306)/test"   # MySQL/MariaDB
//	go run ./examples/entgql -addr 127.0.0.1:8080            # serve: POST /query
//
// Regenerate after changing the schema: go generate ./examples/entgql
package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"entgo.io/ent/dialect"
	entsql "entgo.io/ent/dialect/sql"
	_ "github.com/glebarez/go-sqlite"  // pure-Go SQLite, driver "sqlite"
	_ "github.com/go-sql-driver/mysql" // MySQL/MariaDB, driver "mysql"
	_ "github.com/jackc/pgx/v5/stdlib" // PostgreSQL, driver "pgx"

	"github.com/hotcounter/hotcounter/entcounter"
	"github.com/hotcounter/hotcounter/examples/entgql/ent"
	_ "github.com/hotcounter/hotcounter/examples/entgql/ent/runtime" // registers the counter hooks
)

func main() {
	dsn := flag.String("dsn", "", `PostgreSQL DSN, or MySQL/MariaDB as user@tcp(host:port)/db (default: an SQLite file in a temporary directory)`)
	addr := flag.String("addr", "", "serve GraphQL at http://ADDR/query until interrupted (default: run the demo on a free loopback port and exit)")
	flag.Parse()
	ctx := context.Background()
	client, err := open(ctx, *dsn)
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	if *addr != "" {
		http.Handle("/query", Handler(client))
		log.Printf("GraphQL at http://%s/query", *addr)
		log.Fatal(http.ListenAndServe(*addr, nil))
	}
	if err := demo(ctx, client); err != nil {
		log.Fatal(err)
	}
}

// open connects to dsn (SQLite for a file: DSN, and in a temporary
// directory when empty), drops
// the example's tables an earlier run left, and migrates: the posts table
// and the counters' slot tables (entcounter.WithCounters).
func open(ctx context.Context, dsn string) (*ent.Client, error) {
	driver, dl := "pgx", dialect.Postgres
	if dsn == "" {
		dir, err := os.MkdirTemp("", "hotcounter-entgql")
		if err != nil {
			return nil, err
		}
		// Foreign keys on (slot rows cascade with their post), WAL, and a
		// busy timeout with immediate transactions: SQLite has one writer.
		dsn = "file:" + filepath.Join(dir, "entgql.db") + "?_pragma=foreign_keys(1)&_pragma=journal_mode(WAL)&_pragma=busy_timeout(10000)&_txlock=immediate"
	}
	switch {
	case strings.HasPrefix(dsn, "file:"):
		driver, dl = "sqlite", dialect.SQLite
	case strings.Contains(dsn, "@tcp(") || strings.Contains(dsn, "@unix("):
		driver, dl = "mysql", dialect.MySQL
	}
	db, err := sql.Open(driver, dsn)
	if err != nil {
		return nil, err
	}
	for _, t := range []string{"entgql_post_likes_slots", "entgql_post_views_slots", "entgql_posts"} {
		if _, err := db.ExecContext(ctx, "DROP TABLE IF EXISTS "+t); err != nil {
			return nil, err
		}
	}
	client := ent.NewClient(ent.Driver(entsql.OpenDB(dl, db)))
	if err := client.Schema.Create(ctx, entcounter.WithCounters(client)); err != nil {
		client.Close()
		return nil, err
	}
	return client, nil
}

// demo serves the GraphQL endpoint on a free loopback port and talks to it
// over HTTP as a web client would.
func demo(ctx context.Context, client *ent.Client) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: Handler(client)}
	go srv.Serve(ln)
	defer srv.Shutdown(ctx)
	gql := Client{URL: "http://" + ln.Addr().String() + "/"}
	fmt.Printf("GraphQL at %s\n\n", gql.URL)

	views := map[string]int{"quiet post": 3, "busy post": 40, "middling post": 12}
	ids := map[string]string{} // GraphQL IDs are strings
	for title := range views {
		var out struct{ CreatePost struct{ ID string } }
		if err := gql.Do(ctx, `mutation($t: String!) { createPost(input: {title: $t}) { id } }`, map[string]any{"t": title}, &out); err != nil {
			return err
		}
		ids[title] = out.CreatePost.ID
	}

	// 8 clients at once: 25 likes each on the busy post, and every view.
	const clients, likes = 8, 25
	var wg sync.WaitGroup
	errs := make(chan error, clients+len(views))
	for range clients {
		wg.Go(func() {
			for range likes {
				if err := gql.Do(ctx, `mutation($id: ID!) { likePost(id: $id) { likes } }`, map[string]any{"id": ids["busy post"]}, nil); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	for title, n := range views {
		wg.Go(func() {
			for range n {
				if err := gql.Do(ctx, `mutation($id: ID!) { viewPost(id: $id) { views } }`, map[string]any{"id": ids[title]}, nil); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	fmt.Printf("%d clients x %d likePost on the busy post, and %d viewPost, acknowledged\n", clients, likes, 3+40+12)

	// views is a rollup counter: its column holds what the last pass folded.
	if err := entcounter.RollupPass(ctx, client); err != nil {
		return err
	}
	posts, err := gql.PostsByViews(ctx)
	if err != nil {
		return err
	}
	fmt.Println("\nposts(orderBy: {field: VIEWS, direction: DESC}), after a rollup pass:")
	for _, p := range posts {
		fmt.Printf("  %-14s likes=%-4d views=%d\n", p.Title, p.Likes, p.Views)
	}
	if len(posts) != 3 || posts[0].Title != "busy post" || posts[0].Likes != clients*likes || posts[0].Views != 40 {
		return fmt.Errorf("unexpected posts: %+v", posts)
	}
	err = gql.Do(ctx, `{ posts(orderBy: {field: LIKES}) { totalCount } }`, nil, nil)
	fmt.Printf("\nordering by LIKES, a sum counter, is not in the schema:\n  %v\n", err)
	if err == nil {
		return fmt.Errorf("the schema offers LIKES as an order field")
	}
	return nil
}

// Post is a post as the demo's GraphQL queries return it.
type Post struct {
	ID    string
	Title string
	Likes int64
	Views int64
}

// Client sends GraphQL requests to URL over HTTP.
type Client struct{ URL string }

// Do sends query with vars and decodes the response's data into out (if
// not nil); GraphQL errors come back as an error.
func (c Client) Do(ctx context.Context, query string, vars map[string]any, out any) error {
	body, err := json.Marshal(map[string]any{"query": query, "variables": vars})
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.URL, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var r struct {
		Data   json.RawMessage
		Errors []struct{ Message string }
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return fmt.Errorf("%s: %w", resp.Status, err)
	}
	if len(r.Errors) > 0 {
		msgs := make([]string, len(r.Errors))
		for i, e := range r.Errors {
			msgs[i] = e.Message
		}
		return fmt.Errorf("graphql: %s", strings.Join(msgs, "; "))
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(r.Data, out)
}

// PostsByViews reads the posts connection ordered by views, most first.
func (c Client) PostsByViews(ctx context.Context) ([]Post, error) {
	var out struct {
		Posts struct{ Edges []struct{ Node Post } }
	}
	err := c.Do(ctx, `{ posts(orderBy: {field: VIEWS, direction: DESC}) { edges { node { id title likes views } } } }`, nil, &out)
	posts := make([]Post, len(out.Posts.Edges))
	for i, e := range out.Posts.Edges {
		posts[i] = e.Node
	}
	return posts, err
}
