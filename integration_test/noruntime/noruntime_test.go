// Package noruntime_test is a program that forgot the generated runtime
// import (_ "<module>/ent/runtime"), which registers the counter hooks:
// nothing in this test binary imports it.
package noruntime_test

import (
	"context"
	"database/sql"
	"strings"
	"testing"

	"entgo.io/ent/dialect"
	entsql "entgo.io/ent/dialect/sql"
	_ "github.com/glebarez/go-sqlite"

	"github.com/hotcounter/hotcounter/entcounter"
	"github.com/hotcounter/hotcounter/integration_test/ent"
	"github.com/hotcounter/hotcounter/internal/testdb"
)

// A client without the runtime import fails at its first write of a
// schema with counters, naming the import, instead of writing an
// increment past the slot tables.
func TestAClientWithoutTheRuntimeImportFailsNamingIt(t *testing.T) {
	db, err := sql.Open("sqlite", testdb.SQLite(t))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	client := ent.NewClient(ent.Driver(entsql.OpenDB(dialect.SQLite, db)))
	ctx := context.Background()
	if err := client.Schema.Create(ctx, entcounter.WithCounters(client)); err != nil {
		t.Fatal(err)
	}
	_, err = client.Post.Create().SetTitle("t").Save(ctx)
	if err == nil || !strings.Contains(err.Error(), "ent/runtime") {
		t.Fatalf("a create without the runtime import = %v; want an error naming the ent/runtime import", err)
	}
}
