package hotkeys

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeClock is a clock that moves only when told to.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{t: time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// byKey indexes a Top report by key.
func byKey(keys []Key) map[string]Key {
	m := make(map[string]Key, len(keys))
	for _, k := range keys {
		m[k.Key] = k
	}
	return m
}

// checkBounds checks the Space-Saving guarantees of a report against the
// true counts: every count is an upper bound, Count-Error a lower bound,
// and every key whose true count is above total/k is present.
func checkBounds(t *testing.T, keys []Key, truth map[string]int64, total int64, k int) {
	t.Helper()
	got := byKey(keys)
	for _, r := range keys {
		tc := truth[r.Key]
		if r.Count < tc || r.Count-r.Error > tc {
			t.Errorf("key %q: true count %d outside [Count-Error, Count] = [%d, %d]", r.Key, tc, r.Count-r.Error, r.Count)
		}
		if r.Error < 0 || r.Error > r.Count {
			t.Errorf("key %q: Error %d not in [0, Count=%d]", r.Key, r.Error, r.Count)
		}
	}
	threshold := total / int64(k)
	for key, tc := range truth {
		if tc > threshold {
			if _, ok := got[key]; !ok {
				t.Errorf("key %q with true count %d > N/K = %d is missing", key, tc, threshold)
			}
		}
	}
}

func TestDefaultsApplyToZeroOptions(t *testing.T) {
	tr := New(Options{})
	if tr.k != DefaultK || tr.window != DefaultWindow || tr.maxNames != DefaultMaxNames || tr.now == nil {
		t.Fatalf("defaults: k=%d window=%v maxNames=%d", tr.k, tr.window, tr.maxNames)
	}
	tr = New(Options{K: -1, Window: -time.Second, MaxNames: -5})
	if tr.k != DefaultK || tr.window != DefaultWindow || tr.maxNames != DefaultMaxNames {
		t.Fatalf("negative options: k=%d window=%v maxNames=%d", tr.k, tr.window, tr.maxNames)
	}
}

func TestExactCountsWhenDistinctKeysFitInK(t *testing.T) {
	clk := newFakeClock()
	tr := New(Options{K: 64, Now: clk.Now})
	truth := map[string]int64{}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 50_000 {
		key := "row" + strconv.Itoa(rng.IntN(64))
		n := int64(rng.IntN(5) + 1)
		tr.Add("posts.likes", key, n)
		truth[key] += n
	}
	top := tr.Top("posts.likes", 0)
	if len(top) != len(truth) {
		t.Fatalf("got %d keys, want %d", len(top), len(truth))
	}
	for _, r := range top {
		if r.Count != truth[r.Key] || r.Error != 0 {
			t.Errorf("key %q: Count=%d Error=%d, want Count=%d Error=0", r.Key, r.Count, r.Error, truth[r.Key])
		}
	}
	if !slices.IsSortedFunc(top, func(a, b Key) int { return int(b.Count - a.Count) }) {
		t.Errorf("report not hottest first: %v", top)
	}
}

func TestHeavyKeyIsReportedFirstWithinErrorBound(t *testing.T) {
	const (
		adds     = 100_000
		distinct = 10_000
		k        = 64
	)
	clk := newFakeClock()
	tr := New(Options{K: k, Now: clk.Now})
	truth := map[string]int64{}
	rng := rand.New(rand.NewPCG(3, 4))
	for range adds {
		key := "hot"
		if rng.Float64() >= 0.3 {
			key = strconv.Itoa(rng.IntN(distinct))
		}
		tr.Add("posts.likes", key, 1)
		truth[key]++
	}
	top := tr.Top("posts.likes", 10)
	if len(top) == 0 || top[0].Key != "hot" {
		t.Fatalf("hottest key = %v, want \"hot\"", top)
	}
	h := top[0]
	if tc := truth["hot"]; h.Count < tc || h.Count-h.Error > tc {
		t.Errorf("hot: true count %d outside [%d, %d]", tc, h.Count-h.Error, h.Count)
	}
	if h.Error > adds/k {
		t.Errorf("hot: Error %d above N/K = %d", h.Error, adds/k)
	}
	all := tr.Top("posts.likes", 0)
	if len(all) != k {
		t.Errorf("got %d entries, want K = %d", len(all), k)
	}
	checkBounds(t, all, truth, adds, k)
}

func TestKeysAboveNOverKArePresent(t *testing.T) {
	const k = 64
	for seed := range uint64(5) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 99))
			// Ten warm keys with about 2% of the total each, above
			// N/K (about 1.6%), hidden among 20,000 cold keys, with
			// weighted adds.
			type add struct {
				key string
				n   int64
			}
			var stream []add
			for i := range 10 {
				for range 700 {
					stream = append(stream, add{fmt.Sprint("warm", i), 3})
				}
			}
			for range 80_000 {
				stream = append(stream, add{fmt.Sprint("cold", rng.IntN(20_000)), int64(rng.IntN(2) + 1)})
			}
			rng.Shuffle(len(stream), func(i, j int) { stream[i], stream[j] = stream[j], stream[i] })

			clk := newFakeClock()
			tr := New(Options{K: k, Now: clk.Now})
			truth := map[string]int64{}
			var total int64
			for _, a := range stream {
				tr.Add("c", a.key, a.n)
				truth[a.key] += a.n
				total += a.n
			}
			top := tr.Top("c", 0)
			checkBounds(t, top, truth, total, k)
			for _, r := range top {
				if r.Error > total/k {
					t.Errorf("key %q: Error %d above N/K = %d", r.Key, r.Error, total/k)
				}
			}
		})
	}
}

func TestMergedWindowsKeepSpaceSavingGuarantees(t *testing.T) {
	const k = 32
	for seed := range uint64(5) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			clk := newFakeClock()
			tr := New(Options{K: k, Window: time.Minute, Now: clk.Now})
			truth := map[string]int64{}
			var total int64
			add := func(key string, n int64) {
				tr.Add("c", key, n)
				truth[key] += n
				total += n
			}
			// Window 0: "early" is hot; window 1: "late" is hot; "both" is
			// warm in each; the rest is noise that fills both sketches.
			for range 20_000 {
				switch r := rng.Float64(); {
				case r < 0.2:
					add("early", 1)
				case r < 0.25:
					add("both", 1)
				default:
					add(fmt.Sprint("noise", rng.IntN(5_000)), int64(rng.IntN(3)+1))
				}
			}
			clk.Advance(time.Minute)
			for range 20_000 {
				switch r := rng.Float64(); {
				case r < 0.2:
					add("late", 2)
				case r < 0.25:
					add("both", 1)
				default:
					add(fmt.Sprint("noise", rng.IntN(5_000)), int64(rng.IntN(3)+1))
				}
			}
			top := tr.Top("c", 0)
			checkBounds(t, top, truth, total, k)
			if top[0].Key != "late" || top[1].Key != "early" {
				t.Errorf("top two = %q, %q; want late, early", top[0].Key, top[1].Key)
			}
			if _, ok := byKey(top)["both"]; !ok {
				t.Errorf("key \"both\" missing")
			}
		})
	}
}

func TestMergeAddsFullWindowMinimumToKeysMissingThere(t *testing.T) {
	clk := newFakeClock()
	tr := New(Options{K: 2, Window: time.Minute, Now: clk.Now})
	tr.Add("c", "a", 10)
	tr.Add("c", "b", 5)
	tr.Add("c", "x", 1) // replaces b: count 6, error 5; window 0 is full, minimum 6
	clk.Advance(time.Minute)
	tr.Add("c", "y", 1) // window 1 holds one entry: not full, exact
	got := tr.Top("c", 0)
	want := []Key{
		{Key: "a", Count: 10, Error: 0}, // not in window 1, which is exact
		{Key: "y", Count: 7, Error: 6},  // may have been evicted from window 0
		{Key: "x", Count: 6, Error: 5},
	}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i].Key != want[i].Key || got[i].Count != want[i].Count || got[i].Error != want[i].Error {
			t.Errorf("entry %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestWindowsExpireOldCountsAndReportSpanAndRate(t *testing.T) {
	clk := newFakeClock()
	tr := New(Options{Window: time.Minute, Now: clk.Now})
	check := func(step string, wantSpan time.Duration, want map[string]int64) {
		t.Helper()
		top := tr.Top("c", 0)
		if len(top) != len(want) {
			t.Fatalf("%s: got %v, want counts %v", step, top, want)
		}
		for _, r := range top {
			if r.Count != want[r.Key] || r.Error != 0 {
				t.Errorf("%s: key %q Count=%d Error=%d, want %d, 0", step, r.Key, r.Count, r.Error, want[r.Key])
			}
			if r.Span != wantSpan {
				t.Errorf("%s: key %q Span=%v, want %v", step, r.Key, r.Span, wantSpan)
			}
			if wantRate := float64(r.Count) / wantSpan.Seconds(); math.Abs(r.Rate-wantRate) > 1e-9 {
				t.Errorf("%s: key %q Rate=%v, want %v", step, r.Key, r.Rate, wantRate)
			}
		}
	}

	clk.Advance(10 * time.Second) // 0:10, window 0
	tr.Add("c", "a", 1)
	check("first window", 10*time.Second, map[string]int64{"a": 1})

	clk.Advance(time.Minute) // 1:10, window 1
	tr.Add("c", "b", 2)
	tr.Add("c", "a", 1)
	check("second window", 70*time.Second, map[string]int64{"a": 2, "b": 2})

	clk.Advance(time.Minute) // 2:10, window 2: window 0 (a=1 of its two) is gone
	tr.Add("c", "c", 3)
	check("third window", 70*time.Second, map[string]int64{"a": 1, "b": 2, "c": 3})

	clk.Advance(time.Minute) // 3:10, window 3, silent: window 2 is the previous one
	check("one silent window", 70*time.Second, map[string]int64{"c": 3})

	clk.Advance(time.Minute) // 4:10, window 4: windows 3 and 4 are silent
	if top := tr.Top("c", 0); top != nil {
		t.Fatalf("after two silent windows: got %v, want nothing", top)
	}

	clk.Advance(10 * time.Minute) // 14:10, window 14: adds start again
	tr.Add("c", "d", 4)
	check("after a long gap", 70*time.Second, map[string]int64{"d": 4})
}

func TestLongSilenceWithoutTopLeavesNothing(t *testing.T) {
	clk := newFakeClock()
	tr := New(Options{Window: time.Minute, Now: clk.Now})
	tr.Add("c", "old", 100)
	clk.Advance(5 * time.Minute) // window 5; no Top in between
	tr.Add("c", "new", 1)
	top := tr.Top("c", 0)
	if len(top) != 1 || top[0].Key != "new" || top[0].Count != 1 || top[0].Error != 0 {
		t.Fatalf("got %v, want only new=1", top)
	}
}

func TestSpanIsAtLeastOneMillisecond(t *testing.T) {
	clk := newFakeClock()
	tr := New(Options{Now: clk.Now})
	tr.Add("c", "a", 5)
	top := tr.Top("c", 1)
	if len(top) != 1 || top[0].Span != time.Millisecond || top[0].Rate != 5000 {
		t.Fatalf("got %+v, want Span 1ms and Rate 5000", top)
	}
}

func TestClockGoingBackCountsInCurrentWindow(t *testing.T) {
	clk := newFakeClock()
	tr := New(Options{Window: time.Minute, Now: clk.Now})
	clk.Advance(2*time.Minute + 30*time.Second) // window 2
	tr.Add("c", "a", 1)
	clk.Advance(-time.Minute) // window 1
	tr.Add("c", "a", 1)
	top := tr.Top("c", 0)
	if len(top) != 1 || top[0].Count != 2 || top[0].Span < time.Millisecond {
		t.Fatalf("got %+v, want a=2 with a positive span", top)
	}
	clk.Advance(-10 * time.Minute) // before New
	tr.Add("c", "a", 1)
	if top := tr.Top("c", 0); len(top) != 1 || top[0].Count != 3 {
		t.Fatalf("got %+v, want a=3", top)
	}
}

func TestNegativeAddsCountAbsoluteValueAndZeroIsIgnored(t *testing.T) {
	clk := newFakeClock()
	tr := New(Options{Now: clk.Now})
	tr.Add("c", "a", -3)
	tr.Add("c", "a", 2)
	tr.Add("c", "b", 0)
	tr.Add("zero.only", "a", 0)
	top := tr.Top("c", 0)
	if len(top) != 1 || top[0].Key != "a" || top[0].Count != 5 {
		t.Fatalf("got %v, want a=5 only", top)
	}
	if names := tr.Names(); !slices.Equal(names, []string{"c"}) {
		t.Fatalf("Names() = %v, want [c]: an add of zero tracks no name", names)
	}
	tr.Add("c", "min", math.MinInt64)
	tr.Add("c", "min", 1)
	if r := byKey(tr.Top("c", 0))["min"]; r.Count != math.MaxInt64 {
		t.Fatalf("min: Count = %d, want saturation at MaxInt64", r.Count)
	}
}

func TestMaxNamesDropsAddsForFurtherNames(t *testing.T) {
	clk := newFakeClock()
	tr := New(Options{MaxNames: 2, Now: clk.Now})
	tr.Add("b.col", "1", 1)
	tr.Add("a.col", "1", 1)
	tr.Add("c.col", "1", 1) // dropped
	tr.Add("c.col", "2", 1) // dropped
	tr.Add("a.col", "1", 1) // tracked name: counted
	if got := tr.Dropped(); got != 2 {
		t.Errorf("Dropped() = %d, want 2", got)
	}
	if names := tr.Names(); !slices.Equal(names, []string{"a.col", "b.col"}) {
		t.Errorf("Names() = %v, want [a.col b.col]", names)
	}
	if top := tr.Top("c.col", 10); top != nil {
		t.Errorf("Top of dropped name = %v, want nil", top)
	}
	if top := tr.Top("a.col", 10); len(top) != 1 || top[0].Count != 2 {
		t.Errorf("Top(a.col) = %v, want 1=2", top)
	}
}

func TestTopLimitsAndUnknownNames(t *testing.T) {
	clk := newFakeClock()
	tr := New(Options{K: 8, Now: clk.Now})
	tr.Add("c", "z", 1)
	tr.Add("c", "y", 3)
	tr.Add("c", "x", 1)
	tr.Add("c", "w", 2)

	keysOf := func(ks []Key) []string {
		var s []string
		for _, k := range ks {
			s = append(s, k.Key)
		}
		return s
	}
	want := []string{"y", "w", "x", "z"} // equal counts in key order
	if got := keysOf(tr.Top("c", 100)); !slices.Equal(got, want) {
		t.Errorf("Top(c, 100) = %v, want %v", got, want)
	}
	if got := keysOf(tr.Top("c", 0)); !slices.Equal(got, want) {
		t.Errorf("Top(c, 0) = %v, want %v", got, want)
	}
	if got := keysOf(tr.Top("c", -1)); !slices.Equal(got, want) {
		t.Errorf("Top(c, -1) = %v, want %v", got, want)
	}
	if got := keysOf(tr.Top("c", 2)); !slices.Equal(got, want[:2]) {
		t.Errorf("Top(c, 2) = %v, want %v", got, want[:2])
	}
	if got := tr.Top("unknown", 5); got != nil {
		t.Errorf("Top(unknown) = %v, want nil", got)
	}
	if got := New(Options{}).Names(); len(got) != 0 {
		t.Errorf("Names() of a new Tracker = %v, want none", got)
	}
}

func TestTopResultIsACopy(t *testing.T) {
	clk := newFakeClock()
	tr := New(Options{Now: clk.Now})
	tr.Add("c", "a", 1)
	top := tr.Top("c", 1)
	top[0].Count = 1000
	if again := tr.Top("c", 1); again[0].Count != 1 {
		t.Fatalf("changing a report changed the tracker: %v", again)
	}
}

func TestConcurrentAddsGiveExactTotalsWhenKeysFitInK(t *testing.T) {
	const (
		goroutines = 32
		perG       = 5_000
		keys       = 64
	)
	tr := New(Options{K: keys})
	names := []string{"posts.likes", "posts.views"}
	var wg sync.WaitGroup
	var stop atomic.Bool
	// Readers run alongside the writers.
	wg.Go(func() {
		for !stop.Load() {
			for _, n := range tr.Names() {
				_ = tr.Top(n, 5)
			}
		}
	})
	var writers sync.WaitGroup
	for g := range goroutines {
		writers.Go(func() {
			for i := range perG {
				tr.Add(names[i%2], "row"+strconv.Itoa((g+i)%keys), 1)
			}
		})
	}
	writers.Wait()
	stop.Store(true)
	wg.Wait()

	for _, name := range names {
		var total int64
		top := tr.Top(name, 0)
		if len(top) != keys {
			t.Errorf("%s: %d keys, want %d", name, len(top), keys)
		}
		for _, r := range top {
			if r.Error != 0 {
				t.Errorf("%s: key %q Error = %d, want 0", name, r.Key, r.Error)
			}
			total += r.Count
		}
		if want := int64(goroutines * perG / 2); total != want {
			t.Errorf("%s: total %d, want %d", name, total, want)
		}
	}
}

func TestAddDoesNotAllocateForExistingOrReplacedKeys(t *testing.T) {
	if testing.Short() {
		t.Skip("allocation counts")
	}
	tr := New(Options{K: 64})
	tr.Add("c", "hot", 1)
	if a := testing.AllocsPerRun(1000, func() { tr.Add("c", "hot", 1) }); a != 0 {
		t.Errorf("Add of an existing key: %v allocations, want 0", a)
	}
	keys := make([]string, 4096)
	for i := range keys {
		keys[i] = "row" + strconv.Itoa(i)
	}
	i := 0
	evict := func() { tr.Add("c", keys[i%len(keys)], 1); i++ }
	for range 10_000 { // let the sketch fill and settle
		evict()
	}
	if a := testing.AllocsPerRun(10_000, evict); a != 0 {
		t.Errorf("Add replacing an entry: %v allocations, want 0", a)
	}
}

func BenchmarkAdd(b *testing.B) {
	b.Run("serial", func(b *testing.B) {
		tr := New(Options{})
		tr.Add("posts.likes", "42", 1)
		b.ReportAllocs()
		for b.Loop() {
			tr.Add("posts.likes", "42", 1)
		}
	})
	b.Run("parallel", func(b *testing.B) {
		// All goroutines add to one name, among 64 keys: one mutex.
		tr := New(Options{})
		keys := make([]string, 64)
		for i := range keys {
			keys[i] = strconv.Itoa(i)
			tr.Add("posts.likes", keys[i], 1)
		}
		var id atomic.Int64
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			i := int(id.Add(1))
			for pb.Next() {
				tr.Add("posts.likes", keys[i&63], 1)
				i++
			}
		})
	})
	b.Run("parallel-names", func(b *testing.B) {
		// Each goroutine adds to a name of its own.
		tr := New(Options{})
		var id atomic.Int64
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			name := "table.col" + strconv.Itoa(int(id.Add(1)))
			tr.Add(name, "42", 1)
			for pb.Next() {
				tr.Add(name, "42", 1)
			}
		})
	})
}

func BenchmarkAddEvict(b *testing.B) {
	// 65,536 keys in turn: with K = 64, each add finds no entry for its key
	// and replaces the smallest one.
	keys := make([]string, 1<<16)
	for i := range keys {
		keys[i] = "row" + strconv.Itoa(i)
	}
	const mask = 1<<16 - 1
	b.Run("serial", func(b *testing.B) {
		tr := New(Options{})
		for i := range 1000 {
			tr.Add("posts.likes", keys[i], 1)
		}
		i := 1000
		b.ReportAllocs()
		for b.Loop() {
			tr.Add("posts.likes", keys[i&mask], 1)
			i++
		}
	})
	b.Run("parallel", func(b *testing.B) {
		tr := New(Options{})
		for i := range 1000 {
			tr.Add("posts.likes", keys[i], 1)
		}
		var id atomic.Int64
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			i := int(id.Add(1)) * 7919
			for pb.Next() {
				tr.Add("posts.likes", keys[i&mask], 1)
				i++
			}
		})
	})
}
