package lab

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"
)

// outcome is what became of one request.
type outcome uint8

const (
	ok       outcome = iota // acknowledged: the like is counted
	timedOut                // the request's deadline passed (waiting for a connection or the database)
	deadlock                // SQLSTATE 40P01
	failed                  // any other error
	refused                 // a flash sale's buyer told "sold out" (errSoldOut)
)

// classify maps a request's error to its outcome. A timeout is an error
// that says the request's deadline cut it short: the context's error, the
// query cancelled (57014), or what the driver and GORM report after they
// closed the connection or rolled back because of it, which does not always
// wrap the context's error. Any other error is a failure, even one that
// arrives after the deadline.
func classify(ctx context.Context, err error) outcome {
	var pgErr *pgconn.PgError
	switch {
	case err == nil:
		return ok
	case errors.Is(err, errSoldOut):
		return refused
	case errors.As(err, &pgErr) && pgErr.Code == "40P01", isMySQLDeadlock(err):
		return deadlock
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled), pgconn.Timeout(err):
		return timedOut
	case errors.Is(err, driver.ErrBadConn):
		// A pooled connection that an earlier request's deadline closed
		// mid-query: the pool hands it out once more before it notices.
		// The outcome is unknown, as after a timeout (seen once in CI on
		// the naive strategy at overload).
		return timedOut
	case ctx.Err() != nil && (errors.As(err, &pgErr) && pgErr.Code == "57014" || cutShort(err)):
		return timedOut
	default:
		return failed
	}
}

// isMySQLDeadlock reports MySQL's deadlock error, 1213.
func isMySQLDeadlock(err error) bool {
	var my *mysql.MySQLError
	return errors.As(err, &my) && my.Number == 1213
}

// cutShort recognises the errors a deadline leaves behind when GORM joins
// them as text: the cancelled statement, the closed connection, the
// transaction already rolled back, the connection the MySQL driver dropped.
func cutShort(err error) bool {
	msg := err.Error()
	for _, s := range []string{"context deadline exceeded", "conn closed", "transaction has already been committed or rolled back", "canceling statement", "invalid connection", "bad connection"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// request is one arrival: when it was due (from the start of the load) and
// how long it took from then, so time spent queued for a connection counts.
type request struct {
	due     time.Duration
	latency time.Duration
	outcome outcome
}

// load is the record of one open-loop run.
type load struct {
	start    time.Time // when arrival 0 was due
	rate     float64
	duration time.Duration
	requests []request
	errs     []string // the first few distinct unexpected errors
}

// counters are the live figures of a load, read by the progress display.
type counters struct {
	sent, done, acked, timedOut atomic.Int64
}

// openLoop sends requests at a fixed rate for d, whatever the system under
// test does with them: arrival i is due at i/rate seconds, each runs in its
// own goroutine with a deadline of timeout from its due time, and latency is
// measured from the due time. Closed-loop workers would slow down with the
// database and hide the queue (coordinated omission); arrivals here do not.
func openLoop(ctx context.Context, rate float64, d, timeout time.Duration, live *counters, op func(context.Context) error) *load {
	n := int(rate * d.Seconds())
	l := &load{rate: rate, duration: d, requests: make([]request, n)}
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		seen   = map[string]bool{}
		start  = time.Now()
		period = float64(time.Second) / rate
	)
	l.start = start
	for i := 0; i < n && ctx.Err() == nil; i++ {
		due := time.Duration(float64(i) * period)
		if wait := time.Until(start.Add(due)); wait > 0 {
			time.Sleep(wait)
		}
		wg.Add(1)
		live.sent.Add(1)
		go func(i int, due time.Duration) {
			defer wg.Done()
			rctx, cancel := context.WithDeadline(ctx, start.Add(due+timeout))
			err := op(rctx)
			o := classify(rctx, err)
			cancel()
			l.requests[i] = request{due: due, latency: time.Since(start.Add(due)), outcome: o}
			live.done.Add(1)
			switch o {
			case ok:
				live.acked.Add(1)
			case timedOut:
				live.timedOut.Add(1)
			case refused:
			default:
				mu.Lock()
				if msg := err.Error(); !seen[msg] && len(l.errs) < 5 {
					seen[msg] = true
					l.errs = append(l.errs, msg)
				}
				mu.Unlock()
			}
		}(i, due)
	}
	wg.Wait()
	if ctx.Err() != nil {
		// Arrivals never sent are not requests.
		l.requests = l.requests[:live.sent.Load()]
	}
	return l
}

// count returns how many requests ended with o.
func (l *load) count(o outcome) int {
	n := 0
	for _, r := range l.requests {
		if r.outcome == o {
			n++
		}
	}
	return n
}

// Latency summarises a set of request latencies, in milliseconds.
type Latency struct {
	Requests int     `json:"requests"`
	TimedOut int     `json:"timed_out"`
	P50      float64 `json:"p50_ms"`
	P99      float64 `json:"p99_ms"`
	Max      float64 `json:"max_ms"`
}

// summarise computes the latency of every request whose due time is in
// [from, to), timed-out ones included: a timeout is a slow answer, and
// leaving it out would make an overloaded system look fast.
func (l *load) summarise(from, to time.Duration) Latency {
	var lat []time.Duration
	s := Latency{}
	for _, r := range l.requests {
		if r.due < from || r.due >= to {
			continue
		}
		s.Requests++
		if r.outcome == timedOut {
			s.TimedOut++
		}
		lat = append(lat, r.latency)
	}
	if len(lat) == 0 {
		return s
	}
	slices.Sort(lat)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	s.P50 = ms(quantile(lat, 0.50))
	s.P99 = ms(quantile(lat, 0.99))
	s.Max = ms(lat[len(lat)-1])
	return s
}

// summariseOutcome is summarise over the requests that ended with o.
func (l *load) summariseOutcome(o outcome) Latency {
	only := &load{requests: make([]request, 0, len(l.requests))}
	for _, r := range l.requests {
		if r.outcome == o {
			only.requests = append(only.requests, r)
		}
	}
	return only.summarise(0, l.duration+time.Hour)
}

// quantile returns the q-quantile of sorted values (nearest rank).
func quantile(sorted []time.Duration, q float64) time.Duration {
	i := int(q*float64(len(sorted))+0.5) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// Bucket is a slice of a load's time: the requests due in it.
type Bucket struct {
	At       float64 `json:"at_s"`        // start, seconds into the load
	AckedPer float64 `json:"acked_per_s"` // acknowledged likes per second
	P50      float64 `json:"p50_ms"`
	P99      float64 `json:"p99_ms"`
	Max      float64 `json:"max_ms"`
	Timeout  int     `json:"timed_out"`
}

// timeline cuts the load into buckets of due time: a second each, or a
// twentieth of a short load.
func (l *load) timeline() []Bucket {
	step := min(time.Second, max(100*time.Millisecond, l.duration/20))
	var out []Bucket
	for at := time.Duration(0); at < l.duration; at += step {
		s := l.summarise(at, at+step)
		if s.Requests == 0 {
			continue
		}
		acked := 0
		for _, r := range l.requests {
			if r.due >= at && r.due < at+step && r.outcome == ok {
				acked++
			}
		}
		out = append(out, Bucket{At: at.Seconds(), AckedPer: float64(acked) / step.Seconds(),
			P50: s.P50, P99: s.P99, Max: s.Max, Timeout: s.TimedOut})
	}
	return out
}

// progress prints the live figures of a load every half second until stop
// is closed.
func progress(w func(string), name string, d time.Duration, live *counters, stop <-chan struct{}) {
	if w == nil {
		return
	}
	start := time.Now()
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			sent, done := live.sent.Load(), live.done.Load()
			w(fmt.Sprintf("%-10s %5.1f/%.0fs  sent %6d  acked %6d  timed out %5d  in flight %5d",
				name, time.Since(start).Seconds(), d.Seconds(), sent, live.acked.Load(), live.timedOut.Load(), sent-done))
		}
	}
}
