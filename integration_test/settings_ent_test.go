package integration_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/hotcounter/hotcounter/entcounter"
	"github.com/hotcounter/hotcounter/integration_test/ent"
)

// entcounter.Configure gives a client gormcounter.Config's run-time
// settings: with RollupBatchSize 2, a rollup pass over 5 parents with
// pending views commits 3 transactions; with the default, one.
func TestEntConfigureSetsThePassesBatchSize(t *testing.T) {
	eachEnt(t, func(t *testing.T, e *entEnv) {
		ctx := context.Background()
		for _, batch := range []struct{ size, commits int64 }{{2, 3}, {0, 1}} {
			var commits atomic.Int64
			client := ent.NewClient(ent.Driver(entDriver(t, e.env, e.pool, func(statement string) {
				if strings.Contains(statement, "committed") {
					commits.Add(1)
				}
			})))
			if _, err := entcounter.Configure(client, entcounter.Config{RollupBatchSize: int(batch.size)}); err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 5; i++ {
				p := client.Post.Create().SetTitle("batch").SaveX(ctx)
				must(t, client.Post.UpdateOneID(p.ID).AddViews(1).Exec(ctx))
			}
			commits.Store(0)
			must(t, entcounter.RollupPass(ctx, client))
			if got := commits.Load(); got != batch.commits {
				t.Errorf("RollupBatchSize %d: the pass over 5 parents committed %d transactions, want %d", batch.size, got, batch.commits)
			}
		}
	}, everyEntTable())
}
