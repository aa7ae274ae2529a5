package entcounter_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"time"

	"entgo.io/ent"

	"github.com/hotcounter/hotcounter"
	"github.com/hotcounter/hotcounter/entcounter"
)

// Post is an ent schema with two counters.
type Post struct{ ent.Schema }

// Mixin declares the counters: likes (16 slots, summed on every load, no
// column) and views (64 slots, a cached column that rollup passes fold).
func (Post) Mixin() []ent.Mixin {
	return []ent.Mixin{
		entcounter.Counter("likes"),
		entcounter.Counter("views", entcounter.Slots(64), entcounter.Rollup()),
	}
}

// PostLikesSlot is the slot table of Post.likes: one line per counter.
type PostLikesSlot struct{ ent.Schema }

// Mixin makes it post_likes_slots.
func (PostLikesSlot) Mixin() []ent.Mixin {
	return []ent.Mixin{entcounter.SlotsOf(Post.Type, "likes")}
}

// Declaring counters in a schema package. examples/entquickstart is the
// whole program: schema, generation, increments, loads, rollup.
func ExampleCounter() {
	for _, m := range (Post{}).Mixin() {
		for _, f := range m.Fields() {
			log.Println(f.Descriptor().Name)
		}
	}
}

// Keeping rollup columns fresh: client is the generated *ent.Client (any
// value with the generated HotCounter method). A pass that fails goes to
// the Config's OnError (the client's logger when it is nil) and is
// retried at the next tick.
func ExampleRollupLoop() {
	var client entcounter.Source // ent.NewClient(...) in a real program
	if _, err := entcounter.Configure(client, entcounter.Config{OnError: func(err error) { log.Printf("counters: %v", err) }}); err != nil {
		log.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	go func() { _ = entcounter.RollupLoop(ctx, client, time.Second) }()
}

// Reading rollup counters exactly for one load.
func ExampleWithLive() {
	ctx := entcounter.WithLive(context.Background())
	_ = ctx // client.Post.Get(ctx, id): Views is column + pending slots
}

// Adopting a column that held counts before the field became a counter:
// migrate with WithCounters, deploy, then move the column onto slots and
// drop it once no old code writes it.
func ExampleMoveToSlots() {
	var client entcounter.Source // ent.NewClient(...) in a real program
	ctx := context.Background()
	// client.Schema.Create(ctx, entcounter.WithCounters(client)) first.
	moved, err := entcounter.MoveToSlots(ctx, client)
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("moved %d likes of %d posts; %d posts were busy: run again", moved.Amount, moved.Parents, moved.Busy)
}

// Declaring a counter over an existing column, kept in the schema while it
// holds counts (needed on SQLite, whose migrations copy tables).
func ExampleAdoptColumn() {
	_ = entcounter.Counter("likes", entcounter.AdoptColumn())
}

// A guarded counter: stock that never goes below zero. Take takes in full
// or refuses with hotcounter.ErrInsufficient; AddStock restocks, spread over the
// slots; a negative AddStock is refused with hotcounter.ErrNegativeGuarded.
func ExampleTake() {
	_ = entcounter.Counter("stock", entcounter.Guarded()) // in the Item schema's Mixin
	var client entcounter.Source                          // ent.NewClient(...), or a *ent.Tx to take in it
	ctx := context.Background()
	var short *hotcounter.Shortage
	switch err := entcounter.Take(ctx, client, "Item", "stock", 42, 2); {
	case errors.As(err, &short):
		log.Printf("sold out: %d left, %d asked", short.Left, short.Asked)
	case err != nil:
		log.Fatal(err)
	}
}

// A counter whose parents start at one slot row each and widen, up to 32
// rows, while their increments contend (docs/writes.md, slots=auto).
func ExampleAutoSlots() {
	m := entcounter.Counter("upvotes", entcounter.AutoSlots(32))
	for _, f := range m.Fields() {
		for _, a := range f.Descriptor().Annotations {
			if a.Name() == "HotCounter" { // what the extension reads at generation
				declared, _ := json.Marshal(a)
				fmt.Println(f.Descriptor().Name, string(declared))
			}
		}
	}
	// Output: upvotes {"slots":32,"autoslots":true}
}

// Writing the counters' part of a versioned migration: after ent's own
// file (migrate.NamedDiff, which writes the slot tables), the triggers,
// functions, fillfactor and first counts go into the next file.
func ExampleSchemaSQL() {
	var client entcounter.Source // ent.NewClient(...) in a real program
	// Nothing is written; on PostgreSQL the client reads whether the
	// database has Citus.
	script, err := entcounter.SchemaSQL(context.Background(), client)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Print(script.UpSQL()) // migrations/20261206000002_counters.up.sql
}
