package integration_test

import (
	"context"
	stdsql "database/sql"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	entgo "entgo.io/ent"
	"entgo.io/ent/dialect"
	entsql "entgo.io/ent/dialect/sql"

	"github.com/hotcounter/hotcounter/entcounter"
	"github.com/hotcounter/hotcounter/integration_test/ent"
	"github.com/hotcounter/hotcounter/integration_test/ent/post"
	"github.com/hotcounter/hotcounter/integration_test/ent/shelf"
)

// replicaDriver is the read/write split of ent's FAQ ("How to configure
// two or more DB to separate read and write?"): queries of ent's query
// builders go to the replica, every other statement and every transaction
// to the primary.
type replicaDriver struct{ r, w dialect.Driver }

func (d *replicaDriver) Query(ctx context.Context, query string, args, v any) error {
	e := d.r
	if entgo.QueryFromContext(ctx) == nil { // mutations that use RETURNING
		e = d.w
	}
	return e.Query(ctx, query, args, v)
}

func (d *replicaDriver) Exec(ctx context.Context, query string, args, v any) error {
	return d.w.Exec(ctx, query, args, v)
}

func (d *replicaDriver) Tx(ctx context.Context) (dialect.Tx, error) { return d.w.Tx(ctx) }

func (d *replicaDriver) BeginTx(ctx context.Context, opts *stdsql.TxOptions) (dialect.Tx, error) {
	return d.w.(interface {
		BeginTx(context.Context, *stdsql.TxOptions) (dialect.Tx, error)
	}).BeginTx(ctx, opts)
}

func (d *replicaDriver) Close() error    { d.r.Close(); return d.w.Close() }
func (d *replicaDriver) Dialect() string { return d.r.Dialect() }

// entBehindAReplica: through ent's FAQ read/write split, every read of
// entcounter that decides a write goes to the primary: the migration,
// Recount, Take, RollupPass, the ids of a bulk Update and the row an
// UpdateOne reads back (NotFound on a replica that has not seen a new
// row). Loads follow the driver: from the replica, row and counters alike.
func entBehindAReplica(t *testing.T, p *pgPair) {
	ctx := context.Background()
	schema := "replica_ent"
	_, err := p.primaryDB.Exec("DROP SCHEMA IF EXISTS " + schema + " CASCADE; CREATE SCHEMA " + schema)
	must(t, err)
	p.resume(t)
	open := func(dsn string) dialect.Driver {
		db, err := stdsql.Open("pgx", dsn+" search_path="+schema)
		must(t, err)
		return entsql.OpenDB(dialect.Postgres, db)
	}
	c := ent.NewClient(ent.Driver(&replicaDriver{r: open(p.replica), w: open(p.primary)}))
	t.Cleanup(func() { c.Close() })
	p.pause(t)
	must(t, entMigrate(ctx, c, entcounter.WithCounters(c)))
	must(t, entMigrate(ctx, c, entcounter.WithCounters(c)))
	p.resume(t)

	// Recount: drift on the primary and books the replica has not seen.
	s := c.Shelf.Create().SetName("s").SaveX(ctx)
	for range 10 {
		c.Book.Create().SetShelfID(s.ID).ExecX(ctx)
	}
	p.resume(t)
	p.pause(t)
	_, err = p.primaryDB.Exec(fmt.Sprintf("UPDATE %s.shelf_book_count_slots SET n = n + 5 WHERE shelf_id = $1", schema), s.ID)
	must(t, err)
	for range 3 {
		c.Book.Create().SetShelfID(s.ID).ExecX(ctx)
	}
	_, err = entcounter.Recount(ctx, c, "Shelf", shelf.FieldBookCount, s.ID)
	must(t, err)
	if got := countOnPrimary(t, p, schema, "SELECT COALESCE(SUM(n), 0) FROM shelf_book_count_slots WHERE shelf_id = $1", s.ID); got != 13 {
		t.Fatalf("after Recount the primary's slots hold %d; it has 13 books", got)
	}

	// Take: a restock the replica has not seen.
	prod := c.Product.Create().SaveX(ctx)
	p.resume(t)
	p.pause(t)
	c.Product.UpdateOneID(prod.ID).AddStock(100).ExecX(ctx)
	var refused atomic.Int64
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := entcounter.Take(ctx, c, "Product", "stock", prod.ID, 1); err != nil {
				refused.Add(1)
				t.Errorf("a take of 1 of the 100 the primary holds: %v", err)
			}
		}()
	}
	wg.Wait()
	if left := countOnPrimary(t, p, schema, "SELECT COALESCE(SUM(n), 0) FROM product_stock_slots WHERE product_id = $1", prod.ID); left != 68 || refused.Load() != 0 {
		t.Fatalf("32 takes of 1 from 100: %d refused, %d left; want 0 and 68", refused.Load(), left)
	}

	// RollupPass: views the replica has not seen.
	old := c.Post.Create().SetTitle("old").SaveX(ctx)
	p.resume(t)
	p.pause(t)
	for range 5 {
		c.Post.UpdateOneID(old.ID).AddViews(10).ExecX(ctx)
	}
	must(t, entcounter.RollupPass(ctx, c))
	if col := countOnPrimary(t, p, schema, "SELECT views FROM posts WHERE id = $1", old.ID); col != 50 {
		t.Fatalf("after a rollup pass the primary's column holds %d; want 50", col)
	}

	// A post the replica has not seen: UpdateOne of it, alone, with a
	// Where, and a bulk Update.
	fresh := c.Post.Create().SetTitle("fresh").SaveX(ctx)
	got, err := c.Post.UpdateOneID(fresh.ID).AddLikes(1).Save(ctx)
	if err != nil || got.Likes != 1 || got.Title != "fresh" {
		t.Fatalf("AddLikes of a post only the primary has: %v, %+v; want the entity with likes 1", err, got)
	}
	got, err = c.Post.UpdateOneID(fresh.ID).Where(post.TitleEQ("fresh")).AddLikes(1).Save(ctx)
	if err != nil || got.Likes != 2 {
		t.Fatalf("AddLikes with a Where of a post only the primary has: %v, %+v; want likes 2", err, got)
	}
	n, err := c.Post.Update().Where(post.IDIn(fresh.ID)).AddLikes(10).Save(ctx)
	if err != nil || n != 1 {
		t.Fatalf("a bulk AddLikes of a post only the primary has: %v, %d rows; want 1", err, n)
	}
	if likes := countOnPrimary(t, p, schema, "SELECT COALESCE(SUM(n), 0) FROM post_likes_slots WHERE post_id = $1", fresh.ID); likes != 12 {
		t.Fatalf("the primary's slots of the fresh post hold %d; want 12", likes)
	}

	// Loads follow the driver: the replica's row and counters.
	if _, err := c.Post.Get(ctx, fresh.ID); !ent.IsNotFound(err) {
		t.Errorf("a Get from the lagging replica of a post it has not seen: %v; want NotFound", err)
	}
	seen := c.Post.GetX(ctx, old.ID)
	if seen.Views != 0 {
		t.Errorf("a Get from the lagging replica: views %d; want its 0", seen.Views)
	}
	p.resume(t)
	if got := c.Post.GetX(ctx, fresh.ID); got.Likes != 12 {
		t.Errorf("once the replica caught up: likes %d; want 12", got.Likes)
	}
}

// countOnPrimary runs a scalar query on the pair's primary in schema.
func countOnPrimary(t *testing.T, p *pgPair, schema, q string, args ...any) int64 {
	t.Helper()
	conn, err := p.primaryDB.Conn(context.Background())
	must(t, err)
	defer conn.Close()
	_, err = conn.ExecContext(context.Background(), "SET search_path = "+schema)
	must(t, err)
	var n int64
	must(t, conn.QueryRowContext(context.Background(), q, args...).Scan(&n))
	_, err = conn.ExecContext(context.Background(), "RESET search_path")
	must(t, err)
	return n
}
