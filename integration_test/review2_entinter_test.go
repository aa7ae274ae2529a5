package integration_test

import (
	"context"
	"testing"

	"github.com/hotcounter/hotcounter/integration_test/ent"
	"github.com/hotcounter/hotcounter/integration_test/ent/item"
)

// CountHook finds the rows of a bulk Update through m.IDs(ctx), an ent
// query that runs the client's query interceptors, and then pins the
// UPDATE to those ids. ent's Update statements are not subject to query
// interceptors, so an interceptor that hides rows from reads (soft delete,
// tenant filter) now also keeps a bulk Update from writing them: the
// update changes fewer rows than the same Update without ByHooks.
func TestReview2EntInterceptorNarrowsBulkUpdate(t *testing.T) {
	e := openEnt(t, pg, true)
	ctx := context.Background()
	c := e.client
	rs := newRacks(t, c, 2)
	newItems(t, c, []*int{&rs[0], &rs[0]}, "open")
	newItems(t, c, []*int{&rs[0]}, "hidden")
	c.Item.Intercept(ent.InterceptFunc(func(next ent.Querier) ent.Querier {
		return ent.QuerierFunc(func(ctx context.Context, q ent.Query) (ent.Value, error) {
			if iq, ok := q.(*ent.ItemQuery); ok {
				iq.Where(item.StatusNEQ("hidden"))
			}
			return next.Query(ctx, q)
		})
	}))
	var n int
	must(t, inTx(ctx, c, func(tx *ent.Tx) error {
		var err error
		n, err = tx.Item.Update().Where(item.RackID(rs[0])).SetRackID(rs[1]).Save(ctx)
		return err
	}))
	var left int64
	must(t, e.db.Raw("SELECT COUNT(*) FROM items WHERE rack_id = ?", rs[0]).Scan(&left).Error)
	if n != 3 || left != 0 {
		t.Fatalf("Update().Where(rack_id = %d).SetRackID(%d) moved %d items and left %d on the rack; want all 3 moved (the interceptor filters queries, not updates)", rs[0], rs[1], n, left)
	}
}
