package writebehind

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hotcounter/hotcounter"
	"github.com/hotcounter/hotcounter/internal/engine"
	"github.com/hotcounter/hotcounter/internal/observe"
)

// Store keeps acknowledged increments outside the process (Redis), so that
// many app instances share them and a crash of one loses none. A Buffer
// with a Store adds increments to it and flushes what it holds to SQL:
//
//  1. Take moves what a shard holds into a batch with an id, or hands back
//     the batch already in flight (a flush that failed or died after Take
//     left it there).
//  2. The Buffer applies the batch in one SQL transaction that also records
//     its id in the ledger; a batch the ledger already holds was applied by
//     an earlier attempt whose outcome was unknown, and is not applied again.
//  3. Done forgets the batch.
//
// The ledger is the guard against counting twice, not a lease: two
// instances that take the same batch both reach the ledger, and only one
// applies it.
//
// A Buffer flushes every counter the store lists (Counters) that its
// process declares, whichever process added to it: a restarted process, or
// one that only flushes, writes what a dead one left. What the store holds
// for counters the process does not declare is reported and left alone.
type Store interface {
	// Add records delta for the counter of one parent and returns once the
	// store has acknowledged it (an error leaves the outcome unknown, as
	// for any write whose reply was lost). A retry of the same command by
	// the client must not count it twice. The counter is registered
	// (Register) before its first add is acknowledged.
	Add(ctx context.Context, c *Counter, key any, delta int64) error
	// Register lists the counter among the store's Counters. Add does it
	// before a counter's first add; a Buffer does it again for the
	// counters it added to if the list lost them (a failover of the
	// node that keeps it).
	Register(ctx context.Context, c *Counter) error
	// Counters lists every counter that was ever added to in the store, by
	// any process: where a flush looks for what to write.
	Counters(ctx context.Context) ([]StoredCounter, error)
	// Backlog reads what the store holds, not yet written, for the
	// counters of the given slot tables (StoredCounter.Table), without
	// changing it. A table that holds nothing may be left out.
	Backlog(ctx context.Context, tables []string) (map[string]Backlog, error)
	// Pending is what the store holds for the counter of one parent, in
	// flight or not, not yet written to SQL.
	Pending(ctx context.Context, c *Counter, key any) (int64, error)
	// PendingMany is Pending for many, in one round trip.
	PendingMany(ctx context.Context, items []PendingItem) ([]int64, error)
	// Take returns the batches to write for the given counters. With an
	// error it may still return batches (those of the store's nodes that
	// answered): they are written all the same.
	Take(ctx context.Context, counters []*Counter) ([]StoreBatch, error)
	// Done forgets a batch that SQL has applied.
	Done(ctx context.Context, b StoreBatch) error
}

// StoredCounter is a counter a store holds (or held) increments of, as
// the process that added them named it.
type StoredCounter struct {
	Table  string // the slot (or delta) table: the counter's identity
	Parent string // the parent table
	Column string // the counter's column
}

// Name is how reports name a stored counter: posts.likes (post_likes_slots).
func (c StoredCounter) Name() string {
	return c.Parent + "." + c.Column + " (" + c.Table + ")"
}

// Backlog is what a store holds for one counter, acknowledged and not
// yet written to SQL: pending and in flight, from every process.
type Backlog struct {
	// Held: the store holds something for the counter.
	Held bool
	// Increments is how many increments (Add calls) it holds.
	Increments int64
	// Oldest is how long ago the oldest of them was acknowledged (zero
	// when none is held).
	Oldest time.Duration
}

// PendingItem names the counter of one parent.
type PendingItem struct {
	Counter *Counter
	Key     any
}

// PendingMany is PendingIn for many parents: one round trip to a Store.
func (b *Buffer) PendingMany(ctx context.Context, items []PendingItem) ([]int64, error) {
	if b.cfg.store != nil {
		return b.cfg.store.PendingMany(ctx, items)
	}
	out := make([]int64, len(items))
	for i, it := range items {
		out[i] = b.Pending(it.Counter, it.Key)
	}
	return out, nil
}

// StoreBatch is one batch taken from a Store.
type StoreBatch struct {
	// ID is unique among every batch of every store: the ledger records it.
	ID      string
	Entries []StoreEntry
	// Increments is how many Add calls the batch holds (its entries sum
	// them per parent).
	Increments int64
	// Token is the store's own (where the batch lives).
	Token any
}

// StoreEntry is one parent's delta in a batch.
type StoreEntry struct {
	Counter *Counter
	Key     any
	Delta   int64
}

// EncodeKey writes a parent key as text that DecodeKey turns back into a
// value the database compares to the key column: integers stay integers,
// everything else is its text.
func EncodeKey(key any) (string, error) {
	rv := reflect.ValueOf(key)
	switch {
	case rv.CanInt():
		return "i" + strconv.FormatInt(rv.Int(), 10), nil
	case rv.CanUint():
		if rv.Uint() > 1<<63-1 {
			return "", fmt.Errorf("key %v is out of range of the database's integers", key)
		}
		return "i" + strconv.FormatUint(rv.Uint(), 10), nil
	}
	return "s" + engine.KeyText(key), nil
}

// DecodeKey is EncodeKey's inverse.
func DecodeKey(s string) (any, error) {
	switch {
	case strings.HasPrefix(s, "i"):
		return strconv.ParseInt(s[1:], 10, 64)
	case strings.HasPrefix(s, "s"):
		return s[1:], nil
	}
	return nil, fmt.Errorf("hotcounter: bad key %q in the store", s)
}

// addToStore is Add with a Store.
func (b *Buffer) addToStore(ctx context.Context, c *Counter, key any, delta int64) error {
	if _, ok := b.knownFast.Load(c); !ok {
		b.mu.Lock()
		if b.closed {
			b.mu.Unlock()
			return ErrClosed
		}
		if b.known == nil {
			b.known = map[*Counter]bool{}
		}
		if !b.known[c] {
			b.known[c] = true
			b.counters = append(b.counters, c)
			b.knownFast.Store(c, true)
		}
		b.mu.Unlock()
	}
	if b.isClosed.Load() {
		return ErrClosed
	}
	if err := b.admit(ctx); err != nil {
		return err
	}
	if err := b.cfg.store.Add(ctx, c, key, delta); err != nil {
		return err
	}
	if b.cfg.MaxBacklog > 0 {
		b.addedSince.Add(1)
	}
	return nil
}

// backlog is the store's backlog of the counters this process declares:
// what the last flush read, plus what this buffer added since.
func (b *Buffer) backlog() int64 { return b.measured.Load() + b.addedSince.Load() }

// admit returns when an add may go to the store: at once, unless the
// store's backlog has reached MaxBacklog; then it fails (OnFull BufferFail) or
// waits until a flush finds it below (BufferBlock), or ctx ends.
func (b *Buffer) admit(ctx context.Context) error {
	if b.cfg.MaxBacklog <= 0 || b.backlog() < b.cfg.MaxBacklog {
		return nil
	}
	if b.cfg.OnFull == hotcounter.BufferKeep {
		b.reportBacklog(b.backlog())
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for {
		if b.closed {
			return ErrClosed
		}
		n := b.backlog()
		if n < b.cfg.MaxBacklog {
			return nil
		}
		if b.cfg.OnFull == hotcounter.BufferFail {
			return fmt.Errorf("%w: the store holds %d increments not yet written (MaxBacklog %d)", hotcounter.ErrBufferFull, n, b.cfg.MaxBacklog)
		}
		b.kick()
		if err := b.wait(ctx); err != nil {
			return err
		}
	}
}

// flushStore writes what the store holds for every counter this process
// declares, whichever process added to it: every batch in its own
// transaction with its ledger row, then Done. A shard with a batch in
// flight hands that one back first, and keeps what arrived since pending:
// so a second round takes what is pending now.
func (b *Buffer) flushStore(ctx context.Context) error {
	counters, surveyErr := b.survey(ctx)
	var errs []error
	if surveyErr != nil {
		errs = append(errs, surveyErr)
	}
	if len(counters) > 0 {
		for round := 0; round < 2; round++ {
			if err := b.flushStoreOnce(ctx, counters); err != nil {
				errs = append(errs, err)
				break
			}
		}
	}
	return errors.Join(errs...)
}

// survey reads which counters the store holds increments of and how many,
// records the backlog (for MaxBacklog and the metrics), reports what it
// holds for counters this process does not declare, and returns the
// declared counters to take. When the store cannot say (a node down), it
// returns what could still be taken, with the error: the counters this
// buffer added to, or every declared counter the store lists.
func (b *Buffer) survey(ctx context.Context) ([]*Counter, error) {
	st := b.cfg.store
	// What this buffer added before this point is in the backlog read
	// below: its counter was declared before the snapshot of the
	// counters next (so its table is read) and its add reached the store
	// before it was counted. What it adds from here on is counted on top
	// (an add during the read, twice). Read after the snapshot, adds of a
	// counter declared in between were subtracted but never read: 10
	// increments past MaxBacklog were admitted so.
	addedBefore := b.addedSince.Load()
	b.mu.Lock()
	own := append([]*Counter(nil), b.counters...)
	b.mu.Unlock()
	byTable := map[string]*Counter{}
	if b.declared != nil {
		for _, c := range b.declared() {
			byTable[c.Table.Slots] = c
		}
	}
	for _, c := range own {
		byTable[c.Table.Slots] = c
	}
	stored, err := st.Counters(ctx)
	if err != nil {
		return dedupe(own), fmt.Errorf("write-behind: list the counters in the store: %w", err)
	}
	listed := make(map[string]StoredCounter, len(stored))
	for _, sc := range stored {
		listed[sc.Table] = sc
	}
	var errs []error
	for _, c := range own {
		if _, ok := listed[c.Table.Slots]; ok {
			continue
		}
		// The list lost it (a failover of its node): list it again, so
		// that other processes flush it if this one dies.
		if err := st.Register(ctx, c); err != nil {
			errs = append(errs, fmt.Errorf("write-behind: register %s in the store: %w", c.Name, err))
		}
		listed[c.Table.Slots] = StoredCounter{Table: c.Table.Slots, Parent: c.Table.Parent, Column: c.Column}
	}
	tables := make([]string, 0, len(listed))
	for t := range listed {
		tables = append(tables, t)
	}
	slices.Sort(tables)
	backlog, err := st.Backlog(ctx, tables)
	if err != nil {
		var take []*Counter
		for _, t := range tables {
			if c := byTable[t]; c != nil {
				take = append(take, c)
			}
		}
		return take, errors.Join(append(errs, fmt.Errorf("write-behind: read the store's backlog: %w", err))...)
	}
	var (
		take     []*Counter
		declared int64
		items    = make([]observe.BacklogItem, 0, len(tables))
	)
	for _, t := range tables {
		sc, g := listed[t], backlog[t]
		c := byTable[t]
		items = append(items, observe.BacklogItem{Table: sc.Parent, Counter: sc.Column, Declared: c != nil, Increments: g.Increments, Oldest: g.Oldest})
		switch {
		case c == nil:
			if g.Held {
				b.reportUndeclared(sc, g)
			}
		case g.Held:
			declared += g.Increments
			take = append(take, c)
		}
	}
	b.recordBacklog(items, declared, addedBefore)
	return take, errors.Join(errs...)
}

// dedupe keeps one counter per table.
func dedupe(cs []*Counter) []*Counter {
	seen := map[string]bool{}
	out := cs[:0:0]
	for _, c := range cs {
		if !seen[c.Table.Slots] {
			seen[c.Table.Slots] = true
			out = append(out, c)
		}
	}
	return out
}

// recordBacklog keeps what a survey read: the metrics' figures, and the
// declared counters' backlog that MaxBacklog bounds, which holds the
// addedBefore adds this buffer had counted before the read; with OnFull
// BufferKeep, a backlog past MaxBacklog is reported.
func (b *Buffer) recordBacklog(items []observe.BacklogItem, declared, addedBefore int64) {
	b.mu.Lock()
	b.backlogItems = items
	b.measured.Store(declared)
	b.addedSince.Add(-addedBefore)
	b.room.Broadcast()
	b.mu.Unlock()
	if b.cfg.MaxBacklog > 0 && b.cfg.OnFull == hotcounter.BufferKeep && declared >= b.cfg.MaxBacklog {
		b.reportBacklog(declared)
	}
}

// reportBacklog tells onError, at most once an interval, that the store's
// backlog is past MaxBacklog and increments are still accepted (OnFull
// BufferKeep).
func (b *Buffer) reportBacklog(n int64) {
	now := time.Now().UnixNano()
	last := b.lastKeepReport.Load()
	if now-last < int64(b.cfg.Interval) || !b.lastKeepReport.CompareAndSwap(last, now) {
		return
	}
	b.cfg.onError(fmt.Errorf("%w: the store holds %d increments not yet written (MaxBacklog %d); accepting more (OnFull: BufferKeep)", hotcounter.ErrBufferFull, n, b.cfg.MaxBacklog))
}

// storeBacklog is what the last survey read, for the backlog gauges.
func (b *Buffer) storeBacklog() []observe.BacklogItem {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.backlogItems
}

// reportUndeclared tells onError, at most once a minute per counter, that
// the store holds increments of a counter no model of this process
// declares: they stay in the store for a process that declares it.
func (b *Buffer) reportUndeclared(sc StoredCounter, g Backlog) {
	b.mu.Lock()
	if b.reported == nil {
		b.reported = map[string]time.Time{}
	}
	last, seen := b.reported[sc.Table]
	if seen && time.Since(last) < time.Minute {
		b.mu.Unlock()
		return
	}
	b.reported[sc.Table] = time.Now()
	b.mu.Unlock()
	b.cfg.onError(fmt.Errorf("write-behind: %w: %s, %d increments, the oldest %v old; left in the store for a process that declares it",
		hotcounter.ErrUndeclaredCounter, sc.Name(), g.Increments, g.Oldest.Round(time.Millisecond)))
}

func (b *Buffer) flushStoreOnce(ctx context.Context, counters []*Counter) error {
	batches, err := b.cfg.store.Take(ctx, counters)
	var errs []error
	if err != nil {
		// The batches that were taken are written all the same: a store
		// node that failed keeps its own for the next flush.
		b.obs.Flush(ctx, nil, err)
		errs = append(errs, fmt.Errorf("write-behind take: %w", err))
	}
	for _, sb := range batches {
		bt := &batch{id: sb.ID, entries: map[entry]pendingDelta{}}
		written := map[[2]string]int64{}
		for _, e := range sb.Entries {
			k := entry{c: e.Counter, key: engine.KeyText(e.Key)}
			p := bt.entries[k]
			p.key, p.delta = e.Key, p.delta+e.Delta
			bt.entries[k] = p
			written[[2]string{e.Counter.Table.Parent, e.Counter.Column}] += e.Delta
		}
		if err := b.apply(ctx, bt); err != nil {
			b.obs.Flush(ctx, nil, err)
			errs = append(errs, err)
			continue
		}
		if err := b.cfg.store.Done(ctx, sb); err != nil {
			// Applied: the ledger keeps the next attempt from applying it
			// again.
			errs = append(errs, fmt.Errorf("write-behind done %s: %w", sb.ID, err))
			continue
		}
		if b.cfg.MaxBacklog > 0 {
			b.mu.Lock()
			b.measured.Store(max(0, b.measured.Load()-sb.Increments))
			b.room.Broadcast()
			b.mu.Unlock()
		}
		b.obs.Flush(ctx, written, nil)
	}
	return errors.Join(errs...)
}
