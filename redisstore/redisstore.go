// Package redisstore keeps the write-behind increments of gormcounter's and
// entcounter's Buffer in Redis (standalone, Sentinel or Cluster, through a
// go-redis v9 UniversalClient), so that many app instances share them, and
// hands them to the SQL flush exactly once:
//
//	rdb := redis.NewUniversalClient(&redis.UniversalOptions{Addrs: []string{"127.0.0.1:6379"}})
//	store := redisstore.New(rdb, redisstore.Options{})
//	buf, err := gormcounter.NewBuffer(ctx, db, hotcounter.BufferConfig{Store: store})
//	// or, for ent: entcounter.NewBuffer(ctx, client, hotcounter.BufferConfig{Store: store})
//	buf.Increment(ctx, &Post{ID: id}, "Likes", 1) // returns once Redis has it
//
// It is a package of its own so that programs that do not use Redis do not
// build go-redis. What a Redis crash can lose under each persistence
// setting: docs/write-behind.md. The methods of Store are what the buffer
// calls; applications call only New.
//
// Keys. Each counter is spread over Shards hashes by parent key, and every
// key of one shard shares one hash tag, so that the scripts below touch one
// Cluster slot:
//
//	<prefix>:{<slot table>:<shard>}:p        pending: hash parent -> delta
//	<prefix>:{<slot table>:<shard>}:f        the batch in flight: hash parent -> delta
//	<prefix>:{<slot table>:<shard>}:b        the id of the batch in flight
//	<prefix>:{<slot table>:<shard>}:s        hash: store instance -> sequence number of its last add
//
// Adds. Concurrent increments of one shard go together in one script call,
// one at a time per shard and store (the others wait and go, summed, in the
// next), which adds every delta with HINCRBY if its sequence number is above
// the last one the shard recorded for this store instance. go-redis retries
// a command after a read timeout; the retry carries the same number and
// adds nothing. One hash field per instance and shard, not a key per add:
// memory does not grow with the rate.
//
// Besides the parents' deltas, a pending hash holds two fields of its own:
// #n, how many adds it holds, and #t, when its first add arrived (Redis's
// clock, milliseconds): the backlog that Backlog reads.
//
// Flushes. Take renames a shard's pending hash to its in-flight hash and
// records a new batch id, or, when a batch is already in flight (a flush
// failed or died after taking it), returns that one. The SQL transaction
// records the id in the ledger; Done deletes the in-flight hash if its id
// is still the one applied.
//
// Which counters there are. Before its first add of a counter, a Store
// lists it in one hash, <prefix>:counters (slot table -> shards, parent
// table and column), so that a flush by any process, a restarted one or
// one that never adds, finds every counter whose increments the store
// holds.
package redisstore

import (
	"context"
	crand "crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hotcounter/hotcounter/internal/writebehind"
)

// Options configure a Store. Zero values take the defaults.
type Options struct {
	// Prefix starts every key; default "hc".
	Prefix string
	// Shards is how many hashes (and Cluster slots) each counter is spread
	// over; default 16.
	Shards int
	// SeqTTL is how long a shard keeps the sequence numbers of the store
	// instances that add to it after its last add; default 24 hours (a
	// retry comes within seconds).
	SeqTTL time.Duration
}

// Store is a writebehind.Store in Redis.
type Store struct {
	rdb  redis.UniversalClient
	opts Options

	// batchers: slot table -> []*batcher, one per shard. By table, not by
	// *Counter: two descriptions of one counter (two buffers on this
	// store) must share the shards' sequence numbers, or the adds of one
	// would look like replays of the other's.
	batchers sync.Map
	shards   sync.Map // slot table -> the most shards any store listed it with
	instance string   // this store's name in the shards' sequence hashes

	// lastReload is when a cluster client was last told to reload its slot
	// map (Unix nanoseconds).
	lastReload atomic.Int64
}

// failed handles an error of a command: on a Cluster client, a network
// error (a master that died) makes it reload its slot map, at most twice a
// second. go-redis reloads it by itself only on MOVED replies and every
// ClusterStateReloadInterval (a minute by default), and a dead master sends
// no MOVED: until then every command for its slots would go to it.
func (s *Store) failed(err error) error {
	cc, ok := s.rdb.(*redis.ClusterClient)
	var redisErr redis.Error
	if !ok || err == nil || errors.Is(err, redis.Nil) || (errors.As(err, &redisErr) && !strings.HasPrefix(redisErr.Error(), "CLUSTERDOWN")) {
		return err
	}
	now := time.Now().UnixNano()
	last := s.lastReload.Load()
	if now-last > int64(500*time.Millisecond) && s.lastReload.CompareAndSwap(last, now) {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			cc.ReloadState(ctx)
		}()
	}
	return err
}

var _ writebehind.Store = (*Store)(nil)

// New returns a Store on rdb.
func New(rdb redis.UniversalClient, opts Options) *Store {
	if opts.Prefix == "" {
		opts.Prefix = "hc"
	}
	if opts.Shards <= 0 {
		opts.Shards = 16
	}
	if opts.SeqTTL <= 0 {
		opts.SeqTTL = 24 * time.Hour
	}
	return &Store{rdb: rdb, opts: opts, instance: newID()}
}

// base is the key prefix of one shard of a counter, hash tag included.
func (s *Store) base(c *writebehind.Counter, shard int) string { return s.baseOf(c.Table.Slots, shard) }

func (s *Store) baseOf(table string, shard int) string {
	return s.opts.Prefix + ":{" + table + ":" + strconv.Itoa(shard) + "}"
}

// registry is the key of the hash that lists the counters.
func (s *Store) registry() string { return s.opts.Prefix + ":counters" }

// shardsOf is how many shards a flush reads for a table: this store's, or
// more if another store listed the counter with more.
func (s *Store) shardsOf(table string) int {
	if n, ok := s.shards.Load(table); ok {
		return max(n.(int), s.opts.Shards)
	}
	return s.opts.Shards
}

func (s *Store) shardOf(field string) int {
	h := fnv.New32a()
	h.Write([]byte(field))
	return int(h.Sum32() % uint32(s.opts.Shards))
}

// addScript adds deltas (field -> delta) if the add's sequence number
// (ARGV[2]) is above the last its instance (ARGV[1]) added to this shard,
// and counts its adds (ARGV[4]) in #n; a new pending hash records when it
// began in #t.
var addScript = redis.NewScript(`
local seq = tonumber(ARGV[2])
if seq <= tonumber(redis.call('HGET', KEYS[2], ARGV[1]) or '0') then
  return 0
end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
redis.call('EXPIRE', KEYS[2], ARGV[3])
if redis.call('EXISTS', KEYS[1]) == 0 then
  local now = redis.call('TIME')
  redis.call('HSET', KEYS[1], '#t', string.format('%.0f', now[1] * 1000 + math.floor(now[2] / 1000)))
end
redis.call('HINCRBY', KEYS[1], '#n', ARGV[4])
for i = 5, #ARGV, 2 do
  redis.call('HINCRBY', KEYS[1], ARGV[i], ARGV[i + 1])
end
return 1`)

// registerScript lists a counter (ARGV[1], its slot table) with its
// shards (ARGV[2]) and description (ARGV[3]: shards, parent and column),
// unless it is listed with as many shards or more.
var registerScript = redis.NewScript(`
local cur = redis.call('HGET', KEYS[1], ARGV[1])
if cur and tonumber(string.match(cur, '^%d+')) >= tonumber(ARGV[2]) then
  return 0
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
return 1`)

// backlogScript returns {held, adds, age of the oldest in ms or -1} of one
// shard's pending and in-flight hashes, changing nothing.
var backlogScript = redis.NewScript(`
local held, adds, oldest = 0, 0, -1
for i = 1, 2 do
  if redis.call('EXISTS', KEYS[i]) == 1 then
    held = 1
    local v = redis.call('HMGET', KEYS[i], '#n', '#t')
    adds = adds + tonumber(v[1] or '0')
    if v[2] then
      local t = tonumber(v[2])
      if oldest < 0 or t < oldest then oldest = t end
    end
  end
end
if oldest >= 0 then
  local now = redis.call('TIME')
  oldest = math.max(0, now[1] * 1000 + math.floor(now[2] / 1000) - oldest)
end
return {held, adds, oldest}`)

// takeScript returns {id, field, delta, ...} of the batch in flight, making
// one of what is pending when there is none; nil when there is nothing.
var takeScript = redis.NewScript(`
local id = redis.call('GET', KEYS[3])
if not id then
  if redis.call('EXISTS', KEYS[1]) == 0 then
    return false
  end
  redis.call('RENAME', KEYS[1], KEYS[2])
  redis.call('SET', KEYS[3], ARGV[1])
  id = ARGV[1]
end
local out = redis.call('HGETALL', KEYS[2])
table.insert(out, 1, id)
return out`)

// doneScript forgets the batch in flight if it is still the one applied.
var doneScript = redis.NewScript(`
if redis.call('GET', KEYS[2]) == ARGV[1] then
  redis.call('DEL', KEYS[1], KEYS[2])
  return 1
end
return 0`)

// StoreName names the store in errors: "redis". It makes Store a
// hotcounter.BufferStore, which BufferConfig.Store takes.
func (s *Store) StoreName() string { return "redis" }

// Add implements writebehind.Store.
func (s *Store) Add(ctx context.Context, c *writebehind.Counter, key any, delta int64) error {
	field, err := writebehind.EncodeKey(key)
	if err != nil {
		return err
	}
	bs, ok := s.batchers.Load(c.Table.Slots)
	if !ok {
		if err := s.Register(ctx, c); err != nil {
			return err
		}
		all := make([]*batcher, s.opts.Shards)
		for i := range all {
			all[i] = &batcher{s: s, base: s.base(c, i)}
		}
		bs, _ = s.batchers.LoadOrStore(c.Table.Slots, all)
	}
	b := bs.([]*batcher)[s.shardOf(field)]
	return b.add(ctx, field, delta)
}

// Register implements writebehind.Store: it lists the counter in
// <prefix>:counters. Add calls it before the first add of a counter.
func (s *Store) Register(ctx context.Context, c *writebehind.Counter) error {
	desc := strconv.Itoa(s.opts.Shards) + "\t" + c.Table.Parent + "\t" + c.Column
	if err := registerScript.Run(ctx, s.rdb, []string{s.registry()}, c.Table.Slots, s.opts.Shards, desc).Err(); err != nil {
		return fmt.Errorf("list %s in %s: %w", c.Name, s.registry(), s.failed(err))
	}
	return nil
}

// Counters implements writebehind.Store: one HGETALL of <prefix>:counters.
func (s *Store) Counters(ctx context.Context) ([]writebehind.StoredCounter, error) {
	all, err := s.rdb.HGetAll(ctx, s.registry()).Result()
	if err != nil {
		return nil, s.failed(err)
	}
	out := make([]writebehind.StoredCounter, 0, len(all))
	for table, desc := range all {
		parts := strings.SplitN(desc, "\t", 3)
		sc := writebehind.StoredCounter{Table: table}
		if len(parts) == 3 {
			sc.Parent, sc.Column = parts[1], parts[2]
		}
		if n, err := strconv.Atoi(parts[0]); err == nil && n > 0 {
			s.shards.Store(table, n)
		}
		out = append(out, sc)
	}
	return out, nil
}

// Backlog implements writebehind.Store: one script per shard of every
// table, in one pipeline (one per node on a Cluster).
func (s *Store) Backlog(ctx context.Context, tables []string) (map[string]writebehind.Backlog, error) {
	var calls []*scriptCall
	for _, t := range tables {
		for shard := range s.shardsOf(t) {
			base := s.baseOf(t, shard)
			calls = append(calls, &scriptCall{table: t, keys: []string{base + ":p", base + ":f"}})
		}
	}
	if err := s.runEach(ctx, backlogScript, calls); err != nil {
		return nil, err
	}
	out := map[string]writebehind.Backlog{}
	var firstErr error
	for _, cl := range calls {
		res, err := cl.cmd.Int64Slice()
		if err != nil || len(res) != 3 {
			if firstErr == nil {
				firstErr = s.failed(errors.Join(err, cl.cmd.Err()))
			}
			continue
		}
		g := out[cl.table]
		g.Held = g.Held || res[0] == 1
		g.Increments += res[1]
		if age := time.Duration(res[2]) * time.Millisecond; res[2] >= 0 && age > g.Oldest {
			g.Oldest = age
		}
		out[cl.table] = g
	}
	return out, firstErr
}

// scriptCall is one script call of a pipeline: its keys and arguments,
// and the command once sent.
type scriptCall struct {
	c     *writebehind.Counter
	table string
	base  string
	keys  []string
	args  []any
	cmd   *redis.Cmd
}

// runEach sends every call of script in one pipeline (on a Cluster, one
// per node, sent at once); each command keeps its own error. A server that
// has not seen the script (a new node, a restart) is sent it, and its
// calls run again.
func (s *Store) runEach(ctx context.Context, script *redis.Script, calls []*scriptCall) error {
	run := func(calls []*scriptCall) {
		pipe := s.rdb.Pipeline()
		for _, cl := range calls {
			cl.cmd = script.EvalSha(ctx, pipe, cl.keys, cl.args...)
		}
		_, _ = pipe.Exec(ctx)
	}
	run(calls)
	var missing []*scriptCall
	for _, cl := range calls {
		if err := cl.cmd.Err(); err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
			missing = append(missing, cl)
		}
	}
	if len(missing) > 0 {
		if err := script.Load(ctx, s.rdb).Err(); err != nil {
			return s.failed(err)
		}
		run(missing)
	}
	return nil
}

// PendingKey is the Redis key of the hash that holds the pending deltas of
// the counter of one parent (to find the node that serves it).
func (s *Store) PendingKey(c *writebehind.Counter, key any) (string, error) {
	field, err := writebehind.EncodeKey(key)
	if err != nil {
		return "", err
	}
	return s.base(c, s.shardOf(field)) + ":p", nil
}

// Pending implements writebehind.Store.
func (s *Store) Pending(ctx context.Context, c *writebehind.Counter, key any) (int64, error) {
	n, err := s.PendingMany(ctx, []writebehind.PendingItem{{Counter: c, Key: key}})
	if err != nil {
		return 0, err
	}
	return n[0], nil
}

// PendingMany implements writebehind.Store: two HGETs per parent (pending
// and in flight), in one pipeline (grouped by node on a Cluster).
func (s *Store) PendingMany(ctx context.Context, items []writebehind.PendingItem) ([]int64, error) {
	pipe := s.rdb.Pipeline()
	cmds := make([][2]*redis.StringCmd, len(items))
	for i, it := range items {
		field, err := writebehind.EncodeKey(it.Key)
		if err != nil {
			return nil, err
		}
		base := s.base(it.Counter, s.shardOf(field))
		cmds[i] = [2]*redis.StringCmd{pipe.HGet(ctx, base+":p", field), pipe.HGet(ctx, base+":f", field)}
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, s.failed(err)
	}
	out := make([]int64, len(items))
	for i, pair := range cmds {
		for _, cmd := range pair {
			if v, err := cmd.Int64(); err == nil {
				out[i] += v
			} else if !errors.Is(err, redis.Nil) {
				return nil, err
			}
		}
	}
	return out, nil
}

// token is where a batch lives.
type token struct{ base, id string }

// Take implements writebehind.Store: one script per shard of every
// counter, all in one pipeline (on a Cluster, one per node, sent at once).
// It returns the batches of the shards that answered, and the first error
// of those that did not: their batches stay where they are for the next
// Take.
func (s *Store) Take(ctx context.Context, counters []*writebehind.Counter) ([]writebehind.StoreBatch, error) {
	var calls []*scriptCall
	for _, c := range counters {
		for shard := range s.shardsOf(c.Table.Slots) {
			base := s.base(c, shard)
			calls = append(calls, &scriptCall{c: c, base: base, keys: []string{base + ":p", base + ":f", base + ":b"}, args: []any{newID()}})
		}
	}
	if err := s.runEach(ctx, takeScript, calls); err != nil {
		return nil, err
	}
	var (
		out      []writebehind.StoreBatch
		firstErr error
	)
	for _, cl := range calls {
		res, err := cl.cmd.Slice()
		switch {
		case errors.Is(err, redis.Nil):
			continue
		case err != nil:
			if firstErr == nil {
				firstErr = s.failed(err)
			}
			continue
		}
		b, err := batchOf(cl.c, cl.base, res)
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		out = append(out, b)
	}
	return out, firstErr
}

func batchOf(c *writebehind.Counter, base string, res []any) (writebehind.StoreBatch, error) {
	id, _ := res[0].(string)
	sum := sha256.Sum256([]byte(base + "\x00" + id))
	b := writebehind.StoreBatch{ID: "r" + hex.EncodeToString(sum[:20]), Token: token{base, id}}
	for i := 1; i+1 < len(res); i += 2 {
		field, _ := res[i].(string)
		v, _ := res[i+1].(string)
		delta, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return b, fmt.Errorf("%s: field %s: %w", base, field, err)
		}
		switch field {
		case "#n":
			b.Increments = delta
			continue
		case "#t":
			continue
		}
		key, err := writebehind.DecodeKey(field)
		if err != nil {
			return b, err
		}
		b.Entries = append(b.Entries, writebehind.StoreEntry{Counter: c, Key: key, Delta: delta})
	}
	return b, nil
}

// Done implements writebehind.Store.
func (s *Store) Done(ctx context.Context, b writebehind.StoreBatch) error {
	t := b.Token.(token)
	return s.failed(doneScript.Run(ctx, s.rdb, []string{t.base + ":f", t.base + ":b"}, t.id).Err())
}

// batcher sends the adds of one shard, one script call at a time (so that
// their sequence numbers arrive in order); adds that arrive meanwhile are
// summed into the next batch, whose callers all wait on it. Before it takes
// the next batch, the sender yields to the callers of the last one, which
// were just woken and mostly add again at once: the batches hold nearly
// every writer, not half of them, and there are half as many calls.
type batcher struct {
	s    *Store
	base string

	mu      sync.Mutex
	next    *batch // collecting adds; nil when none wait
	running bool
	seq     int64 // of the last batch sent

	adds atomic.Int64 // ever added, to see whether callers still arrive
}

// batch is the adds of one script call: the sum per field, and the result
// every caller of the batch returns once done is closed.
type batch struct {
	sums  map[string]int64
	order []string
	adds  int64 // how many adds it sums
	done  chan struct{}
	err   error
}

func (b *batcher) add(ctx context.Context, field string, delta int64) error {
	b.mu.Lock()
	bt := b.next
	if bt == nil {
		bt = &batch{sums: map[string]int64{}, done: make(chan struct{})}
		b.next = bt
	}
	if _, ok := bt.sums[field]; !ok {
		bt.order = append(bt.order, field)
	}
	bt.sums[field] += delta
	bt.adds++
	b.adds.Add(1)
	if !b.running {
		b.running = true
		go b.run()
	}
	b.mu.Unlock()
	select {
	case <-bt.done:
		return bt.err
	case <-ctx.Done():
		// The outcome is unknown, as for any write whose reply was lost.
		return ctx.Err()
	}
}

// run sends batches until none waits.
func (b *batcher) run() {
	for {
		b.gather()
		b.mu.Lock()
		bt := b.next
		b.next = nil
		if bt == nil {
			b.running = false
			b.mu.Unlock()
			return
		}
		b.seq++
		seq := b.seq
		b.mu.Unlock()
		bt.err = b.send(bt, b.s.instance, seq)
		close(bt.done)
	}
}

// gather yields the processor while adds keep arriving, up to 8 times. It
// waits on nothing: with no other goroutine runnable, Gosched returns at
// once.
func (b *batcher) gather() {
	for i := 0; i < 8; i++ {
		n := b.adds.Load()
		runtime.Gosched()
		if b.adds.Load() == n {
			return
		}
	}
}

// send adds a batch in one script call as add seq of instance. It runs on
// a context of its own: the callers each wait on theirs.
func (b *batcher) send(bt *batch, instance string, seq int64) error {
	args := make([]any, 0, 4+2*len(bt.order))
	args = append(args, instance, seq, int64(b.s.opts.SeqTTL/time.Second), max(bt.adds, 1))
	for _, f := range bt.order {
		args = append(args, f, bt.sums[f])
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return b.s.failed(addScript.Run(ctx, b.s.rdb, []string{b.base + ":p", b.base + ":s"}, args...).Err())
}

func newID() string {
	var b [12]byte
	_, _ = crand.Read(b[:])
	return hex.EncodeToString(b[:])
}
