package integration_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
)

// Behind a streaming replica, every read of the library that decides a
// write goes to the primary, with replay paused (the replica lags by
// everything written since): through GORM's dbresolver (registered before
// and after the plugin) and through ent's FAQ read/write split. The parts
// share the package's primary and replica, one after another.
func TestReadsThatDecideWritesGoToThePrimaryBehindAReplica(t *testing.T) {
	p := replicaPair(t)
	for i, order := range []string{"plugin, then dbresolver", "dbresolver, then plugin"} {
		t.Run("gorm/"+order, func(t *testing.T) {
			schema := fmt.Sprintf("replica_gorm_%d", i)
			o := gormBehindAReplica(t, p, schema, i == 1)
			behindAReplica(t, p, schema, o)
			gormRecountAndLoadsBehindAReplica(t, p, o.gdb)
		})
	}
	t.Run("gorm/MoveToSlots", func(t *testing.T) { gormMoveToSlotsBehindAReplica(t, p) })
	t.Run("ent", func(t *testing.T) {
		o := entBehindAReplica(t, p, "replica_ent")
		behindAReplica(t, p, "replica_ent", o)
		entRecountAndLoadsBehindAReplica(t, p, "replica_ent", o)
	})
}

// behindAReplica is what both ORMs do alike behind the lagging replica:
// the migration (twice: the second probes the tables the first made),
// Take of the stock the primary holds, a rollup pass that folds what the
// primary holds, increments of a post only the primary has (one, and by a
// condition), and plain loads, which read the replica's row and counters
// until it catches up.
func behindAReplica(t *testing.T, p *pgPair, schema string, o counterORM) {
	p.pause(t)
	must(t, o.migrate())
	must(t, o.migrate())
	p.resume(t)
	primary := func(q string, args ...any) int64 { return countOnPrimary(t, p, schema, q, args...) }

	// Take: a restock the replica has not seen.
	prod := o.create(t, modelProduct)
	p.resume(t)
	p.pause(t)
	must(t, o.increment(modelProduct, prod, "stock", 100))
	var refused atomic.Int64
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			if err := o.take(modelProduct, prod, "stock", 1); err != nil {
				refused.Add(1)
				t.Errorf("a take of 1 of the 100 the primary holds: %v", err)
			}
		})
	}
	wg.Wait()
	if left := primary("SELECT COALESCE(SUM(n), 0) FROM product_stock_slots WHERE product_id = $1", prod); left != 68 || refused.Load() != 0 {
		t.Fatalf("32 takes of 1 from 100: %d refused, %d left on the primary; want 0 and 68", refused.Load(), left)
	}

	// A rollup pass: views the replica has not seen.
	old := o.create(t, modelPost)
	p.resume(t)
	p.pause(t)
	for range 5 {
		must(t, o.increment(modelPost, old, "views", 10))
	}
	must(t, o.rollup(modelPost))
	if col, pending := primary("SELECT views FROM posts WHERE id = $1", old), primary("SELECT COUNT(*) FROM post_views_slots WHERE post_id = $1 AND n <> 0", old); col != 50 || pending != 0 {
		t.Fatalf("after a rollup pass: the primary's column holds %d with %d slot rows pending; want 50 and 0", col, pending)
	}

	// A post the replica has not seen.
	fresh := o.create(t, modelPost)
	must(t, o.increment(modelPost, fresh, "likes", 1))
	if n, err := o.incrementMany(modelPost, []int64{fresh}, "likes", 10); err != nil || n != 1 {
		t.Fatalf("an increment by a condition of a post only the primary has: %v, %d rows; want 1", err, n)
	}
	if likes := primary("SELECT COALESCE(SUM(n), 0) FROM post_likes_slots WHERE post_id = $1", fresh); likes != 11 {
		t.Fatalf("the primary's slots of the fresh post hold %d; want 11", likes)
	}

	// Plain loads read the lagging replica, row and counters alike.
	if views := o.cached(t, modelPost, old, "views"); views != 0 {
		t.Errorf("a load from the lagging replica: views %d; want its 0", views)
	}
	p.resume(t)
	if likes, views := exactly(t, o, modelPost, fresh, "likes"), o.cached(t, modelPost, old, "views"); likes != 11 || views != 50 {
		t.Errorf("loads once the replica caught up: likes %d, views %d; want 11 and 50", likes, views)
	}
}
