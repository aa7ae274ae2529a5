package engine

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"sync"
	"time"
)

// Widths chooses the slot of each increment of a counter declared
// slots=auto: each parent starts at one slot row and widens, doubling up to
// Max, while this process's increments of it contend; it narrows, halving,
// once they have not overlapped for Cooldown. (spec.Options.Auto.)
//
// Contention is measured where it is certain: an increment statement that
// draws a slot another of this process's statements is writing at that
// moment will wait for that row's lock. A parent doubles its width as soon
// as more than one statement in 16 met such a slot (at least 4 of them), or
// at the end of a window of Cooldown/5 in which more than one in 32 did (at
// least 2); a parent that never had two
// statements in flight at once during CooldownWindows windows in a row
// halves it. Several processes need not agree: each draws from the width it
// has learned, and readers sum whatever rows exist. Parents at width one
// with nothing in flight hold no state, and a parent left alone for a
// minute is forgotten (back to one row), so the memory held is bounded by
// the parents written recently.
//
// The zero value is not ready: use NewWidths.
type Widths struct {
	max     int
	window  time.Duration
	now     func() time.Time
	mu      sync.Mutex
	parents map[any]*width
	sweepAt int
	swept   time.Time
}

// width is what Widths knows of one parent.
type width struct {
	width     int
	busy      []uint16 // statements in flight per slot
	inFlight  int
	start     time.Time // of the current window
	stmts     int       // statements begun in the window
	collided  int       // of which drew a busy slot
	peak      int       // most statements in flight at once in the window
	coldSince int       // consecutive windows with peak <= 1
	lastUsed  time.Time
}

const (
	// CooldownWindows is how many windows a parent's statements must not
	// overlap before its width halves.
	CooldownWindows = 5
	// DefaultCooldown is Widths' cooldown when none is given.
	DefaultCooldown = 5 * time.Second
	// forgetAfter is how long an idle parent keeps its width.
	forgetAfter = time.Minute
)

// NewWidths returns the Widths of one counter with at most max slots per
// parent, halving a width after cooldown without overlap (DefaultCooldown
// if zero or less).
func NewWidths(max int, cooldown time.Duration) *Widths {
	if cooldown <= 0 {
		cooldown = DefaultCooldown
	}
	return &Widths{max: max, window: cooldown / CooldownWindows, now: time.Now,
		parents: map[any]*width{}, sweepAt: 1024}
}

// Acquire draws the slot for one increment statement of the parent whose
// primary key is key and returns it, with release, to be called once the
// statement has finished.
func (ws *Widths) Acquire(key any) (slot int, release func()) {
	key = comparableKey(key)
	ws.mu.Lock()
	defer ws.mu.Unlock()
	now := ws.now()
	p := ws.parents[key]
	if p == nil {
		ws.sweep(now)
		p = &width{width: 1, busy: make([]uint16, 1), start: now}
		ws.parents[key] = p
	}
	ws.roll(p, now)
	p.lastUsed = now
	slot = rand.IntN(p.width)
	p.stmts++
	if p.busy[slot] > 0 {
		p.collided++
	}
	p.busy[slot]++
	p.inFlight++
	p.peak = max(p.peak, p.inFlight)
	if p.collided >= 4 && p.collided*16 > p.stmts {
		// More than one statement in sixteen waits: widen now, not at the
		// window's end (a post going viral reaches its width within a few
		// dozen statements).
		ws.widen(p)
		p.stmts, p.collided = 0, 0
	}
	return slot, func() {
		ws.mu.Lock()
		defer ws.mu.Unlock()
		p.busy[slot]--
		p.inFlight--
		if p.inFlight == 0 && p.width == 1 && p.collided == 0 && ws.parents[key] == p {
			delete(ws.parents, key) // nothing worth keeping
		}
	}
}

// Width returns the width the parent whose primary key is key has now
// (what its next increment draws from).
func (ws *Widths) Width(key any) int {
	key = comparableKey(key)
	ws.mu.Lock()
	defer ws.mu.Unlock()
	p := ws.parents[key]
	if p == nil {
		return 1
	}
	ws.roll(p, ws.now())
	return p.width
}

// roll closes the windows of p that have ended by now, widening or
// narrowing p as they tell.
func (ws *Widths) roll(p *width, now time.Time) {
	elapsed := now.Sub(p.start)
	if elapsed < ws.window {
		return
	}
	switch {
	case p.collided >= 2 && p.collided*32 > p.stmts:
		ws.widen(p)
	case p.peak <= 1:
		p.coldSince++
	default:
		p.coldSince = 0
	}
	// Windows that ended after this one saw nothing (p was not used in
	// them): they are cold.
	if idle := int(elapsed/ws.window) - 1; idle > 0 {
		p.coldSince += idle
	}
	for p.coldSince >= CooldownWindows && p.width > 1 {
		p.width /= 2
		p.coldSince -= CooldownWindows
	}
	if p.width == 1 {
		p.coldSince = 0
	}
	p.start, p.stmts, p.collided, p.peak = now, 0, 0, p.inFlight
}

// widen doubles p's width, up to the most allowed.
func (ws *Widths) widen(p *width) {
	p.width = min(p.width*2, ws.max)
	for len(p.busy) < p.width {
		p.busy = append(p.busy, 0)
	}
	p.coldSince = 0
}

// sweep forgets the parents idle for forgetAfter, once the map has grown
// past sweepAt or a minute after the last sweep, so that parents written
// long ago hold no memory.
func (ws *Widths) sweep(now time.Time) {
	if len(ws.parents) < ws.sweepAt && now.Sub(ws.swept) < forgetAfter {
		return
	}
	ws.swept = now
	for k, p := range ws.parents {
		if p.inFlight == 0 && now.Sub(p.lastUsed) > forgetAfter {
			delete(ws.parents, k)
		}
	}
	ws.sweepAt = max(1024, 2*len(ws.parents))
}

// comparableKey makes key usable as a map key: keys of types that Go
// cannot compare (a []byte primary key) by their printed value.
func comparableKey(key any) any {
	if key == nil || reflect.TypeOf(key).Comparable() {
		return key
	}
	return fmt.Sprintf("%T:%v", key, key)
}
