package gormcounter

import (
	"context"
	"fmt"
	"reflect"
	"sync"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
	"gorm.io/gorm/schema"

	"github.com/hotcounter/hotcounter"
	"github.com/hotcounter/hotcounter/internal/engine"
	"github.com/hotcounter/hotcounter/internal/spec"
	"github.com/hotcounter/hotcounter/internal/writebehind"
)

// Buffer is write-behind for counters: Increment adds to an in-memory delta
// and returns; every interval the buffer writes all deltas, one sorted
// multi-row upsert per slot table, in one transaction that also records
// the batch in a ledger table, so a flush retried after an unknown COMMIT
// outcome never counts twice. A failed flush keeps its deltas and retries
// with backoff. Nothing acknowledged is lost while the process lives; a
// crash loses what was not yet flushed: about one interval's deltas while
// flushes succeed, everything held (up to MaxPending entries) while they
// fail. Call Close to flush and stop.
//
// With hotcounter.BufferConfig.Store (package redisstore) the deltas wait in Redis
// instead, shared by every process, and every buffer on the store flushes
// every counter of the models its plugin declares (Config.Models, the
// models AutoMigrate saw, those of every statement so far), whichever
// process added to it: a restarted process, or one that only flushes,
// writes what a dead one left. docs/write-behind.md.
//
//	buf, err := gormcounter.NewBuffer(ctx, db, hotcounter.BufferConfig{Interval: time.Second})
//	defer buf.Close(ctx)
//	buf.Increment(ctx, &Post{ID: id}, "Likes", 1)
//
// Loads read what has been flushed; add Pending for this process's own
// increments not yet written.
type Buffer struct {
	p  *Plugin
	db *gorm.DB
	b  *writebehind.Buffer

	mu       sync.Mutex
	counters map[*counter]*writebehind.Counter
	// targets caches what target resolves per model type and field, as
	// GORM caches a type's schema.
	targets sync.Map // targetKey -> resolved
}

type targetKey struct {
	typ   reflect.Type
	field string
}

type resolved struct {
	c   *writebehind.Counter
	pk  *schema.Field
	hot string // the counter's name among hot keys: table.column
	// fits refuses a delta beyond the field's range (counter.deltaFits).
	fits func(delta int64) error
}

// NewBuffer starts a write-behind buffer on db, which must have the plugin.
// It creates the ledger table if missing, under ctx, and starts one
// goroutine, which runs until Close.
func NewBuffer(ctx context.Context, db *gorm.DB, cfg hotcounter.BufferConfig) (*Buffer, error) {
	p, err := pluginOf(db)
	if err != nil {
		return nil, err
	}
	buf := &Buffer{p: p, db: db, counters: map[*counter]*writebehind.Counter{}}
	b, err := writebehind.New(ctx, gormSession{gormConn{db: db.Session(&gorm.Session{NewDB: true, Context: context.Background()})}}, p.dialect, cfg, p.onError(db), p.obs, buf.declared)
	if err != nil {
		return nil, fmt.Errorf("gormcounter: NewBuffer: %w", err)
	}
	buf.b = b
	return buf, nil
}

// declared is every counter of the models the plugin has settled (those of
// Config.Models, of AutoMigrate, and of every statement so far): with a
// Store, a flush writes what the store holds for them, whichever process
// added it.
func (b *Buffer) declared() []*writebehind.Counter {
	var out []*writebehind.Counter
	for _, m := range b.p.settledModels() {
		for _, c := range m.counters {
			out = append(out, b.counterFor(c, m.schema.Table))
		}
	}
	return out
}

// target returns the counter named field of model and the model's primary
// key, which must be set.
func (b *Buffer) target(model any, field string) (*writebehind.Counter, any, error) {
	t, key, err := b.targetOf(model, field)
	return t.c, key, err
}

// targetOf is target with the rest of what it resolved.
func (b *Buffer) targetOf(model any, field string) (resolved, any, error) {
	rv := reflect.ValueOf(model)
	for rv.Kind() == reflect.Pointer {
		rv = rv.Elem()
	}
	if rv.Kind() != reflect.Struct {
		return resolved{}, nil, fmt.Errorf("gormcounter: Buffer: the model must be a struct naming its row by primary key (&Post{ID: id}), not %T", model)
	}
	tk := targetKey{rv.Type(), field}
	r, ok := b.targets.Load(tk)
	if !ok {
		var err error
		if r, err = b.resolve(model, field); err != nil {
			return resolved{}, nil, err
		}
		b.targets.Store(tk, r)
	}
	t := r.(resolved)
	key, zero := t.pk.ValueOf(context.Background(), rv)
	if zero {
		return resolved{}, nil, fmt.Errorf("gormcounter: Buffer %s: the model's primary key is not set: %w", t.c.Name, gorm.ErrMissingWhereClause)
	}
	return t, key, nil
}

// resolve finds the counter field of model's type and its primary key.
func (b *Buffer) resolve(model any, field string) (resolved, error) {
	stmt := &gorm.Statement{DB: b.db}
	if err := stmt.Parse(model); err != nil {
		return resolved{}, fmt.Errorf("gormcounter: Buffer: %w", err)
	}
	m, err := b.p.model(b.db, stmt.Schema)
	if err != nil {
		return resolved{}, err
	}
	var c *counter
	if m != nil {
		c = m.lookup(field)
	}
	if c == nil {
		return resolved{}, fmt.Errorf("gormcounter: Buffer %s.%s: %w (tag it `gorm:\"counter\"`)", stmt.Schema.Name, field, hotcounter.ErrNotCounter)
	}
	if len(stmt.Schema.PrimaryFields) != 1 {
		return resolved{}, fmt.Errorf("gormcounter: Buffer %s: %w: the model needs one primary key", c.name(), hotcounter.ErrInvalidCounter)
	}
	wc := b.counterFor(c, stmt.Schema.Table)
	return resolved{c: wc, pk: stmt.Schema.PrimaryFields[0], hot: wc.Table.Parent + "." + wc.Column, fits: c.bufferedDeltaFits}, nil
}

// counterFor is the buffer's description of counter c of parent table.
func (b *Buffer) counterFor(c *counter, parent string) *writebehind.Counter {
	b.mu.Lock()
	defer b.mu.Unlock()
	wc := b.counters[c]
	if wc == nil {
		t := c.table
		t.Parent = parent
		wc = &writebehind.Counter{Name: c.name(), Column: c.field.DBName, Table: t, Slots: c.opts.Written(), Append: c.opts.Mode == spec.Append}
		b.counters[c] = wc
	}
	return wc
}

// Live returns a clause under which a query's loads are exact and include
// what this buffer holds, not yet written: rollup counters read their
// pending slots (as with [Live]), and every counter adds the buffer's
// pending delta for each loaded row, read in one round trip per statement
// (one Redis pipeline with a Redis store, which holds every instance's
// increments; this process's memory otherwise):
//
//	db.Clauses(buf.Live()).Find(&posts)
//
// Plain loads read SQL only.
func (b *Buffer) Live() clause.Expression { return bufferLive{b} }

type bufferLive struct{ b *Buffer }

type bufferKey struct{}

// ModifyStatement marks the statement's context, which Preload passes on.
func (l bufferLive) ModifyStatement(stmt *gorm.Statement) {
	ctx := stmt.Context
	if ctx == nil {
		ctx = context.Background()
	}
	stmt.Context = context.WithValue(WithLive(ctx), bufferKey{}, l.b)
}

// Build writes nothing: the clause changes how the statement is filled.
func (bufferLive) Build(clause.Builder) {}

// addPending adds the buffer's pending deltas to the rows a fill loaded.
func (b *Buffer) addPending(ctx context.Context, groups []*fillGroup) error {
	var items []writebehind.PendingItem
	var where []*fillGroup
	for _, g := range groups {
		wc := b.counterFor(g.c, g.c.table.Parent)
		for _, k := range g.keys {
			items = append(items, writebehind.PendingItem{Counter: wc, Key: k})
			where = append(where, g)
		}
	}
	if len(items) == 0 {
		return nil
	}
	pending, err := b.b.PendingMany(ctx, items)
	if err != nil {
		return fmt.Errorf("gormcounter: Buffer: pending: %w", err)
	}
	for i, n := range pending {
		if n == 0 {
			continue
		}
		g := where[i]
		for _, t := range g.by[engine.KeyText(items[i].Key)] {
			cur, _ := t.dst.ValueOf(ctx, t.row)
			v, ok := toInt64(cur)
			if !ok {
				return fmt.Errorf("gormcounter: Buffer: %s holds %v", g.c.name(), cur)
			}
			if err := t.dst.Set(ctx, t.row, v+n); err != nil {
				return fmt.Errorf("gormcounter: fill %s: %w", g.c.name(), err)
			}
		}
	}
	return nil
}

// Increment adds delta to the counter field of the row model names by its
// primary key (&Post{ID: id}), in memory; the next flush writes it.
func (b *Buffer) Increment(ctx context.Context, model any, field string, delta int64) error {
	t, key, err := b.targetOf(model, field)
	if err != nil {
		return err
	}
	if err := t.fits(delta); err != nil {
		return err
	}
	if err := b.b.Add(ctx, t.c, key, delta); err != nil {
		return fmt.Errorf("gormcounter: Buffer %s: %w", t.c.Name, err)
	}
	if b.p.obs.Counting() {
		b.p.obs.CountWriteTo(t.hot, engine.KeyText(key), true)
	}
	return nil
}

// Pending returns this buffer's delta for the counter of the row model
// names, not yet written. A load plus Pending is the value including this
// process's own increments; with a Store (Redis), every instance's, read
// from the store under ctx: it returns when ctx ends, with its error.
func (b *Buffer) Pending(ctx context.Context, model any, field string) (int64, error) {
	c, key, err := b.target(model, field)
	if err != nil {
		return 0, err
	}
	return b.b.PendingIn(ctx, c, key)
}

// Flush writes what is pending now and returns when it is applied.
func (b *Buffer) Flush(ctx context.Context) error { return b.b.Flush(ctx) }

// Close flushes what is pending and stops the buffer; later increments fail.
func (b *Buffer) Close(ctx context.Context) error { return b.b.Close(ctx) }
