package integration_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/hotcounter/hotcounter/entcounter"
	"github.com/hotcounter/hotcounter/integration_test/ent"
	"github.com/hotcounter/hotcounter/integration_test/ent/item"
	"github.com/hotcounter/hotcounter/integration_test/ent/rack"
)

// inTx runs fn in a transaction of client, committing if it returns nil.
func inTx(ctx context.Context, c *ent.Client, fn func(tx *ent.Tx) error) error {
	tx, err := c.Tx(ctx)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		return errors.Join(err, tx.Rollback())
	}
	return tx.Commit()
}

func newRacks(t testing.TB, c *ent.Client, n int) []int {
	t.Helper()
	var ids []int
	for start := 0; start < n; start += 500 {
		bs := make([]*ent.RackCreate, min(500, n-start))
		for i := range bs {
			bs[i] = c.Rack.Create().SetName(fmt.Sprint("r", start+i))
		}
		got, err := c.Rack.CreateBulk(bs...).Save(context.Background())
		must(t, err)
		for _, r := range got {
			ids = append(ids, r.ID)
		}
	}
	return ids
}

// newItems creates one item on each given rack (nil: none), in one
// transaction per 500.
func newItems(t testing.TB, c *ent.Client, racks []*int, status string) []int {
	t.Helper()
	ctx := context.Background()
	var ids []int
	for start := 0; start < len(racks); start += 500 {
		part := racks[start:min(start+500, len(racks))]
		must(t, inTx(ctx, c, func(tx *ent.Tx) error {
			bs := make([]*ent.ItemCreate, len(part))
			for i, r := range part {
				bs[i] = tx.Item.Create().SetStatus(status).SetNillableRackID(r)
			}
			got, err := tx.Item.CreateBulk(bs...).Save(ctx)
			for _, it := range got {
				ids = append(ids, it.ID)
			}
			return err
		}))
	}
	return ids
}

// TestEntCountsByHooks walks the items table through ent's writes, each in
// a transaction, comparing the racks' counts (kept by hooks) with COUNT(*)
// after each step. A write outside a transaction is refused, and raw SQL,
// which hooks do not see, is repaired by Recount.
func TestEntCountsByHooks(t *testing.T) {
	for _, k := range entKinds {
		t.Run(string(k), func(t *testing.T) {
			e := openEnt(t, k, true)
			ctx := context.Background()
			c := e.client
			check := func(step string) { t.Helper(); checkCounts(t, step, rackCountMismatches(t, e)) }
			rs := newRacks(t, c, 4)
			ids := newItems(t, c, []*int{&rs[0], &rs[0], &rs[1], nil, &rs[2]}, "open")
			check("a bulk create")
			newItems(t, c, []*int{&rs[3]}, "draft")
			check("a create the condition leaves out")

			steps := []struct {
				name string
				fn   func(tx *ent.Tx) error
			}{
				{"a move", func(tx *ent.Tx) error { return tx.Item.UpdateOneID(ids[0]).SetRackID(rs[1]).Exec(ctx) }},
				{"a move from no rack", func(tx *ent.Tx) error { return tx.Item.UpdateOneID(ids[3]).SetRackID(rs[3]).Exec(ctx) }},
				{"a move to no rack", func(tx *ent.Tx) error { return tx.Item.UpdateOneID(ids[4]).ClearRackID().Exec(ctx) }},
				{"a bulk move", func(tx *ent.Tx) error {
					return tx.Item.Update().Where(item.RackID(rs[1])).SetRackID(rs[2]).Exec(ctx)
				}},
				{"a bulk status change", func(tx *ent.Tx) error {
					return tx.Item.Update().Where(item.RackID(rs[2])).SetStatus("draft").Exec(ctx)
				}},
				{"an edge setter on the parent", func(tx *ent.Tx) error {
					return tx.Item.UpdateOneID(ids[1]).SetRack(tx.Rack.GetX(ctx, rs[3])).Exec(ctx)
				}},
				{"AddItemIDs on a rack", func(tx *ent.Tx) error { return tx.Rack.UpdateOneID(rs[0]).AddItemIDs(ids[4]).Exec(ctx) }},
				{"RemoveItemIDs on a rack", func(tx *ent.Tx) error { return tx.Rack.UpdateOneID(rs[0]).RemoveItemIDs(ids[4]).Exec(ctx) }},
				{"ClearItems on racks", func(tx *ent.Tx) error { return tx.Rack.Update().Where(rack.IDIn(rs[2], rs[3])).ClearItems().Exec(ctx) }},
				{"a rack created with items", func(tx *ent.Tx) error {
					return tx.Rack.Create().SetName("new").AddItemIDs(ids[1], ids[3]).Exec(ctx)
				}},
				{"a delete", func(tx *ent.Tx) error { return tx.Item.DeleteOneID(ids[0]).Exec(ctx) }},
				{"a bulk delete", func(tx *ent.Tx) error {
					_, err := tx.Item.Delete().Where(item.RackID(rs[3])).Exec(ctx)
					return err
				}},
			}
			for _, s := range steps {
				must(t, inTx(ctx, c, s.fn))
				check(s.name)
			}
			if err := c.Item.UpdateOneID(ids[2]).SetRackID(rs[0]).Exec(ctx); !errors.Is(err, entcounter.ErrNeedsTx) {
				t.Fatalf("a move outside a transaction: %v; want ErrNeedsTx", err)
			}
			check("a refused move")

			must(t, e.db.Exec("INSERT INTO items (rack_id, status) VALUES (?, 'open')", rs[0]).Error)
			if len(rackCountMismatches(t, e)) != 1 {
				t.Fatal("a raw insert was counted without triggers: the check cannot see drift")
			}
			for _, f := range []string{rack.FieldItemCount, rack.FieldOpenCount} {
				n, err := entcounter.Recount(ctx, c, "Rack", f)
				must(t, err)
				if n != 1 {
					t.Errorf("Recount(%s) corrected %d racks, want 1", f, n)
				}
			}
			check("a raw insert and Recount")
		})
	}
}

// TestEntCountsByHooksDepesz is the depesz scenario with counts kept by ent
// hooks, every write in its own transaction: no error (a deadlock would be
// one), every count equal to COUNT(*).
func TestEntCountsByHooksDepesz(t *testing.T) {
	for _, k := range entKinds {
		t.Run(string(k), func(t *testing.T) {
			e := openEnt(t, k, true)
			ctx := context.Background()
			c := e.client
			writers, moves := 32, 100
			if k == lite {
				writers, moves = 4, 50
			}
			rs := newRacks(t, c, 1000)
			owners := make([]*int, 5000)
			for i := range owners {
				owners[i] = &rs[rand.IntN(len(rs))]
			}
			items := newItems(t, c, owners, "open")
			hot := rs[:4]
			move := func() error {
				target := rs[rand.IntN(len(rs))]
				if rand.IntN(2) == 0 {
					target = hot[rand.IntN(len(hot))]
				}
				return inTx(ctx, c, func(tx *ent.Tx) error {
					err := tx.Item.UpdateOneID(items[rand.IntN(len(items))]).SetRackID(target).Exec(ctx)
					if ent.IsNotFound(err) {
						return nil // deleted meanwhile
					}
					return err
				})
			}
			moved := hammer(t, writers, moves, move)
			checkCounts(t, "the moves", rackCountMismatches(t, e))

			doomed := rand.Perm(len(items))[:len(items)*4/5]
			var next atomic.Int64
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				moved += hammer(t, max(writers/2, 1), moves, move)
			}()
			deletes := hammer(t, max(writers/2, 1), len(doomed), func() error {
				i := int(next.Add(1)) - 1
				if i >= len(doomed) {
					return errStop
				}
				return inTx(ctx, c, func(tx *ent.Tx) error {
					if k != my && i%100 == 0 { // bulk: see TestCountsDepesz for MariaDB
						if _, err := tx.Item.Delete().Where(item.RackID(hot[rand.IntN(len(hot))])).Exec(ctx); err != nil {
							return err
						}
					}
					_, err := tx.Item.Delete().Where(item.ID(items[doomed[i]])).Exec(ctx)
					return err
				})
			})
			wg.Wait()
			checkCounts(t, "the deletes", rackCountMismatches(t, e))
			left, err := c.Item.Query().Count(ctx)
			must(t, err)
			if left > len(items)-len(doomed) {
				t.Fatalf("%d of %d items left: the deletes did not run", left, len(items))
			}
			t.Logf("ent hooks on %s: %d writers, %d moves, %d deletes, %d items left, no error, every count exact", k, writers, moved, deletes, left)
		})
	}
}
