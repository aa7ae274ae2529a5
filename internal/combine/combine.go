// Package combine merges concurrent increments of the same target into one
// statement, the way a database's group commit merges concurrent commits.
//
// A hot row's increments, spread over slots, stop queuing on a row lock; what
// is left is the price of each statement and its commit (on a 2-core machine
// PostgreSQL spends about 200 µs of CPU on a one-row upsert and its commit).
// A [Group] lets at most Limit statements run for one target at a time;
// increments that arrive while they run wait, and the next statement adds
// their sum. No goroutine is started and nothing waits for a timer: a lone
// increment runs at once, as it would without the group, and batches form
// only while statements are already in flight. Every caller that does not
// give up returns after the statement that carried its delta has finished,
// with that statement's result, so an acknowledged increment is a committed
// one. A statement carrying waiting calls runs on a goroutine of its own,
// which ends when no call is left waiting.
package combine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Run executes one statement adding sum to the target and returns what it
// returns (the number of rows it incremented). A statement carrying one call
// runs with that call's context; one carrying several runs with the values
// of the first, ends at the latest of their deadlines if all have one, and
// is cancelled once every caller has given up.
type Run func(ctx context.Context, sum int64) (int64, error)

// RunValue is a Run that also returns a value, which every call the
// statement carried receives (DoValue): what the statement read back, say.
type RunValue func(ctx context.Context, sum int64) (int64, any, error)

// Group combines calls of [Group.Do] that name the same key. The zero value
// is ready to use with a limit of one statement per key.
type Group struct {
	// Limit is how many statements may run at once for one key; more calls
	// wait for one of them to finish and then share the next statement.
	// Zero means 1; negative turns combining off: every call runs its own
	// statement at once, however many run.
	Limit int
	// Split, when set, is asked about the error of a statement that carried
	// several calls. If it returns nil, every call gets the error. Else it
	// returns decide, which is asked about each call in the order they came:
	// alone runs the call in a statement of its own; otherwise the call gets
	// answer. When a call run alone fails with an error that Split splits
	// too, its decide is asked about the calls after it (it knows more
	// recent news). Takes of stock set it: a take of the sum refused for
	// want of stock took nothing; a buyer asking no more than was left then
	// takes alone, the others are refused at once, without a statement.
	Split func(err error) (decide func(delta int64) (alone bool, answer error))

	mu    sync.Mutex
	lines map[string]*line
}

// line is the state of one key: the statements running and the calls
// waiting for the next.
type line struct {
	running int
	queue   []*call
}

type state int

const (
	queued state = iota // waiting in line.queue
	taken               // carried by a statement
	done                // n and err are set
)

type call struct {
	ctx   context.Context
	delta int64
	run   RunValue
	wake  chan struct{} // closed when state becomes done

	// Guarded by Group.mu until state is done; then read-only.
	state state
	n     int64
	v     any
	err   error
}

// ErrAbandoned is what the calls carried by a statement get when its run
// panicked; the panic goes on in the goroutine that ran it.
var ErrAbandoned = errors.New("combine: the statement carrying this increment panicked")

// Do adds delta to the target named key through run, alone or together
// with concurrent calls of the same key, and returns the result of the
// statement that carried it. Calls of one key must pass runs that do the
// same: a statement carrying several calls runs through the first one's.
//
// A call that finds fewer than Limit statements running runs its own at
// once, in its own goroutine and with its own context, as it would without
// the group. Otherwise it waits; the calls waiting when a statement
// finishes go together as the next one, which runs on a goroutine of its
// own, so that each of them can leave when its context ends: Do then
// returns ctx.Err() at once. A call that leaves before its statement
// started is never written; one that leaves later may still be, as when any
// statement is cancelled while it commits, so its outcome is unknown.
func (g *Group) Do(ctx context.Context, key string, delta int64, run Run) (int64, error) {
	n, _, err := g.DoValue(ctx, key, delta, func(ctx context.Context, sum int64) (int64, any, error) {
		n, err := run(ctx, sum)
		return n, nil, err
	})
	return n, err
}

// DoValue is Do with a run that returns a value as well: each call gets the
// value of the statement that carried it, the same value for all of them
// (callers that change it must copy it first).
func (g *Group) DoValue(ctx context.Context, key string, delta int64, run RunValue) (int64, any, error) {
	c := &call{ctx: ctx, delta: delta, run: run, wake: make(chan struct{})}
	if g.Limit < 0 {
		c.state = taken
		g.execute([]*call{c}, false)
		return c.n, c.v, c.err
	}
	g.mu.Lock()
	if g.lines == nil {
		g.lines = map[string]*line{}
	}
	l := g.lines[key]
	if l == nil {
		l = &line{}
		g.lines[key] = l
	}
	// Calls queue only while Limit statements run, and a statement that
	// ends takes the queue along (next): a non-empty queue means Limit
	// statements are running.
	if l.running < max(g.Limit, 1) {
		l.running++
		c.state = taken
		g.mu.Unlock()
		func() {
			defer g.next(key, l, false) // also if run panics
			g.execute([]*call{c}, false)
		}()
		return c.n, c.v, c.err
	}
	l.queue = append(l.queue, c)
	g.mu.Unlock()

	select {
	case <-c.wake:
		return c.n, c.v, c.err
	case <-ctx.Done():
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	switch c.state {
	case done:
		return c.n, c.v, c.err
	case queued: // never taken: nothing was written
		for i, m := range l.queue {
			if m == c {
				l.queue = append(l.queue[:i], l.queue[i+1:]...)
				break
			}
		}
	}
	return 0, nil, ctx.Err()
}

// loop runs batch, then every batch that queued meanwhile, on the calling
// goroutine (one Do started for it).
func (g *Group) loop(key string, l *line, batch []*call) {
	g.execute(batch, true)
	g.next(key, l, true)
}

// next is called when a statement of key has finished: the calls queued
// meanwhile become the next statement, run on this goroutine if it is a
// batch goroutine (inline), on a new one otherwise, so that the caller
// whose statement finished can return.
func (g *Group) next(key string, l *line, inline bool) {
	for {
		g.mu.Lock()
		if len(l.queue) == 0 {
			if l.running--; l.running == 0 {
				delete(g.lines, key)
			}
			g.mu.Unlock()
			return
		}
		batch := l.queue
		l.queue = nil
		for _, m := range batch {
			m.state = taken
		}
		g.mu.Unlock()
		if !inline {
			go g.loop(key, l, batch)
			return
		}
		g.execute(batch, true)
	}
}

// execute runs one statement for batch, through the run of its first call,
// and hands each call its result. If the deltas' sum would overflow, each
// call runs alone, through its own run. A panic in run
// reaches the callers as ErrAbandoned; on a goroutine of the group's own
// (recovers) it ends there, or it would end the program; otherwise it goes
// on up the caller's stack.
func (g *Group) execute(batch []*call, recovers bool) {
	results := make([]struct {
		n   int64
		v   any
		err error
	}, len(batch))
	for i := range results {
		results[i].err = ErrAbandoned
	}
	defer func() {
		if recovers {
			if r := recover(); r != nil {
				for i := range results {
					if results[i].err == ErrAbandoned {
						results[i].err = fmt.Errorf("%w: %v", ErrAbandoned, r)
					}
				}
			}
		}
		g.mu.Lock()
		for i, m := range batch {
			m.n, m.v, m.err, m.state = results[i].n, results[i].v, results[i].err, done
			close(m.wake)
		}
		g.mu.Unlock()
	}()
	sum, ok := int64(0), true
	for _, m := range batch {
		if ok = (m.delta > 0 && sum <= math.MaxInt64-m.delta) || (m.delta <= 0 && sum >= math.MinInt64-m.delta); !ok {
			break
		}
		sum += m.delta
	}
	if !ok {
		for i, m := range batch {
			results[i].n, results[i].v, results[i].err = m.run(m.ctx, m.delta)
		}
		return
	}
	ctx, stop := batchContext(batch)
	defer stop()
	n, v, err := batch[0].run(ctx, sum)
	if err != nil && g.Split != nil {
		if decide := g.Split(err); decide != nil {
			for i, m := range batch {
				alone, answer := decide(m.delta)
				if !alone {
					results[i].err = answer
					continue
				}
				results[i].n, results[i].v, results[i].err = m.run(m.ctx, m.delta)
				if results[i].err != nil {
					if d := g.Split(results[i].err); d != nil {
						decide = d
					}
				}
			}
			return
		}
	}
	for i := range results {
		results[i].n, results[i].v, results[i].err = n, v, err
	}
}

// batchContext is the context a statement runs with: the call's own when it
// carries one; else the values of the first call's context, the latest of
// their deadlines if every call has one, and cancelled once every call's
// context has ended (never, if one of them cannot end).
func batchContext(batch []*call) (context.Context, func()) {
	if len(batch) == 1 {
		return batch[0].ctx, func() {}
	}
	var latest time.Time
	for _, m := range batch {
		d, ok := m.ctx.Deadline()
		if !ok {
			latest = time.Time{}
			break
		}
		if d.After(latest) {
			latest = d
		}
	}
	base := context.WithoutCancel(batch[0].ctx)
	var ctx context.Context
	var cancel context.CancelFunc
	if latest.IsZero() {
		ctx, cancel = context.WithCancel(base)
	} else {
		ctx, cancel = context.WithDeadline(base, latest)
	}
	for _, m := range batch {
		if m.ctx.Done() == nil {
			return ctx, cancel
		}
	}
	left := int64(len(batch))
	stops := make([]func() bool, 0, len(batch))
	for _, m := range batch {
		stops = append(stops, context.AfterFunc(m.ctx, func() {
			if atomic.AddInt64(&left, -1) == 0 {
				cancel()
			}
		}))
	}
	return ctx, func() {
		for _, s := range stops {
			s()
		}
		cancel()
	}
}
