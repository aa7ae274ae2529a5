// Package hotkeys finds the hot rows of hot counters. A [Tracker] counts
// adds per name (a counter or column, such as "posts.likes") and key (a
// row's primary key, as a string) in a Space-Saving sketch of bounded size,
// so that the hottest keys of each name can be reported whatever the number
// of distinct keys written.
//
// Space-Saving keeps K entries per name and window. While a window has seen
// at most K distinct keys of a name its counts are exact. After that, a key
// that has no entry takes the entry with the smallest count, min: the new
// entry counts min+n and records min as its error. Every count is then an
// upper bound of the key's true count, the true count is at least
// Count-Error, Error is at most N/K where N is the total added in the
// window, and every key whose true count is above N/K has an entry.
package hotkeys

import (
	"cmp"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Default values of [Options].
const (
	DefaultK        = 64
	DefaultWindow   = time.Minute
	DefaultMaxNames = 1024
)

// Options configure a [Tracker]. A zero or negative field takes its default.
type Options struct {
	// K is the number of entries kept per name per window: the number of
	// keys of one name that are counted exactly, and the size of the
	// sketch once there are more. Default DefaultK (64).
	K int
	// Window is the length of one time window. Windows start at the time
	// New was called and follow each other without gaps. Default
	// DefaultWindow (1 minute).
	Window time.Duration
	// MaxNames is the number of distinct names tracked. Adds for a name
	// first seen after MaxNames names are tracked are dropped and counted
	// by [Tracker.Dropped]. Default DefaultMaxNames (1024).
	MaxNames int
	// Now returns the current time; tests inject a fake clock here.
	// Default time.Now.
	Now func() time.Time
}

// Tracker counts adds per name (a counter or column, e.g. "posts.likes") and
// key (a row's primary key as a string) with a Space-Saving sketch of K
// entries per name per time window. Memory is bounded whatever the number
// of keys: at most K entries per name per window, two windows kept (the
// current one and the last complete one), and at most MaxNames names (adds
// for further names are dropped and counted in Dropped()).
//
// A Tracker must be made with [New]. Its methods are safe for concurrent
// use by many goroutines. Each name has its own mutex, held by an add for a
// map lookup and a heap update of O(log K).
//
// A name, once tracked, keeps its place for the life of the Tracker, even
// when no add has come for it for a long time. The Tracker keeps the key
// strings it is given without copying them.
type Tracker struct {
	k        int
	window   time.Duration
	maxNames int
	now      func() time.Time
	origin   time.Time

	// names maps each tracked name to its state. The map is never modified
	// once stored: a new name stores a copy, under mu, so that adds look
	// names up without a lock.
	names   atomic.Pointer[map[string]*nameState]
	mu      sync.Mutex
	dropped atomic.Int64
}

// Key is one entry of a [Tracker.Top] report.
type Key struct {
	// Key is the key given to [Tracker.Add].
	Key string
	// Count is the amount added to the key over Span. It is an upper
	// bound: the true amount lies in [Count-Error, Count].
	Count int64
	// Error is how much Count may overestimate the true amount: the
	// Space-Saving overestimation bound of this entry. Zero means Count
	// is exact.
	Error int64
	// Rate is Count per second over Span.
	Rate float64
	// Span is the time the counts cover: from the start of the previous
	// window (or of the first window, during the first window) to the
	// time of the report. It is at least one millisecond.
	Span time.Duration
}

// New returns a Tracker configured by o. Its first window starts now.
func New(o Options) *Tracker {
	if o.K <= 0 {
		o.K = DefaultK
	}
	if o.Window <= 0 {
		o.Window = DefaultWindow
	}
	if o.MaxNames <= 0 {
		o.MaxNames = DefaultMaxNames
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	t := &Tracker{
		k:        o.K,
		window:   o.Window,
		maxNames: o.MaxNames,
		now:      o.Now,
		origin:   o.Now(),
	}
	empty := map[string]*nameState{}
	t.names.Store(&empty)
	return t
}

// Add counts n adds to key of name. A negative n counts as its absolute
// value, since a decrement is a write to the row as much as an increment;
// n == 0 is ignored. If name is not tracked yet and MaxNames names already
// are, the add is dropped and counted by [Tracker.Dropped]. Counts saturate
// at math.MaxInt64.
//
// Add does not allocate when key already has an entry in the current
// window, nor when it replaces another key's entry; it allocates when it
// tracks a new name and may allocate while a window's sketch first grows.
func (t *Tracker) Add(name, key string, n int64) {
	if n == 0 {
		return
	}
	if n < 0 {
		if n == math.MinInt64 {
			n = math.MaxInt64
		} else {
			n = -n
		}
	}
	s := (*t.names.Load())[name]
	if s == nil {
		if s = t.track(name); s == nil {
			t.dropped.Add(1)
			return
		}
	}
	w := t.windowAt(t.now())
	s.mu.Lock()
	s.advance(w)
	s.cur.add(key, n)
	s.mu.Unlock()
}

// Top returns the hottest keys of name, at most k of them, hottest
// (highest Count) first and keys of equal Count in increasing order. k <= 0
// means every entry. The counts cover the last complete window and the
// current one, merged (see [Key]); keys with no add in either are not
// reported, so after two full windows without adds to name Top returns
// nothing. Top returns nil for a name that is not tracked.
func (t *Tracker) Top(name string, k int) []Key {
	s := (*t.names.Load())[name]
	if s == nil {
		return nil
	}
	now := t.now()
	w := t.windowAt(now)
	s.mu.Lock()
	s.advance(w)
	// After advance, cur is window w, or a later window if the clock went
	// back; prev is the window before cur.
	w = s.cur.idx
	prev, cur := s.prev.snapshot(), s.cur.snapshot()
	s.mu.Unlock()

	keys := merge(prev, cur)
	if len(keys) == 0 {
		return nil
	}
	slices.SortFunc(keys, func(a, b Key) int {
		if c := cmp.Compare(b.Count, a.Count); c != 0 {
			return c
		}
		return strings.Compare(a.Key, b.Key)
	})
	if k > 0 && k < len(keys) {
		keys = keys[:k:k]
	}
	start := t.origin
	if w > 0 {
		start = start.Add(time.Duration(w-1) * t.window)
	}
	span := max(now.Sub(start), time.Millisecond)
	for i := range keys {
		keys[i].Span = span
		keys[i].Rate = float64(keys[i].Count) / span.Seconds()
	}
	return keys
}

// Names returns the tracked names in increasing order, including names
// that have had no add for a long time.
func (t *Tracker) Names() []string {
	return slices.Sorted(maps.Keys(*t.names.Load()))
}

// Dropped returns the number of calls of [Tracker.Add] dropped because
// their name was not tracked and MaxNames names already were.
func (t *Tracker) Dropped() int64 {
	return t.dropped.Load()
}

// track returns the state of name, adding name to the tracked names if
// there is room, or nil if there is none.
func (t *Tracker) track(name string) *nameState {
	if len(*t.names.Load()) >= t.maxNames {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	old := *t.names.Load()
	if s := old[name]; s != nil {
		return s
	}
	if len(old) >= t.maxNames {
		return nil
	}
	s := newNameState(t.k)
	names := make(map[string]*nameState, len(old)+1)
	maps.Copy(names, old)
	names[strings.Clone(name)] = s
	t.names.Store(&names)
	return s
}

// windowAt returns the index of the window holding now; window 0 starts at
// t.origin. A time before t.origin is in window 0.
func (t *Tracker) windowAt(now time.Time) int64 {
	d := now.Sub(t.origin)
	if d < 0 {
		return 0
	}
	return int64(d / t.window)
}

// nameState holds the two windows of one name.
type nameState struct {
	mu   sync.Mutex
	cur  *sketch // the latest window an add or report has reached
	prev *sketch // the window before cur; prev.idx == cur.idx-1
}

func newNameState(k int) *nameState {
	s := &nameState{cur: newSketch(k), prev: newSketch(k)}
	// Window -1 holds nothing: the first advance moves to a real window.
	s.cur.idx, s.prev.idx = -1, -2
	return s
}

// advance makes cur window w if w is later than cur. A time whose window
// is earlier than cur (a clock that went back) counts in cur.
func (s *nameState) advance(w int64) {
	switch {
	case w <= s.cur.idx:
	case w == s.cur.idx+1:
		s.prev, s.cur = s.cur, s.prev
		s.cur.reset(w)
	default:
		s.prev.reset(w - 1)
		s.cur.reset(w)
	}
}

// entry is one counted key of a sketch.
type entry struct {
	key   string
	count int64
	err   int64
	pos   int // index of this entry in sketch.heap
}

// sketch is a Space-Saving summary of one window: at most k entries, with
// a min-heap on count to find the entry to replace.
type sketch struct {
	idx     int64
	k       int
	slots   map[string]int // key -> index in entries
	entries []entry        // entries never move; replacing one rewrites it in place
	heap    []int          // indexes in entries, a min-heap on count
}

// maxPrealloc bounds the room a sketch reserves up front for its entries.
const maxPrealloc = 1024

func newSketch(k int) *sketch {
	c := min(k, maxPrealloc)
	return &sketch{
		k:       k,
		slots:   make(map[string]int, c),
		entries: make([]entry, 0, c),
		heap:    make([]int, 0, c),
	}
}

// reset empties s and makes it window idx, keeping its memory.
func (s *sketch) reset(idx int64) {
	s.idx = idx
	clear(s.slots)
	clear(s.entries) // drop the key strings
	s.entries = s.entries[:0]
	s.heap = s.heap[:0]
}

// add counts n (> 0) adds to key.
func (s *sketch) add(key string, n int64) {
	if i, ok := s.slots[key]; ok {
		e := &s.entries[i]
		e.count = addSat(e.count, n)
		s.down(e.pos)
		return
	}
	if len(s.entries) < s.k {
		i := len(s.entries)
		s.entries = append(s.entries, entry{key: key, count: n, pos: len(s.heap)})
		s.heap = append(s.heap, i)
		s.slots[key] = i
		s.up(len(s.heap) - 1)
		return
	}
	// Full: key takes the entry with the smallest count.
	i := s.heap[0]
	e := &s.entries[i]
	delete(s.slots, e.key)
	least := e.count
	e.key, e.count, e.err = key, addSat(least, n), least
	s.slots[key] = i
	s.down(0)
}

func (s *sketch) less(a, b int) bool {
	return s.entries[s.heap[a]].count < s.entries[s.heap[b]].count
}

func (s *sketch) swap(a, b int) {
	h := s.heap
	h[a], h[b] = h[b], h[a]
	s.entries[h[a]].pos = a
	s.entries[h[b]].pos = b
}

func (s *sketch) up(j int) {
	for j > 0 {
		p := (j - 1) / 2
		if !s.less(j, p) {
			return
		}
		s.swap(j, p)
		j = p
	}
}

func (s *sketch) down(i int) {
	n := len(s.heap)
	for {
		c := 2*i + 1
		if c >= n {
			return
		}
		if r := c + 1; r < n && s.less(r, c) {
			c = r
		}
		if !s.less(c, i) {
			return
		}
		s.swap(i, c)
		i = c
	}
}

// snap is a copy of a sketch's entries, taken for a report.
type snap struct {
	entries []entry
	// floor is what a key without an entry may have had: the smallest
	// count if the sketch is full (the key may have been replaced), else
	// zero (the counts are exact).
	floor int64
}

func (s *sketch) snapshot() snap {
	sn := snap{entries: slices.Clone(s.entries)}
	if len(s.entries) >= s.k {
		sn.floor = s.entries[s.heap[0]].count
	}
	return sn
}

// merge combines the sketches of two windows. A key in both sums its
// counts and errors; a key in one only adds the other's floor to its count
// and error, so that each count stays an upper bound and Count-Error a
// lower bound of the true amount over both windows.
func merge(a, b snap) []Key {
	keys := make([]Key, 0, len(a.entries)+len(b.entries))
	inB := make(map[string]int, len(b.entries))
	for j, e := range b.entries {
		inB[e.key] = j
	}
	used := make([]bool, len(b.entries))
	for _, e := range a.entries {
		k := Key{Key: e.key, Count: e.count, Error: e.err}
		if j, ok := inB[e.key]; ok {
			used[j] = true
			k.Count = addSat(k.Count, b.entries[j].count)
			k.Error = addSat(k.Error, b.entries[j].err)
		} else {
			k.Count = addSat(k.Count, b.floor)
			k.Error = addSat(k.Error, b.floor)
		}
		keys = append(keys, k)
	}
	for j, e := range b.entries {
		if !used[j] {
			keys = append(keys, Key{
				Key:   e.key,
				Count: addSat(e.count, a.floor),
				Error: addSat(e.err, a.floor),
			})
		}
	}
	return keys
}

// addSat returns a+b for a, b >= 0, or math.MaxInt64 if that overflows.
func addSat(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}
