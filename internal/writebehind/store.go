package writebehind

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"github.com/hotcounter/hotcounter/internal/engine"
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
type Store interface {
	// Add records delta for the counter of one parent and returns once the
	// store has acknowledged it (an error leaves the outcome unknown, as
	// for any write whose reply was lost). A retry of the same command by
	// the client must not count it twice.
	Add(ctx context.Context, c *Counter, key any, delta int64) error
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

// PendingItem names the counter of one parent.
type PendingItem struct {
	Counter *Counter
	Key     any
}

// PendingMany is PendingIn for many parents: one round trip to a Store.
func (b *Buffer) PendingMany(ctx context.Context, items []PendingItem) ([]int64, error) {
	if b.cfg.Store != nil {
		return b.cfg.Store.PendingMany(ctx, items)
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
	if _, ok := b.knownFast.Load(c); ok {
		if b.isClosed.Load() {
			return ErrClosed
		}
		return b.cfg.Store.Add(ctx, c, key, delta)
	}
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
	return b.cfg.Store.Add(ctx, c, key, delta)
}

// flushStore writes what the store holds for the counters this buffer has
// seen: every batch in its own transaction with its ledger row, then Done.
// A shard with a batch in flight hands that one back first, and keeps what
// arrived since pending: so a second round takes what is pending now.
func (b *Buffer) flushStore(ctx context.Context) error {
	b.mu.Lock()
	counters := append([]*Counter(nil), b.counters...)
	b.mu.Unlock()
	if len(counters) == 0 {
		return nil
	}
	for round := 0; round < 2; round++ {
		if err := b.flushStoreOnce(ctx, counters); err != nil {
			return err
		}
	}
	return nil
}

func (b *Buffer) flushStoreOnce(ctx context.Context, counters []*Counter) error {
	batches, err := b.cfg.Store.Take(ctx, counters)
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
		if err := b.cfg.Store.Done(ctx, sb); err != nil {
			// Applied: the ledger keeps the next attempt from applying it
			// again.
			errs = append(errs, fmt.Errorf("write-behind done %s: %w", sb.ID, err))
			continue
		}
		b.obs.Flush(ctx, written, nil)
	}
	return errors.Join(errs...)
}
