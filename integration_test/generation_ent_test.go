package integration_test

import (
	"context"
	"errors"
	"testing"

	"github.com/hotcounter/hotcounter"
	"github.com/hotcounter/hotcounter/integration_test/entversions/noext"
	_ "github.com/hotcounter/hotcounter/integration_test/entversions/noext/runtime"
)

// A schema that declares a counter, generated without entcounter's
// extension: every operation on it, counter or not, returns
// ErrNotConfigured (which says how to generate), not the database's error
// about a column that does not exist.
func TestEntWithoutTheExtensionEveryOperationSaysHowToGenerate(t *testing.T) {
	eachDB(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		c := noext.NewClient(noext.Driver(entDriver(t, e, 4, func(string) {})))
		entSchemaMu.Lock()
		err := c.Schema.Create(ctx)
		entSchemaMu.Unlock()
		must(t, err)
		must(t, e.db.Exec("INSERT INTO reels (title) VALUES ('r')").Error)
		var id int
		must(t, e.db.Raw("SELECT id FROM reels").Row().Scan(&id))
		for name, run := range map[string]func() error{
			"Create":               func() error { return c.Reel.Create().SetTitle("x").Exec(ctx) },
			"Create with plays":    func() error { return c.Reel.Create().SetPlays(3).Exec(ctx) },
			"Get":                  func() error { _, err := c.Reel.Get(ctx, id); return err },
			"Query().All":          func() error { _, err := c.Reel.Query().All(ctx); return err },
			"UpdateOne().SetTitle": func() error { return c.Reel.UpdateOneID(id).SetTitle("y").Exec(ctx) },
			"UpdateOne().AddPlays": func() error { return c.Reel.UpdateOneID(id).AddPlays(1).Exec(ctx) },
			"Delete":               func() error { return c.Reel.DeleteOneID(id).Exec(ctx) },
		} {
			if err := run(); !errors.Is(err, hotcounter.ErrNotConfigured) {
				t.Errorf("%s without the extension: %v; want ErrNotConfigured", name, err)
			}
		}
	})
}
