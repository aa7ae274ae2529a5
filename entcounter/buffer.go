package entcounter

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/hotcounter/hotcounter"
	"github.com/hotcounter/hotcounter/internal/engine"
	"github.com/hotcounter/hotcounter/internal/entrt"
	"github.com/hotcounter/hotcounter/internal/writebehind"
)

// Buffer is write-behind for ent counters, the same as gormcounter's: Increment
// adds to an in-memory delta and returns; every interval all deltas are
// written in one transaction, one sorted multi-row upsert per slot table,
// with the batch id recorded in a ledger table so that a flush retried
// after an unknown COMMIT outcome never counts twice. Nothing acknowledged
// is lost while the process lives; a crash loses what was not yet
// flushed: about one interval's deltas while flushes succeed, everything
// held (up to MaxPending entries) while they fail. Close flushes and
// stops.
//
// With hotcounter.BufferConfig.Store (package redisstore) the deltas wait in Redis
// instead, shared by every process, and every buffer on the store flushes
// every counter of its client's schemas, whichever process added to it: a
// restarted process, or one that only flushes, writes what a dead one
// left. docs/write-behind.md.
//
//	buf, err := entcounter.NewBuffer(ctx, client, hotcounter.BufferConfig{})
//	defer buf.Close(ctx)
//	buf.Increment(ctx, "Post", post.FieldLikes, p.ID, 1)
//	client.Post.Buffered(buf).AddLikes(ctx, p.ID, 1) // the same, generated and typed
type Buffer struct {
	r entrt.Runtime
	b *writebehind.Buffer

	mu       sync.Mutex
	counters map[string]*writebehind.Counter // table.field -> the counter
	byName   map[string]named                // as Increment named it (Post.likes, posts.likes) -> the counter
}

// NewBuffer starts a write-behind buffer on the client (not a
// transaction). It creates the ledger table if missing and starts one
// goroutine.
func NewBuffer(ctx context.Context, src Source, cfg hotcounter.BufferConfig) (*Buffer, error) {
	r := src.HotCounter()
	if r.InTx() {
		return nil, errors.New("entcounter: NewBuffer needs the client, not a transaction")
	}
	dl, err := r.Dialect(ctx)
	if err != nil {
		return nil, err
	}
	buf := &Buffer{r: r, counters: map[string]*writebehind.Counter{}, byName: map[string]named{}}
	b, err := writebehind.New(ctx, entrt.NewSession(r), dl, cfg, r.OnError(), r.Observer(), buf.declared)
	if err != nil {
		return nil, fmt.Errorf("entcounter: NewBuffer: %w", err)
	}
	buf.b = b
	return buf, nil
}

// counter finds the counter field of schema typ (the type name, Post, its
// label, post, or its table, posts).
func (b *Buffer) counter(typ, field string) (*writebehind.Counter, entrt.Def, error) {
	k := typ + "." + field
	b.mu.Lock()
	n, ok := b.byName[k]
	b.mu.Unlock()
	if ok {
		return n.c, n.d, nil
	}
	d, ok := findDef(b.r, typ, field)
	if !ok {
		return nil, d, fmt.Errorf("entcounter: Buffer: %s.%s: %w", typ, field, hotcounter.ErrNotCounter)
	}
	c := b.counterOf(d)
	b.mu.Lock()
	b.byName[k] = named{c, d}
	b.mu.Unlock()
	return c, d, nil
}

// named is a counter as Increment named it.
type named struct {
	c *writebehind.Counter
	d entrt.Def
}

// counterOf is the buffer's one description of a counter, however its
// schema was named: the deltas of one row add up under one entry.
func (b *Buffer) counterOf(d entrt.Def) *writebehind.Counter {
	k := d.Table + "." + d.Field
	b.mu.Lock()
	defer b.mu.Unlock()
	c := b.counters[k]
	if c == nil {
		c = &writebehind.Counter{Name: d.Name(), Column: d.Field, Table: d.Tables(), Slots: d.Written(), Append: d.Append}
		b.counters[k] = c
	}
	return c
}

// declared is every counter of the client's schemas: with a Store, a flush
// writes what the store holds for them, whichever process added it.
func (b *Buffer) declared() []*writebehind.Counter {
	out := make([]*writebehind.Counter, 0, len(b.r.Defs))
	for _, d := range b.r.Defs {
		out = append(out, b.counterOf(d))
	}
	return out
}

// Increment adds delta to the counter field of schema typ (Post, post or
// posts) of the row with the given id, in memory; the next flush writes
// it. The add runs as client.Post.UpdateOneID(id).AddLikes(delta) does on
// the client given to NewBuffer: its hooks and the schema's privacy policy
// decide it, and with query interceptors (ent's soft-delete pattern) or a
// row they hide, it is refused as NotFound, before anything is buffered.
// Only the counter is buffered: what a hook sets besides it is not
// written.
func (b *Buffer) Increment(ctx context.Context, typ, field string, id any, delta int64) error {
	c, d, err := b.counter(typ, field)
	if err != nil {
		return err
	}
	if b.r.Add == nil {
		return fmt.Errorf("entcounter: Buffer %s: the generated code predates buffered adds through the client's hooks and privacy policy: run go generate: %w", c.Name, hotcounter.ErrNotConfigured)
	}
	return b.r.Add(entrt.WithBuffered(ctx, &entrt.Buffered{Type: d.Type, Field: d.Field, ID: id, Sink: func(ctx context.Context, key any, delta int64) error {
		if err := b.b.Add(ctx, c, key, delta); err != nil {
			return fmt.Errorf("entcounter: Buffer %s: %w", c.Name, err)
		}
		b.r.Observer().CountWrite(c.Table.Parent, c.Column, engine.KeyText(key), true)
		return nil
	}}), d.Type, d.Field, id, delta)
}

// Pending returns this buffer's delta for the counter of the row named by
// schema type, field and id, not yet written. A load plus Pending includes
// this process's own increments; with a Store (Redis), every instance's,
// read from the store under ctx: it returns when ctx ends, with its error.
func (b *Buffer) Pending(ctx context.Context, typ, field string, id any) (int64, error) {
	c, _, err := b.counter(typ, field)
	if err != nil {
		return 0, err
	}
	return b.b.PendingIn(ctx, c, id)
}

// Live returns a context under which loads are exact (as under
// [WithLive]) and include what this buffer holds, not yet written, read in
// one round trip per load (one Redis pipeline with a Redis store, which
// holds every instance's increments; this process's memory otherwise):
//
//	p := client.Post.GetX(buf.Live(ctx), id)
func (b *Buffer) Live(ctx context.Context) context.Context {
	return entrt.WithPending(ctx, func(ctx context.Context, defs []entrt.Def, keys []any) ([][]int64, error) {
		var items []writebehind.PendingItem
		for _, d := range defs {
			c, _, err := b.counter(d.Type, d.Field)
			if err != nil {
				return nil, err
			}
			for _, k := range keys {
				items = append(items, writebehind.PendingItem{Counter: c, Key: k})
			}
		}
		flat, err := b.b.PendingMany(ctx, items)
		if err != nil {
			return nil, err
		}
		out := make([][]int64, len(defs))
		for i := range defs {
			out[i] = flat[i*len(keys) : (i+1)*len(keys)]
		}
		return out, nil
	})
}

// Flush writes what is pending now and returns when it is applied.
func (b *Buffer) Flush(ctx context.Context) error { return b.b.Flush(ctx) }

// Close flushes what is pending and stops the buffer; later Adds fail.
func (b *Buffer) Close(ctx context.Context) error { return b.b.Close(ctx) }
