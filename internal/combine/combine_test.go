package combine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestDoAddsEveryDeltaExactlyOnce: 64 goroutines x 200 calls on 3 keys with a
// slow statement; every delta lands once, batches form, and no more than
// Limit statements of one key ever run at once.
func TestDoAddsEveryDeltaExactlyOnce(t *testing.T) {
	for _, limit := range []int{0, 1, 4} {
		var g Group
		g.Limit = limit
		keys := []string{"a", "b", "c"}
		var mu sync.Mutex
		total := map[string]int64{}
		running := map[string]int{}
		var statements, calls atomic.Int64
		var worst atomic.Int64
		var wg sync.WaitGroup
		for w := 0; w < 64; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 200; i++ {
					key := keys[(w+i)%len(keys)]
					n, err := g.Do(context.Background(), key, int64(w%5+1), func(ctx context.Context, sum int64) (int64, error) {
						mu.Lock()
						running[key]++
						if r := int64(running[key]); r > worst.Load() {
							worst.Store(r)
						}
						mu.Unlock()
						statements.Add(1)
						time.Sleep(50 * time.Microsecond)
						mu.Lock()
						total[key] += sum
						running[key]--
						mu.Unlock()
						return 1, nil
					})
					if err != nil || n != 1 {
						t.Errorf("Do = %d, %v; want 1, nil", n, err)
						return
					}
					calls.Add(1)
				}
			}()
		}
		wg.Wait()
		var want, got int64
		for w := 0; w < 64; w++ {
			want += 200 * int64(w%5+1)
		}
		for _, k := range keys {
			got += total[k]
		}
		if got != want || calls.Load() != 64*200 {
			t.Fatalf("limit %d: added %d over %d calls, want %d over %d", limit, got, calls.Load(), want, 64*200)
		}
		if w := worst.Load(); w > int64(max(limit, 1)) {
			t.Fatalf("limit %d: %d statements of one key ran at once", limit, w)
		}
		if statements.Load() >= calls.Load() {
			t.Fatalf("limit %d: %d statements for %d calls: nothing was combined", limit, statements.Load(), calls.Load())
		}
		// The goroutine of the last statement tidies up after its callers
		// returned.
		waitFor(t, func() bool {
			g.mu.Lock()
			defer g.mu.Unlock()
			return len(g.lines) == 0
		})
		t.Logf("limit %d: %d calls in %d statements", limit, calls.Load(), statements.Load())
	}
}

// TestDoAloneRunsAtOnce: with nothing in flight a call is its own statement.
func TestDoAloneRunsAtOnce(t *testing.T) {
	var g Group
	for i := 1; i <= 3; i++ {
		n, err := g.Do(context.Background(), "k", int64(i), func(_ context.Context, sum int64) (int64, error) {
			if sum != int64(i) {
				t.Fatalf("sum %d, want %d", sum, i)
			}
			return 7, nil
		})
		if n != 7 || err != nil {
			t.Fatalf("Do = %d, %v", n, err)
		}
	}
}

// TestDoWithANegativeLimitNeverCombines: with Limit < 0 every call runs
// its own statement at once, even while others of its key are running.
func TestDoWithANegativeLimitNeverCombines(t *testing.T) {
	g := Group{Limit: -1}
	const n = 8
	var running atomic.Int64
	all := make(chan struct{})
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			_, err := g.Do(context.Background(), "k", 1, func(_ context.Context, sum int64) (int64, error) {
				if sum != 1 {
					t.Errorf("sum %d: calls were combined", sum)
				}
				if running.Add(1) == n {
					close(all)
				}
				select { // every call is running at once
				case <-all:
				case <-time.After(5 * time.Second):
					t.Errorf("only %d of %d calls ran at once", running.Load(), n)
				}
				return 1, nil
			})
			if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
}

// TestDoSharesTheResult: every call a statement carried gets its result,
// errors included.
func TestDoSharesTheResult(t *testing.T) {
	var g Group
	boom := errors.New("boom")
	release := make(chan struct{})
	first := make(chan error)
	go func() {
		_, err := g.Do(context.Background(), "k", 1, func(context.Context, int64) (int64, error) {
			<-release
			return 0, nil
		})
		first <- err
	}()
	waitRunning(t, &g, "k")
	var wg sync.WaitGroup
	errs := make([]error, 5)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = g.Do(context.Background(), "k", 1, func(_ context.Context, sum int64) (int64, error) {
				if sum != 5 {
					t.Errorf("the second statement adds %d, want 5", sum)
				}
				return 0, boom
			})
		}()
	}
	waitQueued(t, &g, "k", 5)
	close(release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for _, err := range errs {
		if !errors.Is(err, boom) {
			t.Fatalf("err = %v, want boom", err)
		}
	}
}

// TestDoValueSharesTheValue: the calls a statement carried all get the
// value its run returned; a call alone gets its own.
func TestDoValueSharesTheValue(t *testing.T) {
	var g Group
	release := make(chan struct{})
	first := make(chan any)
	go func() {
		_, v, _ := g.DoValue(context.Background(), "k", 1, func(_ context.Context, sum int64) (int64, any, error) {
			<-release
			return 0, &sum, nil
		})
		first <- v
	}()
	waitRunning(t, &g, "k")
	var wg sync.WaitGroup
	got := make([]any, 5)
	for i := range got {
		wg.Go(func() {
			_, got[i], _ = g.DoValue(context.Background(), "k", 1, func(_ context.Context, sum int64) (int64, any, error) {
				return sum, &sum, nil
			})
		})
	}
	waitQueued(t, &g, "k", 5)
	close(release)
	if v := <-first; *v.(*int64) != 1 {
		t.Fatalf("the first call got %v, want its own statement's 1", *v.(*int64))
	}
	wg.Wait()
	for _, v := range got {
		if v != got[0] || *v.(*int64) != 5 {
			t.Fatalf("calls of one statement got %v and %v (sum %d), want one value of sum 5", v, got[0], *v.(*int64))
		}
	}
}

// TestDoCancelled: a call that gives up while queued is never written; a
// batch is cancelled only when all its calls gave up.
func TestDoCancelled(t *testing.T) {
	var g Group
	release := hold(t, &g, "k")

	// Queued, then cancelled: removed, its delta never added.
	ctx, cancel := context.WithCancel(context.Background())
	gone := make(chan error)
	go func() {
		_, err := g.Do(ctx, "k", 100, func(context.Context, int64) (int64, error) { return 0, errors.New("must not run") })
		gone <- err
	}()
	waitQueued(t, &g, "k", 1)
	cancel()
	if err := <-gone; !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}

	// Two queued calls, one of which gives up while their batch runs: the
	// batch goes on with the other's context alive.
	ctxA, cancelA := context.WithCancel(context.Background())
	ctxB, cancelB := context.WithCancel(context.Background())
	defer cancelB()
	sums := make(chan int64, 1)
	inBatch := make(chan struct{})
	finish := make(chan struct{})
	batch := func(ctx context.Context, sum int64) (int64, error) {
		sums <- sum
		close(inBatch)
		select {
		case <-finish:
			return 1, nil
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	resA, resB := make(chan error, 1), make(chan error, 1)
	go func() { _, err := g.Do(ctxA, "k", 2, batch); resA <- err }()
	waitQueued(t, &g, "k", 1)
	go func() { _, err := g.Do(ctxB, "k", 3, batch); resB <- err }()
	waitQueued(t, &g, "k", 2)
	close(release)
	<-inBatch
	if s := <-sums; s != 5 {
		t.Fatalf("batch adds %d, want 5 (the cancelled 100 must be gone)", s)
	}
	cancelA()
	// A leaves at once, with its context's error, while the statement goes
	// on for B, whose result is the statement's.
	if err := <-resA; !errors.Is(err, context.Canceled) {
		t.Fatalf("A: %v, want context.Canceled while its statement runs", err)
	}
	close(finish)
	if err := <-resB; err != nil {
		t.Fatalf("B: %v", err)
	}

	// All calls of a batch give up: its statement's context ends.
	blocked := make(chan struct{})
	go g.Do(context.Background(), "j", 1, func(context.Context, int64) (int64, error) {
		<-blocked
		return 1, nil
	})
	waitRunning(t, &g, "j")
	ctxC, cancelC := context.WithCancel(context.Background())
	ended := make(chan error, 1)
	started := make(chan struct{})
	go g.Do(ctxC, "j", 1, func(ctx context.Context, _ int64) (int64, error) {
		close(started)
		<-ctx.Done()
		ended <- ctx.Err()
		return 0, ctx.Err()
	})
	waitQueued(t, &g, "j", 1)
	close(blocked)
	<-started
	cancelC()
	select {
	case err := <-ended:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("statement context ended with %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the statement's context was not cancelled when its only caller gave up")
	}
}

// TestDoPanicReleasesWaiters: a panic in a statement reaches the goroutine
// that ran it; the calls it carried get ErrAbandoned and the next batch runs.
func TestDoPanicReleasesWaiters(t *testing.T) {
	var g Group
	release := make(chan struct{})
	panicked := make(chan any)
	go func() {
		defer func() { panicked <- recover() }()
		g.Do(context.Background(), "k", 1, func(context.Context, int64) (int64, error) {
			<-release
			panic("driver bug")
		})
	}()
	waitRunning(t, &g, "k")
	res := make(chan error)
	go func() {
		_, err := g.Do(context.Background(), "k", 1, func(context.Context, int64) (int64, error) { return 1, nil })
		res <- err
	}()
	waitQueued(t, &g, "k", 1)
	close(release)
	if p := <-panicked; p != "driver bug" {
		t.Fatalf("recovered %v", p)
	}
	if err := <-res; err != nil {
		t.Fatalf("the call queued behind the panic: %v", err)
	}
}

// TestDoDeadlines: a lone call's statement runs with the call's own context,
// so its deadline ends it with DeadlineExceeded; a statement carrying
// several calls that all have deadlines ends at the latest of them.
func TestDoDeadlines(t *testing.T) {
	var g Group
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err := g.Do(ctx, "k", 1, func(ctx context.Context, _ int64) (int64, error) {
		<-ctx.Done()
		return 0, ctx.Err()
	})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("lone call: %v, want DeadlineExceeded", err)
	}

	release := hold(t, &g, "k")
	soon, cancelSoon := context.WithTimeout(context.Background(), time.Hour)
	defer cancelSoon()
	later, cancelLater := context.WithTimeout(context.Background(), 2*time.Hour)
	defer cancelLater()
	want, _ := later.Deadline()
	got := make(chan time.Time, 1)
	batch := func(ctx context.Context, _ int64) (int64, error) {
		d, _ := ctx.Deadline()
		got <- d
		return 1, nil
	}
	var wg sync.WaitGroup
	for _, c := range []context.Context{soon, later} {
		wg.Add(1)
		go func() { defer wg.Done(); g.Do(c, "k", 1, batch) }()
		waitQueued(t, &g, "k", map[context.Context]int{soon: 1, later: 2}[c])
	}
	close(release)
	wg.Wait()
	if d := <-got; !d.Equal(want) {
		t.Fatalf("the statement's deadline is %v, want the latest, %v", d, want)
	}
}

// TestDoOverflowRunsAlone: deltas whose sum would overflow are not added
// up: each call runs its own statement.
func TestDoOverflowRunsAlone(t *testing.T) {
	var g Group
	release := hold(t, &g, "k")
	var mu sync.Mutex
	var sums []int64
	var wg sync.WaitGroup
	for i := 1; i <= 3; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := g.Do(context.Background(), "k", math.MaxInt64/2, func(_ context.Context, sum int64) (int64, error) {
				mu.Lock()
				sums = append(sums, sum)
				mu.Unlock()
				return 1, nil
			}); err != nil {
				t.Error(err)
			}
		}()
		waitQueued(t, &g, "k", i)
	}
	close(release)
	wg.Wait()
	if len(sums) != 3 {
		t.Fatalf("statements added %v, want three of MaxInt64/2", sums)
	}
	for _, s := range sums {
		if s != math.MaxInt64/2 {
			t.Fatalf("statements added %v, want three of MaxInt64/2", sums)
		}
	}
}

// short is the refusal of a take in TestABatchFailingWithASplittableErrorRunsItsCallsAlone: how much was left.
type short struct{ left int64 }

func (e short) Error() string { return fmt.Sprintf("%d left", e.left) }

// TestABatchFailingWithASplittableErrorRunsItsCallsAlone: a statement carrying several calls that fails with an error
// Split splits is not their answer. Five takes of 1 from 2 left: the take
// of 5 is refused (2 left); two takes run alone and succeed, the third is
// refused (0 left), and the last two are refused at once from that news,
// without statements of their own. An error Split does not split is every
// call's.
func TestABatchFailingWithASplittableErrorRunsItsCallsAlone(t *testing.T) {
	errBoom := errors.New("boom")
	g := Group{Split: func(err error) func(int64) (bool, error) {
		var s short
		if !errors.As(err, &s) {
			return nil
		}
		return func(delta int64) (bool, error) {
			if delta > s.left {
				return false, short{s.left}
			}
			return true, nil
		}
	}}
	var mu sync.Mutex
	left, fail := int64(2), false
	var sums []int64
	take := func(_ context.Context, sum int64) (int64, error) {
		mu.Lock()
		defer mu.Unlock()
		sums = append(sums, sum)
		switch {
		case fail:
			return 0, errBoom
		case sum > left:
			return 0, short{left}
		}
		left -= sum
		return 1, nil
	}
	run := func(calls int) (ok int, errs []error) {
		release := hold(t, &g, "k")
		res := make(chan error, calls)
		for i := 1; i <= calls; i++ {
			go func() {
				_, err := g.Do(context.Background(), "k", 1, take)
				res <- err
			}()
			waitQueued(t, &g, "k", i)
		}
		close(release)
		for range calls {
			if err := <-res; err != nil {
				errs = append(errs, err)
			} else {
				ok++
			}
		}
		return ok, errs
	}
	ok, errs := run(5)
	var s short
	for _, err := range errs {
		if !errors.As(err, &s) || s.left != 0 {
			t.Fatalf("a refused take got %v, want 0 left", err)
		}
	}
	if ok != 2 || len(errs) != 3 || left != 0 || len(sums) != 4 || sums[0] != 5 {
		t.Fatalf("%d taken, %d refused, %d left, statements of %v; want 2 taken, 3 refused, 0 left, statements of 5, 1, 1, 1", ok, len(errs), left, sums)
	}
	sums, fail = nil, true
	ok, errs = run(3)
	if ok != 0 || len(errs) != 3 || !errors.Is(errs[0], errBoom) || len(sums) != 1 {
		t.Fatalf("%d taken, errors %v, statements of %v; want every call to get the one statement's error", ok, errs, sums)
	}
}

// TestDoPanicInABatch: a panic in a statement run on the group's goroutine
// reaches its callers as ErrAbandoned (the program goes on), and the key
// keeps working.
func TestDoPanicInABatch(t *testing.T) {
	var g Group
	release := hold(t, &g, "k")
	res := make(chan error, 2)
	for i := 1; i <= 2; i++ {
		go func() {
			_, err := g.Do(context.Background(), "k", 1, func(context.Context, int64) (int64, error) { panic("driver bug") })
			res <- err
		}()
		waitQueued(t, &g, "k", i)
	}
	close(release)
	for i := 0; i < 2; i++ {
		if err := <-res; !errors.Is(err, ErrAbandoned) {
			t.Fatalf("err = %v, want ErrAbandoned", err)
		}
	}
	if n, err := g.Do(context.Background(), "k", 1, func(context.Context, int64) (int64, error) { return 1, nil }); n != 1 || err != nil {
		t.Fatalf("after the panic: %d, %v", n, err)
	}
}

// hold starts a statement of key that runs until release is closed, and
// waits until it runs: calls of key made meanwhile queue.
func hold(t *testing.T, g *Group, key string) (release chan struct{}) {
	t.Helper()
	release = make(chan struct{})
	go g.Do(context.Background(), key, 1, func(context.Context, int64) (int64, error) {
		<-release
		return 1, nil
	})
	waitRunning(t, g, key)
	return release
}

func waitRunning(t *testing.T, g *Group, key string) {
	t.Helper()
	waitFor(t, func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		l := g.lines[key]
		return l != nil && l.running > 0
	})
}

func waitQueued(t *testing.T, g *Group, key string, n int) {
	t.Helper()
	waitFor(t, func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		l := g.lines[key]
		return l != nil && len(l.queue) == n
	})
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for i := 0; i < 10000; i++ {
		if cond() {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatal("timed out")
}
