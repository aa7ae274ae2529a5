package integration_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/hotcounter/hotcounter/integration_test/ent"
)

// An UpdateOneID of a counter alone sends the increment and the read of the
// entity, without ent's empty update around them (BEGIN, a read, COMMIT):
// two statements (on PostgreSQL the increment returns the new total; on
// MariaDB the read selects it). The entity it returns shows the counter as
// a load does.
func TestEntUpdateOneOfACounterSendsTheWriteAndTheRead(t *testing.T) {
	eachEnt(t, func(t *testing.T, e *entEnv) {
		ctx, c := context.Background(), e.client
		p := c.Post.Create().SetTitle("viral").SetLikes(4).SaveX(ctx)
		var got *ent.Post
		n := entStatements(e, func() { got = c.Post.UpdateOneID(p.ID).AddLikes(3).SaveX(ctx) })
		if got.Likes != 7 || got.Title != "viral" {
			t.Fatalf("UpdateOne returned likes=%d title=%q, want 7 and viral", got.Likes, got.Title)
		}
		if n != 2 {
			t.Fatalf("an increment through UpdateOneID sent %d statements, want 2", n)
		}
		if loaded := c.Post.GetX(ctx, p.ID); loaded.Likes != 7 {
			t.Fatalf("loaded likes=%d, want 7", loaded.Likes)
		}
	}, on(pg, my))
}

// 32 writers incrementing one post through UpdateOneID outside
// transactions share the read of the entity as they share the write
// (TestConcurrentIncrementsShareStatements, for both ORMs): one read per
// write at most, each caller getting an entity of its own that shows at
// least its own increment, and the total exact.
func TestEntCombinedIncrementsShareTheReadOfTheEntity(t *testing.T) {
	eachEnt(t, func(t *testing.T, e *entEnv) {
		ctx, c := context.Background(), e.client
		p := c.Post.Create().SetTitle("viral").SaveX(ctx)
		const writers, each = 32, 40
		var (
			low      atomic.Int64
			returned sync.Map // *ent.Post -> true
			shared   atomic.Int64
		)
		selects := e.selects.Load()
		n := entStatements(e, func() {
			hammer(t, writers, each, func() error {
				got, err := c.Post.UpdateOneID(p.ID).AddLikes(1).Save(ctx)
				if err == nil && got.Likes < 1 {
					low.Add(1)
				}
				if _, seen := returned.LoadOrStore(got, true); seen && got != nil {
					shared.Add(1)
				}
				return err
			})
		})
		reads := e.selects.Load() - selects
		writes := n - reads
		if shared.Load() > 0 {
			t.Fatalf("%d callers got an entity another caller got too", shared.Load())
		}
		if got := c.Post.GetX(ctx, p.ID).Likes; got != writers*each {
			t.Fatalf("likes=%d, want %d", got, writers*each)
		}
		if low.Load() > 0 {
			t.Fatalf("%d returned entities did not show their own increment", low.Load())
		}
		if writes >= writers*each {
			t.Fatalf("%d writes for %d increments: none shared", writes, writers*each)
		}
		if reads > writes {
			t.Fatalf("%d reads of the entity for %d writes: the read is not shared by the increments a write carried", reads, writes)
		}
		t.Logf("%s: %d increments, %d writes, %d reads", e.kind, writers*each, writes, reads)
	}, on(pg, my), pool(writersPool))
}
