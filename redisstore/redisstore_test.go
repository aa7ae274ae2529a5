package redisstore

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hotcounter/hotcounter/internal/countersql"
	"github.com/hotcounter/hotcounter/internal/testdb"
	"github.com/hotcounter/hotcounter/internal/writebehind"
)

func testStore(t *testing.T) *Store {
	rdb, prefix := testdb.Redis(t)
	return New(rdb, Options{Prefix: prefix, Shards: 4})
}

// A client that sends an add again (go-redis retries after a read timeout)
// sends the same sequence number: the second adds nothing, nor does an
// older one that arrives late.
func TestAnAddSentTwiceCountsOnce(t *testing.T) {
	s := testStore(t)
	c := &writebehind.Counter{Name: "Post.Likes", Table: countersql.Table{Slots: "post_likes_slots"}}
	field, _ := writebehind.EncodeKey(uint(7))
	b := &batcher{s: s, base: s.base(c, s.shardOf(field))}
	five := &batch{sums: map[string]int64{field: 5}, order: []string{field}}
	one := &batch{sums: map[string]int64{field: 1}, order: []string{field}}
	for _, send := range []struct {
		bt       *batch
		instance string
		seq      int64
	}{{five, "a", 1}, {five, "a", 1}, {one, "a", 2}, {five, "a", 1}, {one, "b", 1}} {
		if err := b.send(send.bt, send.instance, send.seq); err != nil {
			t.Fatal(err)
		}
	}
	n, err := s.Pending(context.Background(), c, uint(7))
	if err != nil || n != 7 {
		t.Fatalf("pending = %d, %v; want 7 (a: 5 once, then 1; b: 1)", n, err)
	}
}

// Take hands back the batch in flight until Done forgets it; increments
// that arrive meanwhile wait in the pending hash for the next batch.
func TestTakeResumesTheBatchInFlightUntilDone(t *testing.T) {
	ctx := context.Background()
	s := testStore(t)
	c := &writebehind.Counter{Name: "Post.Likes", Table: countersql.Table{Slots: "post_likes_slots"}}
	for _, k := range []int64{1, 2, 3} {
		if err := s.Add(ctx, c, k, k*10); err != nil {
			t.Fatal(err)
		}
	}
	first, err := s.Take(ctx, []*writebehind.Counter{c})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Add(ctx, c, int64(1), 1); err != nil {
		t.Fatal(err)
	}
	again, err := s.Take(ctx, []*writebehind.Counter{c})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(first) != fmt.Sprint(again) || total(first) != 60 {
		t.Fatalf("taken %v then %v; want the same batches holding 60", first, again)
	}
	for _, b := range first {
		if err := s.Done(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	next, err := s.Take(ctx, []*writebehind.Counter{c})
	if err != nil {
		t.Fatal(err)
	}
	if total(next) != 1 || len(next) != 1 || next[0].ID == first[0].ID {
		t.Fatalf("after Done, taken %v; want one new batch holding the 1 added meanwhile", next)
	}
}

func total(bs []writebehind.StoreBatch) int64 {
	var n int64
	for _, b := range bs {
		for _, e := range b.Entries {
			n += e.Delta
		}
	}
	return n
}

// Take sends its scripts by hash in one pipeline; a server that does not
// know the script (restarted, or a replica just promoted) is sent it, and
// the batches come back all the same.
func TestTakeAfterTheServerForgotItsScripts(t *testing.T) {
	ctx := context.Background()
	s := testStore(t)
	c := &writebehind.Counter{Name: "Post.Likes", Table: countersql.Table{Slots: "post_likes_slots"}}
	for _, k := range []int64{1, 2, 3, 4, 5} {
		if err := s.Add(ctx, c, k, k); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	got, err := s.Take(ctx, []*writebehind.Counter{c})
	if err != nil || total(got) != 15 {
		t.Fatalf("taken %v, %v after SCRIPT FLUSH; want batches holding 15", got, err)
	}
}

// Two descriptions of one counter (two buffers on one store, or a counter
// named two ways) share its shards' sequence numbers: every add of either
// counts, none looks like a replay of the other's.
func TestTwoDescriptionsOfOneCounterAddUp(t *testing.T) {
	ctx := context.Background()
	s := testStore(t)
	a := &writebehind.Counter{Name: "Post.Likes", Table: countersql.Table{Slots: "post_likes_slots"}}
	b := &writebehind.Counter{Name: "Post.likes", Table: countersql.Table{Slots: "post_likes_slots"}}
	var wg sync.WaitGroup
	for i := range 200 {
		c := a
		if i%2 == 1 {
			c = b
		}
		wg.Go(func() {
			if err := s.Add(ctx, c, int64(1), 1); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if n, err := s.Pending(ctx, a, int64(1)); err != nil || n != 200 {
		t.Fatalf("pending = %d, %v; want the 200 added through either description", n, err)
	}
}

// A store lists every counter it adds to, so that another store on the
// same prefix (another process) finds them; Backlog counts the adds it
// holds, pending or in flight, and how old the oldest is, until Done.
func TestCountersAndBacklogSeenByAnotherStore(t *testing.T) {
	ctx := context.Background()
	rdb, prefix := testdb.Redis(t)
	writer := New(rdb, Options{Prefix: prefix, Shards: 4})
	likes := &writebehind.Counter{Name: "Post.Likes", Column: "likes", Table: countersql.Table{Parent: "posts", Slots: "post_likes_slots"}}
	hits := &writebehind.Counter{Name: "Page.Hits", Column: "hits", Table: countersql.Table{Parent: "pages", Slots: "page_hits_slots"}}
	for k := range 5 {
		if err := writer.Add(ctx, likes, int64(k), 2); err != nil {
			t.Fatal(err)
		}
	}
	if err := writer.Add(ctx, hits, "home", 1); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)

	other := New(rdb, Options{Prefix: prefix, Shards: 2}) // fewer shards: it reads the writer's four
	listed, err := other.Counters(ctx)
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(listed, func(x, y writebehind.StoredCounter) int { return strings.Compare(x.Table, y.Table) })
	want := []writebehind.StoredCounter{{Table: "page_hits_slots", Parent: "pages", Column: "hits"}, {Table: "post_likes_slots", Parent: "posts", Column: "likes"}}
	if !slices.Equal(listed, want) {
		t.Fatalf("Counters = %v, want %v", listed, want)
	}
	backlog := func() writebehind.Backlog {
		t.Helper()
		bl, err := other.Backlog(ctx, []string{"post_likes_slots"})
		if err != nil {
			t.Fatal(err)
		}
		return bl["post_likes_slots"]
	}
	if g := backlog(); !g.Held || g.Increments != 5 || g.Oldest < 20*time.Millisecond || g.Oldest > time.Minute {
		t.Fatalf("backlog = %+v, want 5 increments held, the oldest at least 20ms old", g)
	}
	batches, err := other.Take(ctx, []*writebehind.Counter{likes})
	if err != nil || total(batches) != 10 {
		t.Fatalf("taken %v, %v; want every shard's batch, 10 in all", batches, err)
	}
	var adds int64
	for _, b := range batches {
		adds += b.Increments
	}
	if g := backlog(); adds != 5 || !g.Held || g.Increments != 5 {
		t.Fatalf("batches of %d adds; backlog in flight %+v; want 5 and 5", adds, g)
	}
	for _, b := range batches {
		if err := other.Done(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	if g := backlog(); g != (writebehind.Backlog{}) {
		t.Fatalf("backlog after Done = %+v, want nothing held", g)
	}
}
