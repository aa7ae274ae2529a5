package integration_test

import (
	"context"
	"testing"

	"github.com/hotcounter/hotcounter/integration_test/ent"
)

// ent's slot tables carry a surrogate id beside the unique (owner, slot)
// index, where an update through that index would lock the gap below its
// row too. On MariaDB, twenty open transactions add children to two
// parents in crossing orders, on sessions where any lock wait fails at
// once: books through raw SQL (counts kept by triggers) and items through
// ent (counts kept by hooks). None waits; every count equals COUNT(*).
func TestEntCountsCrossingTransactionsNeverWaitMySQL(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	const open = 20
	for _, by := range []string{"triggers", "hooks"} {
		t.Run(by, func(t *testing.T) {
			e := entCounts(t, my, false)
			c := e.client
			var ps []int
			if by == "triggers" {
				ps = newShelves(t, c, 2)
			} else {
				ps = newRacks(t, c, 2)
			}
			txs := make([]*ent.Tx, open)
			for i := range txs {
				tx, err := c.Tx(ctx)
				must(t, err)
				defer tx.Rollback()
				must(t, tx.HotCounter().Driver.Exec(ctx, noWaitSQL("mysql"), []any{}, nil))
				txs[i] = tx
			}
			for step := range 2 {
				for i, tx := range txs {
					parent := ps[(i+step)%2]
					var err error
					if by == "triggers" {
						err = tx.HotCounter().Driver.Exec(ctx, "INSERT INTO books (shelf_id, status) VALUES (?, 'open')", []any{parent}, nil)
					} else {
						err = tx.Item.Create().SetRackID(parent).SetStatus("open").Exec(ctx)
					}
					if err != nil {
						t.Fatalf("statement %d of transaction %d, with %d transactions open: %v; want no wait", step+1, i, open, err)
					}
				}
			}
			for _, tx := range txs {
				must(t, tx.Commit())
			}
			if by == "triggers" {
				entCheckCounts(t, e, "crossing transactions")
			} else {
				checkCounts(t, "crossing transactions", rackCountMismatches(t, e))
			}
		})
	}
}
