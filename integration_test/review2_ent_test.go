package integration_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hotcounter/hotcounter/entcounter"
	"github.com/hotcounter/hotcounter/integration_test/ent"
	"github.com/hotcounter/hotcounter/integration_test/ent/item"
)

// Review 2 repros: counts kept by ent hooks (Rack.item_count, Rack.open_count).

// concurrentItem creates an item on rack in another transaction of c and
// commits it, the first time it is called.
func concurrentItem(t *testing.T, c *ent.Client, rack int, status string, done *atomic.Bool) {
	t.Helper()
	if !done.CompareAndSwap(false, true) {
		return
	}
	ctx := context.Background()
	must(t, inTx(ctx, c, func(tx *ent.Tx) error {
		return tx.Item.Create().SetRackID(rack).SetStatus(status).Exec(ctx)
	}))
}

// A bulk Delete/Update whose predicates match no row when CountHook reads
// the ids runs unpinned (counthook.go: "if len(keys) == 0 { return
// next.Mutate(ctx, m) }"): a matching row committed by another transaction
// between that read and the statement is deleted (or moved) by it, and no
// one subtracts it from its rack. The user hook below runs inside CountHook,
// between its id read and the write, and commits such a row.
func TestReview2EntUnpinnedEmptyBulkWrite(t *testing.T) {
	for _, k := range []dbKind{pg, my} {
		for _, op := range []string{"delete", "update"} {
			t.Run(string(k)+"/"+op, func(t *testing.T) {
				e := openEnt(t, k, true)
				ctx := context.Background()
				c := e.client
				rs := newRacks(t, c, 2)
				var done atomic.Bool
				c.Item.Use(func(next ent.Mutator) ent.Mutator {
					return ent.MutateFunc(func(ctx context.Context, m ent.Mutation) (ent.Value, error) {
						if !m.Op().Is(ent.OpCreate) {
							concurrentItem(t, c, rs[0], "doomed", &done)
						}
						return next.Mutate(ctx, m)
					})
				})
				must(t, inTx(ctx, c, func(tx *ent.Tx) error {
					if op == "delete" {
						_, err := tx.Item.Delete().Where(item.Status("doomed")).Exec(ctx)
						return err
					}
					return tx.Item.Update().Where(item.Status("doomed")).SetRackID(rs[1]).Exec(ctx)
				}))
				if !done.Load() {
					t.Fatal("the concurrent create did not run")
				}
				n, _ := c.Item.Query().Where(item.Status("doomed"), item.RackID(rs[0])).Count(ctx)
				t.Logf("doomed items left on rack %d: %d", rs[0], n)
				checkCounts(t, "a bulk "+op+" matching no row at its id read, racing a committed create", rackCountMismatches(t, e))
			})
		}
	}
}

// edgeHook: ClearItems reads (and locks) the rack's items before the write
// and re-reads only those after it; an item that another transaction adds
// to the rack in between (PostgreSQL: FOR UPDATE locks no gap) is cleared
// by the UPDATE ... WHERE rack_id = ? too, and never subtracted.
func TestReview2EntClearItemsRace(t *testing.T) {
	e := openEnt(t, pg, true)
	ctx := context.Background()
	c := e.client
	rs := newRacks(t, c, 1)
	newItems(t, c, []*int{&rs[0]}, "open")
	var done atomic.Bool
	competitor := make(chan error, 1)
	c.Rack.Use(func(next ent.Mutator) ent.Mutator {
		return ent.MutateFunc(func(ctx context.Context, m ent.Mutation) (ent.Value, error) {
			// A create on the rack from another transaction, started while
			// the clear holds the rack: it must wait for the clear to commit
			// (its foreign key check), then count itself.
			if done.CompareAndSwap(false, true) {
				go func() {
					competitor <- inTx(ctx, c, func(tx *ent.Tx) error {
						return tx.Item.Create().SetRackID(rs[0]).SetStatus("open").Exec(ctx)
					})
				}()
				time.Sleep(200 * time.Millisecond)
			}
			return next.Mutate(ctx, m)
		})
	})
	must(t, inTx(ctx, c, func(tx *ent.Tx) error { return tx.Rack.UpdateOneID(rs[0]).ClearItems().Exec(ctx) }))
	if !done.Load() {
		t.Fatal("the concurrent create did not run")
	}
	must(t, <-competitor)
	checkCounts(t, "ClearItems racing a create on the rack", rackCountMismatches(t, e))
	n, err := c.Item.Query().Where(item.RackID(rs[0])).Count(ctx)
	must(t, err)
	if n != 1 {
		t.Fatalf("the rack has %d items after the clear and the competing create, want 1 (the create waited for the clear)", n)
	}
}

// An upsert (OnConflict) of an item may update an existing row that the
// hook cannot name before the write (here the conflict is forced by
// resetting the id sequence; a child with a unique natural key would meet
// it without that). The hook fails the mutation with ErrHookedUpsert, so
// the transaction rolls back and the counts stay exact.
func TestReview2EntUpsertExistingItem(t *testing.T) {
	e := openEnt(t, pg, true)
	ctx := context.Background()
	c := e.client
	rs := newRacks(t, c, 2)
	ids := newItems(t, c, []*int{&rs[0]}, "open")
	must(t, e.db.Exec(fmt.Sprintf("SELECT setval(pg_get_serial_sequence('items', 'id'), %d, false)", ids[0])).Error)
	err := inTx(ctx, c, func(tx *ent.Tx) error {
		_, err := tx.Item.Create().SetRackID(rs[1]).SetStatus("open").
			OnConflictColumns(item.FieldID).UpdateNewValues().ID(ctx)
		return err
	})
	if !errors.Is(err, entcounter.ErrHookedUpsert) {
		t.Fatalf("an upsert of a hooked item: %v; want ErrHookedUpsert", err)
	}
	checkCounts(t, "a refused upsert of an existing item", rackCountMismatches(t, e))
}
