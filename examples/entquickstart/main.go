// Command entquickstart shows entcounter end to end: declare counters with a
// mixin, migrate with Schema.Create, increment from many goroutines with the
// generated AddLikes, load, read live (entcounter.WithLive, and the
// generated Query().Live()), roll up, and add through a write-behind buffer
// with the generated Buffered(buf).AddViews.
//
//	go run ./examples/entquickstart                 # embedded SQLite, no server
//	go run ./examples/entquickstart -dsn "host=127.0.0.1 user=postgres dbname=test sslmode=disable"
//	go run ./examples/entquickstart -dsn "root@tcp(127.0.0.1:3306)/test"   # MySQL/MariaDB
package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"entgo.io/ent/dialect"
	entsql "entgo.io/ent/dialect/sql"
	_ "github.com/glebarez/go-sqlite"  // pure-Go SQLite, driver "sqlite"
	_ "github.com/go-sql-driver/mysql" // MySQL/MariaDB, driver "mysql"
	_ "github.com/jackc/pgx/v5/stdlib" // PostgreSQL, driver "pgx"

	"github.com/hotcounter/hotcounter"
	"github.com/hotcounter/hotcounter/entcounter"
	"github.com/hotcounter/hotcounter/examples/entquickstart/ent"
	entpost "github.com/hotcounter/hotcounter/examples/entquickstart/ent/post"
	"github.com/hotcounter/hotcounter/examples/entquickstart/ent/postlikesslot"
	_ "github.com/hotcounter/hotcounter/examples/entquickstart/ent/runtime" // registers the counter hooks
)

func main() {
	dsn := flag.String("dsn", "", `PostgreSQL DSN, or MySQL/MariaDB as user@tcp(host:port)/db (default: an SQLite file in a temporary directory)`)
	writers := flag.Int("writers", 8, "concurrent writers")
	each := flag.Int("each", 250, "likes per writer")
	flag.Parse()
	if err := run(context.Background(), *dsn, *writers, *each); err != nil {
		log.Fatal(err)
	}
}

func open(ctx context.Context, dsn string) (*ent.Client, string, error) {
	if dsn == "" {
		dir, err := os.MkdirTemp("", "hotcounter-entquickstart")
		if err != nil {
			return nil, "", err
		}
		path := filepath.Join(dir, "entquickstart.db")
		// Foreign keys on (slot rows cascade with their post), WAL, and a busy
		// timeout with immediate transactions: SQLite has one writer at a time.
		db, err := sql.Open("sqlite", "file:"+path+"?_pragma=foreign_keys(1)&_pragma=journal_mode(WAL)&_pragma=busy_timeout(10000)&_txlock=immediate")
		return ent.NewClient(ent.Driver(entsql.OpenDB(dialect.SQLite, db))), "SQLite " + path, err
	}
	driver, dl, where := "pgx", dialect.Postgres, "PostgreSQL"
	if strings.Contains(dsn, "@tcp(") || strings.Contains(dsn, "@unix(") {
		driver, dl, where = "mysql", dialect.MySQL, "MySQL/MariaDB"
	}
	db, err := sql.Open(driver, dsn)
	if err != nil {
		return nil, "", err
	}
	// A fresh start: drop the example's own tables if an earlier run left them.
	_, err = db.ExecContext(ctx, "DROP TABLE IF EXISTS entquickstart_post_likes_slots, entquickstart_post_views_slots, entquickstart_posts")
	return ent.NewClient(ent.Driver(entsql.OpenDB(dl, db))), where, err
}

func run(ctx context.Context, dsn string, writers, each int) error {
	client, where, err := open(ctx, dsn)
	if err != nil {
		return err
	}
	defer client.Close()
	if err := client.Schema.Create(ctx); err != nil {
		return err
	}
	fmt.Printf("database: %s\nmigrated: entquickstart_posts, entquickstart_post_likes_slots, entquickstart_post_views_slots\n\n", where)

	post, err := client.Post.Create().SetTitle("hello, counters").Save(ctx)
	if err != nil {
		return err
	}

	// Many writers on one post: each AddLikes upserts a random slot row and
	// never touches the posts row.
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				if err := client.Post.UpdateOneID(post.ID).AddLikes(1).AddViews(2).Exec(ctx); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	total := writers * each
	fmt.Printf("%d writers x %d: %d likes and %d views acknowledged\n", writers, each, total, 2*total)

	loaded, err := client.Post.Get(ctx, post.ID)
	if err != nil {
		return err
	}
	fmt.Printf("client.Post.Get:                 likes=%d (exact)  views=%d (cached column, not rolled up yet)\n", loaded.Likes, loaded.Views)
	if loaded, err = client.Post.Get(entcounter.WithLive(ctx), post.ID); err != nil {
		return err
	}
	fmt.Printf("with entcounter.WithLive(ctx):   likes=%d          views=%d (column + pending slots)\n", loaded.Likes, loaded.Views)
	// The same, typed: Live on the generated query.
	if loaded, err = client.Post.Query().Where(entpost.ID(post.ID)).Live().Only(ctx); err != nil {
		return err
	}
	fmt.Printf("client.Post.Query().Live():      likes=%d          views=%d\n", loaded.Likes, loaded.Views)
	if err := entcounter.RollupPass(ctx, client); err != nil {
		return err
	}
	if loaded, err = client.Post.Get(ctx, post.ID); err != nil {
		return err
	}
	fmt.Printf("after entcounter.RollupPass:     likes=%d          views=%d (cached column, now folded)\n", loaded.Likes, loaded.Views)
	switch done, err := entcounter.CompactPass(ctx, client); {
	case errors.Is(err, errors.ErrUnsupported):
		// MySQL/MariaDB: refused, and nothing changed. Their sum slots are
		// pre-created, and a load adds up only the rows holding a value.
		fmt.Printf("entcounter.CompactPass:          not offered on %s, nothing changed:\n  %v\n\n", where, err)
	case err != nil:
		return err
	default:
		n, err := client.PostLikesSlot.Query().Where(postlikesslot.EntquickstartPostID(post.ID), postlikesslot.NNEQ(0)).Count(ctx)
		if err != nil {
			return err
		}
		fmt.Printf("after entcounter.CompactPass:    %d likes slot row holds them all (%d rows removed)\n\n", n, done.Removed)
	}

	// A write-behind buffer adds up increments in memory and writes them in
	// batches; the generated Buffered(buf).AddViews is its typed Increment.
	buf, err := entcounter.NewBuffer(ctx, client, hotcounter.BufferConfig{})
	if err != nil {
		return err
	}
	for range 10 {
		if err := client.Post.Buffered(buf).AddViews(ctx, post.ID, 1); err != nil {
			return err
		}
	}
	if err := buf.Close(ctx); err != nil { // writes what is pending
		return err
	}
	if loaded, err = client.Post.Query().Where(entpost.ID(post.ID)).Live().Only(ctx); err != nil {
		return err
	}
	fmt.Printf("after 10 client.Post.Buffered(buf).AddViews and buf.Close: views=%d\n\n", loaded.Views)

	// SetLikes sets the total exactly.
	if err := client.Post.UpdateOneID(post.ID).SetTitle("renamed").SetLikes(int64(total) + 5).Exec(ctx); err != nil {
		return err
	}
	if loaded, err = client.Post.Query().Where(entpost.ID(post.ID)).Live().Only(ctx); err != nil {
		return err
	}
	if want := int64(total + 5); loaded.Likes != want || loaded.Views != int64(2*total+10) {
		return fmt.Errorf("lost updates: likes %d (want %d), views %d (want %d)", loaded.Likes, want, loaded.Views, 2*total+10)
	}
	fmt.Println(strings.Repeat("-", 60))
	fmt.Printf("final: %q likes=%d (set to %d) views=%d: nothing lost\n", loaded.Title, loaded.Likes, total+5, loaded.Views)
	return nil
}
