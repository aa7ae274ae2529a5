// Package writebehind adds counter increments up in memory and writes them
// in batches: every interval (or sooner, when the pending set grows past a
// size), all pending deltas go to the slot tables in one transaction, one
// multi-row upsert per slot table, sorted by (owner, slot). An increment
// returns as soon as it is added.
//
// Nothing acknowledged is lost while the process lives: a failed flush keeps
// its deltas and is retried with backoff, and memory is bounded (past the
// bound an increment blocks or fails, as configured; it is never dropped).
// Flushes are idempotent: each batch carries an id that its transaction
// records in a ledger table, so a batch whose COMMIT outcome is unknown
// (the connection was cut during it) is retried without counting twice.
//
// A crash loses the pending deltas: at most one interval's worth. With a
// Store (Redis) the deltas wait in the store instead, and any process that
// declares their counters flushes them (store.go).
package writebehind

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hotcounter/hotcounter"
	"github.com/hotcounter/hotcounter/internal/countersql"
	"github.com/hotcounter/hotcounter/internal/engine"
	"github.com/hotcounter/hotcounter/internal/observe"
)

// Counter is one counter the buffer writes: its tables and slot count.
type Counter struct {
	Name   string // for errors: Model.Field
	Column string // for metrics: the counter's column (or ent field)
	Table  countersql.Table
	Slots  int
	// Append: the counter's table holds delta rows (append mode), not slots.
	Append bool
}

// ErrClosed is returned by Add after Close.
var ErrClosed = errors.New("write-behind buffer is closed")

// Config is a buffer's settings: what the application gave, with its
// store as the buffer calls it.
type Config struct {
	hotcounter.BufferConfig
	// store is BufferConfig.Store, nil without one.
	store Store
	// onError hears what goes wrong in the buffer's goroutine: a failed
	// flush (retried), the ledger's pruning, and with a Store, increments
	// of counters no model of the process declares and a backlog past
	// MaxBacklog under BufferKeep. Never nil.
	onError func(error)
}

func (c *Config) check() error {
	if c.Store != nil {
		st, ok := c.Store.(Store)
		if !ok {
			return fmt.Errorf("Store %T (%s) is not a store a Buffer writes through: use redisstore.New", c.Store, c.Store.StoreName())
		}
		c.store = st
	}
	switch {
	case c.OnFull < hotcounter.BufferBlock || c.OnFull > hotcounter.BufferKeep:
		return fmt.Errorf("OnFull %d is not BufferBlock, BufferFail or BufferKeep", c.OnFull)
	case c.Store == nil && c.OnFull == hotcounter.BufferKeep:
		return errors.New("OnFull BufferKeep needs a Store: in memory, increments past MaxPending are refused or wait")
	case c.Store == nil && c.MaxBacklog != 0:
		return errors.New("MaxBacklog bounds a Store's backlog: without a Store, MaxPending bounds the memory held")
	case c.MaxBacklog < 0:
		return fmt.Errorf("MaxBacklog %d is below zero", c.MaxBacklog)
	}
	return nil
}

func (c *Config) defaults() {
	if c.Interval <= 0 {
		c.Interval = time.Second
	}
	if c.FlushAt <= 0 {
		c.FlushAt = 10_000
	}
	if c.MaxPending <= 0 {
		c.MaxPending = 100_000
	}
	if c.FlushAt > c.MaxPending {
		c.FlushAt = c.MaxPending
	}
	if c.Ledger == "" {
		c.Ledger = "hotcounter_ledger"
	}
	if c.LedgerKeep <= 0 {
		c.LedgerKeep = time.Hour
	}
}

type entry struct {
	c   *Counter
	key string // engine.KeyText of the parent key
}

type pendingDelta struct {
	key   any
	delta int64
}

// batch is a set of deltas with the id its flush records in the ledger.
type batch struct {
	id      string
	entries map[entry]pendingDelta
}

// Buffer holds pending increments and flushes them. Its methods are safe
// for concurrent use.
type Buffer struct {
	s   engine.Session
	d   engine.Dialect
	cfg Config
	// declared lists the counters the process declares (nil: none but
	// those added to): with a Store, a flush writes what the store holds
	// for each of them.
	declared func() []*Counter

	obs     *observe.Observer
	unwatch []func()

	// With a Store: the backlog of the declared counters the last survey
	// read, what this buffer added since, and what the gauges report.
	measured, addedSince atomic.Int64
	lastKeepReport       atomic.Int64 // Unix nanoseconds of the last report of a backlog past MaxBacklog
	backlogItems         []observe.BacklogItem
	reported             map[string]time.Time // slot table -> last report of its undeclared increments

	mu        sync.Mutex
	known     map[*Counter]bool // with a Store: the counters added to, which this buffer flushes
	knownFast sync.Map          // the same, read without b.mu on every add
	isClosed  atomic.Bool       // closed, read without b.mu
	counters  []*Counter
	room      *sync.Cond // signalled when entries leave
	pending   map[entry]pendingDelta
	inflight  *batch // being written; kept until it is known to be applied
	closed    bool

	flushNow  chan struct{}
	stop      chan struct{}
	stopOnce  sync.Once
	done      chan struct{}
	flushing  chan struct{} // holds a token while a flush runs: one at a time
	loopCtx   context.Context
	loopStop  context.CancelFunc // cancels the loop's flush when Close gives up
	lastPrune time.Time
}

// Ledger returns the table that records cfg's applied batches.
func Ledger(given hotcounter.BufferConfig) string {
	cfg := Config{BufferConfig: given}
	cfg.defaults()
	return cfg.Ledger
}

// New starts a buffer that writes through s. It creates the ledger table
// if missing, and starts the goroutine that flushes every interval.
// declared lists the counters the process declares (called at every flush
// with a Store; nil for none but those added to).
func New(ctx context.Context, s engine.Session, d engine.Dialect, given hotcounter.BufferConfig, onError func(error), obs *observe.Observer, declared func() []*Counter) (*Buffer, error) {
	cfg := Config{BufferConfig: given, onError: onError}
	if err := cfg.check(); err != nil {
		return nil, err
	}
	cfg.defaults()
	// A ledger that a migration file made (BufferSchemaSQL) is used as it
	// is: an application role without the right to create tables (the
	// public schema of PostgreSQL 15 grants none) starts all the same.
	exists, err := engine.QueryKeys(ctx, s, func(w countersql.Writer) { d.TableExists(w, cfg.Ledger) })
	if err != nil {
		return nil, fmt.Errorf("look for ledger %s: %w", cfg.Ledger, err)
	}
	if len(exists) == 0 {
		for _, step := range d.CreateLedger(cfg.Ledger) {
			if _, err := s.Exec(ctx, step); err != nil {
				return nil, fmt.Errorf("create ledger %s: %w", cfg.Ledger, err)
			}
		}
	}
	b := &Buffer{
		s: s, d: d, cfg: cfg, declared: declared,
		pending:  map[entry]pendingDelta{},
		flushNow: make(chan struct{}, 1),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
		flushing: make(chan struct{}, 1),
	}
	b.loopCtx, b.loopStop = context.WithCancel(context.Background())
	b.room = sync.NewCond(&b.mu)
	b.obs = obs
	b.unwatch = append(b.unwatch, obs.WatchPending(b.pendingByCounter))
	if cfg.store != nil {
		b.unwatch = append(b.unwatch, obs.WatchBacklog(b.storeBacklog))
	}
	go b.loop()
	return b, nil
}

// pendingByCounter sums what is held (pending and in flight) per parent
// table and counter column, for the pending gauge.
func (b *Buffer) pendingByCounter() map[[2]string]int64 {
	out := map[[2]string]int64{}
	b.mu.Lock()
	defer b.mu.Unlock()
	add := func(m map[entry]pendingDelta) {
		for e, p := range m {
			out[[2]string{e.c.Table.Parent, e.c.Column}] += p.delta
		}
	}
	add(b.pending)
	if b.inflight != nil {
		add(b.inflight.entries)
	}
	return out
}

func (b *Buffer) held() int {
	n := len(b.pending)
	if b.inflight != nil {
		n += len(b.inflight.entries)
	}
	return n
}

// Add adds delta to the counter of the parent with the given key. It
// returns once the delta is held in memory; the database sees it at the
// next flush.
func (b *Buffer) Add(ctx context.Context, c *Counter, key any, delta int64) error {
	if rv := reflect.ValueOf(key); rv.CanUint() && rv.Uint() > math.MaxInt64 {
		// No database key column holds it: the flush could never write it.
		return fmt.Errorf("key %v is out of range of the database's integers", key)
	}
	if b.cfg.store != nil {
		return b.addToStore(ctx, c, key, delta)
	}
	e := entry{c: c, key: engine.KeyText(key)}
	b.mu.Lock()
	defer b.mu.Unlock()
	for {
		if b.closed {
			return ErrClosed
		}
		if _, ok := b.pending[e]; ok || b.held() < b.cfg.MaxPending {
			break
		}
		if b.cfg.OnFull == hotcounter.BufferFail {
			return fmt.Errorf("%w (%d entries pending)", hotcounter.ErrBufferFull, b.held())
		}
		b.kick()
		if err := b.wait(ctx); err != nil {
			return err
		}
	}
	p := b.pending[e]
	p.key, p.delta = key, p.delta+delta
	b.pending[e] = p
	if len(b.pending) >= b.cfg.FlushAt {
		b.kick()
	}
	return nil
}

// wait waits for room, with b.mu held, until ctx ends.
func (b *Buffer) wait(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	stop := context.AfterFunc(ctx, func() {
		b.mu.Lock()
		b.room.Broadcast()
		b.mu.Unlock()
	})
	defer stop()
	b.room.Wait()
	return ctx.Err()
}

func (b *Buffer) kick() {
	select {
	case b.flushNow <- struct{}{}:
	default:
	}
}

// Pending returns the delta held for a counter of one parent, not yet
// written: a reader can add it to what it loaded to see its own process's
// increments.
func (b *Buffer) Pending(c *Counter, key any) int64 {
	e := entry{c: c, key: engine.KeyText(key)}
	b.mu.Lock()
	defer b.mu.Unlock()
	n := b.pending[e].delta
	if b.inflight != nil {
		n += b.inflight.entries[e].delta
	}
	return n
}

// PendingIn is Pending for a buffer with or without a Store: what the
// store holds (every app instance's increments), else this process's.
func (b *Buffer) PendingIn(ctx context.Context, c *Counter, key any) (int64, error) {
	if b.cfg.store != nil {
		return b.cfg.store.Pending(ctx, c, key)
	}
	return b.Pending(c, key), nil
}

func (b *Buffer) loop() {
	defer close(b.done)
	t := time.NewTicker(b.cfg.Interval)
	defer t.Stop()
	failures := 0
	for {
		select {
		case <-b.stop:
			return
		case <-t.C:
		case <-b.flushNow:
		}
		if err := b.Flush(b.loopCtx); err != nil {
			failures++
			b.cfg.onError(fmt.Errorf("write-behind: a flush failed (retried): %w", err))
			// Back off: 50 ms doubling to the interval, with jitter.
			d := min(b.cfg.Interval, time.Duration(1<<min(failures, 10))*25*time.Millisecond)
			select {
			case <-b.stop:
				return
			case <-time.After(d/2 + rand.N(d/2+1)):
			}
			b.kick()
			continue
		}
		failures = 0
	}
}

// Flush writes what is pending now, and returns when it is applied or
// the attempt failed (the deltas are then kept for the next one).
func (b *Buffer) Flush(ctx context.Context) error {
	select {
	case b.flushing <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-b.flushing }()
	if b.cfg.store != nil {
		if err := b.flushStore(ctx); err != nil {
			return err
		}
		b.prune(ctx)
		return nil
	}
	// A batch that failed before goes first, with its id; then what is
	// pending now. Two rounds at most: increments added meanwhile wait for
	// the next flush.
	for round := 0; round < 2; round++ {
		b.mu.Lock()
		if b.inflight == nil {
			if len(b.pending) == 0 {
				b.mu.Unlock()
				break
			}
			b.inflight = &batch{id: newID(), entries: b.pending}
			b.pending = map[entry]pendingDelta{}
		}
		bt := b.inflight
		b.mu.Unlock()

		if err := b.apply(ctx, bt); err != nil {
			b.obs.Flush(ctx, nil, err)
			return err
		}
		written := map[[2]string]int64{}
		for e, p := range bt.entries {
			written[[2]string{e.c.Table.Parent, e.c.Column}] += p.delta
		}
		b.obs.Flush(ctx, written, nil)
		b.mu.Lock()
		b.inflight = nil
		b.room.Broadcast()
		b.mu.Unlock()
	}
	b.prune(ctx)
	return nil
}

// prune forgets batch ids older than LedgerKeep, at most once a minute, in
// a statement of its own: inside every flush it would scan and lock the
// ledger rows of other processes' flushes.
func (b *Buffer) prune(ctx context.Context) {
	if time.Since(b.lastPrune) < time.Minute {
		return
	}
	b.lastPrune = time.Now()
	before := time.Now().Add(-b.cfg.LedgerKeep).UnixMilli()
	if _, err := b.s.Exec(ctx, func(w countersql.Writer) { b.d.LedgerPrune(w, b.cfg.Ledger, before) }); err != nil {
		b.cfg.onError(fmt.Errorf("write-behind ledger prune: %w", err))
	}
}

// apply writes a batch in one transaction with its ledger row. A batch
// whose ledger row is already there was applied by an earlier attempt
// whose COMMIT reply was lost, or by another process that took it from
// the store too: it is done, not failed.
func (b *Buffer) apply(ctx context.Context, bt *batch) error {
	byCounter := map[*Counter][]pendingDelta{}
	var order []*Counter
	for e, p := range bt.entries {
		if p.delta == 0 {
			continue
		}
		if _, ok := byCounter[e.c]; !ok {
			order = append(order, e.c)
		}
		byCounter[e.c] = append(byCounter[e.c], p)
	}
	slices.SortFunc(order, func(x, y *Counter) int { return strings.Compare(x.Table.Slots, y.Table.Slots) })
	applied := false
	err := b.s.Begin(ctx, false, func(tx engine.Session) error {
		added, err := tx.Exec(ctx, func(w countersql.Writer) { b.d.LedgerAdd(w, b.cfg.Ledger, bt.id, time.Now().UnixMilli()) })
		if err != nil {
			return err
		}
		if added == 0 {
			applied = true
			return nil
		}
		for _, c := range order {
			if err := b.write(ctx, tx, c, byCounter[c]); err != nil {
				return fmt.Errorf("%s: %w", c.Name, err)
			}
		}
		return nil
	})
	if err != nil && !applied {
		return fmt.Errorf("write-behind flush %s: %w", bt.id, err)
	}
	if applied {
		b.obs.Replay(ctx)
	}
	return nil
}

// write adds one counter's deltas, sorted by owner: a slot counter's the
// database's way (engine.AddEach: on PostgreSQL and SQLite one upsert, a
// random slot per owner; on MySQL/MariaDB the increments' statements, one
// slot for the flush), an append counter's as delta rows. Keys are written
// as the increments spelled them, and the database matches them to its
// rows (its collation may differ from Go's equality). The deltas of
// parents deleted since their increment are dropped (their counts went
// with them).
func (b *Buffer) write(ctx context.Context, tx engine.Session, c *Counter, deltas []pendingDelta) error {
	keys := make([]any, len(deltas))
	byKey := make(map[string]int64, len(deltas))
	for i, p := range deltas {
		keys[i] = p.key
		byKey[engine.KeyText(p.key)] = p.delta
	}
	keys = engine.SortKeys(keys)
	amounts := make([]int64, len(keys))
	for i, k := range keys {
		amounts[i] = byKey[engine.KeyText(k)]
	}
	if !c.Append {
		return engine.AddEach(ctx, tx, b.d, c.Table, c.Slots, keys, amounts)
	}
	return engine.SkippingGone(ctx, tx, len(keys), func(from, to int) error {
		_, err := tx.Exec(ctx, func(w countersql.Writer) { b.d.AppendRows(w, c.Table, keys[from:to], amounts[from:to]) })
		return err
	})
}

// Close flushes what is pending, stops the flushing goroutine, and refuses
// further increments. If ctx ends first, Close returns its error; the
// deltas it could not write stay held, and a later Close tries again (they
// are lost only if the process ends).
func (b *Buffer) Close(ctx context.Context) error {
	b.mu.Lock()
	b.closed = true
	b.isClosed.Store(true)
	b.room.Broadcast()
	b.mu.Unlock()
	b.stopOnce.Do(func() { close(b.stop) })
	// A flush of the loop that is stuck (a lock, a dead connection) is
	// cancelled when ctx ends; its batch stays in flight for a later Close.
	cancel := context.AfterFunc(ctx, b.loopStop)
	defer cancel()
	select {
	case <-b.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	for {
		err := b.Flush(ctx)
		b.mu.Lock()
		left := b.held()
		b.mu.Unlock()
		if err == nil && left == 0 {
			for _, stop := range b.unwatch {
				stop()
			}
			return nil
		}
		if ctx.Err() != nil {
			return errors.Join(err, ctx.Err())
		}
		select {
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// newID returns a batch id no other batch has.
func newID() string {
	var b [16]byte
	_, _ = crand.Read(b[:]) // never fails (crypto/rand panics instead)
	return hex.EncodeToString(b[:])
}
