package integration_test

import (
	"context"
	stdsql "database/sql"
	"fmt"
	"testing"

	entgo "entgo.io/ent"
	"entgo.io/ent/dialect"
	entsql "entgo.io/ent/dialect/sql"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

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

// entBehindAReplica returns ent, through the FAQ's read/write split, on
// a fresh schema of the pair's primary.
func entBehindAReplica(t *testing.T, p *pgPair, schema string) entORM {
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
	primary, err := gorm.Open(postgres.Open(p.primary+" search_path="+schema), &gorm.Config{Logger: logger.Discard})
	must(t, err)
	pool, err := primary.DB()
	must(t, err)
	t.Cleanup(func() { pool.Close() })
	return entORM{e: &entEnv{env: &env{kind: pg, dsn: p.primary + " search_path=" + schema, db: primary, pool: 10}}, client: c}
}

// entRecountAndLoadsBehindAReplica: Recount corrects to the primary's
// COUNT(*); an UpdateOne with a Where of a post only the primary has
// reads its row back from the primary; a Get follows the driver to the
// replica, which has not seen the post (NotFound).
func entRecountAndLoadsBehindAReplica(t *testing.T, p *pgPair, schema string, o entORM) {
	ctx, c := context.Background(), o.client
	// Recount: drift on the primary and books the replica has not seen.
	s := c.Shelf.Create().SetName("s").SaveX(ctx)
	for range 10 {
		c.Book.Create().SetShelfID(s.ID).ExecX(ctx)
	}
	p.resume(t)
	p.pause(t)
	defer p.resume(t)
	_, err := p.primaryDB.Exec(fmt.Sprintf("UPDATE %s.shelf_book_count_slots SET n = n + 5 WHERE shelf_id = $1", schema), s.ID)
	must(t, err)
	for range 3 {
		c.Book.Create().SetShelfID(s.ID).ExecX(ctx)
	}
	_, err = entcounter.Recount(ctx, c, "Shelf", shelf.FieldBookCount, s.ID)
	must(t, err)
	if got := countOnPrimary(t, p, schema, "SELECT COALESCE(SUM(n), 0) FROM shelf_book_count_slots WHERE shelf_id = $1", s.ID); got != 13 {
		t.Fatalf("after Recount the primary's slots hold %d; it has 13 books", got)
	}

	fresh := c.Post.Create().SetTitle("fresh").SaveX(ctx)
	got, err := c.Post.UpdateOneID(fresh.ID).AddLikes(1).Save(ctx)
	if err != nil || got.Likes != 1 || got.Title != "fresh" {
		t.Fatalf("AddLikes of a post only the primary has: %v, %+v; want the entity with likes 1", err, got)
	}
	got, err = c.Post.UpdateOneID(fresh.ID).Where(post.TitleEQ("fresh")).AddLikes(1).Save(ctx)
	if err != nil || got.Likes != 2 {
		t.Fatalf("AddLikes with a Where of a post only the primary has: %v, %+v; want likes 2", err, got)
	}
	if _, err := c.Post.Get(ctx, fresh.ID); !ent.IsNotFound(err) {
		t.Errorf("a Get from the lagging replica of a post it has not seen: %v; want NotFound", err)
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
