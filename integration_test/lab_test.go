package integration_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hotcounter/hotcounter/examples/viralpost/lab"
	"github.com/hotcounter/hotcounter/internal/testdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestViralPostLab runs a short version of the viral-post lab on PostgreSQL
// and checks what must hold whatever the machine's speed: no acknowledged
// like is lost, nothing deadlocks, the naive single row makes its writers
// queue on its lock, and skip-locked slots (more slots than the pool has
// connections) never wait 100 ms or more for a lock.
//
// Random slots are not held to that: when a commit stalls (a checkpoint, a
// slow fsync), two writers that drew the same slot wait for it, and a 20 s
// run of the lab has logged such waits. Their waits are logged here.
func TestViralPostLab(t *testing.T) {
	// It reads the server's deadlocks and lock waits, and measures: alone on
	// the machine, or the tests running beside it starve the naive row's
	// writers (a CI run saw 4 likes/s and the detector name no row).
	exclusive(t)
	res := runLab(t, "postgres", testdb.Durable(testdb.Postgres(t)))
	require.Len(t, res.Strategies, len(lab.Strategies()))
	if os.Getenv("CI") == "true" {
		for _, s := range res.Strategies {
			require.GreaterOrEqual(t, s.LockWaits.Logged, 0, "%s: the server log must be read under CI: %s", s.Name, s.LockWaits.LogNote)
		}
	}
	checkLab(t, res, func(s lab.StrategyResult) {
		if s.Name == "naive" {
			assert.Positive(t, s.LockWaits.Sampled, "naive: writers of one row must queue on its lock")
		}
	})
}

// TestViralPostLabMariaDB runs the lab on MariaDB. InnoDB logs no lock waits
// by duration; the server's count of row lock waits shows the naive row's
// writers queueing.
func TestViralPostLabMariaDB(t *testing.T) {
	exclusive(t) // it reads the server's deadlocks and row lock waits, and measures: alone
	res := runLab(t, "mysql", testdb.MySQL(t))
	require.Len(t, res.Strategies, len(lab.Strategies()))
	checkLab(t, res, func(s lab.StrategyResult) {
		if s.Name == "naive" {
			assert.Positive(t, s.LockWaits.RowLockWaits, "naive: writers of one row must queue on its lock")
		}
	})
}

// runLab runs a short lab: 2 s per strategy at 3,000 likes/s, more than one
// row takes through GORM on the 2-core CI machine.
func runLab(t *testing.T, driver, dsn string) *lab.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := lab.Run(ctx, lab.Config{
		Driver:    driver,
		DSN:       dsn,
		Rate:      3000,
		Duration:  2 * time.Second,
		Pool:      20,
		Timeout:   2 * time.Second,
		Threshold: 100 * time.Millisecond,
		Unrelated: 20,
	})
	require.NoError(t, err)
	t.Logf("%s %s; lock waits counted from: %s", res.Server.Product, res.Server.Version, res.Server.LockWaitLog)
	return res
}

// checkLab asserts what holds for every strategy on any machine, then what
// perStrategy adds; skip-locked slots must never wait 100 ms for a lock.
func checkLab(t *testing.T, res *lab.Result, perStrategy func(lab.StrategyResult)) {
	t.Helper()
	for _, s := range res.Strategies {
		t.Logf("%-12s offered %.0f/s achieved %.0f/s p50 %.1f ms p99 %.1f ms timed out %d; waits logged %d, sampled %d (%d >= 100 ms, longest %.0f ms), server-counted %d; acked %d counted %d",
			s.Name, res.Rate, s.Achieved, s.Likes.P50, s.Likes.P99, s.TimedOut,
			s.LockWaits.Logged, s.LockWaits.Sampled, s.LockWaits.SampledOver, s.LockWaits.LongestMs, s.LockWaits.RowLockWaits, s.Acked, s.Counted)
		assert.Positive(t, s.Acked, "%s: acknowledged likes", s.Name)
		assert.Zero(t, s.Lost, "%s: acknowledged likes not counted", s.Name)
		if s.TimedOut == 0 {
			assert.Equal(t, int64(s.Acked), s.Counted, "%s: counted, with every like's outcome known", s.Name)
		}
		assert.GreaterOrEqual(t, s.Counted, int64(s.Acked), "%s: counted", s.Name)
		assert.LessOrEqual(t, s.Counted, int64(s.Acked+s.TimedOut), "%s: counted more than were sent and not refused", s.Name)
		assert.Zero(t, s.Deadlocks, "%s: deadlocks on the server", s.Name)
		assert.Zero(t, s.Deadlocked, "%s: likes failed by deadlock", s.Name)
		assert.Zero(t, s.Failed, "%s: likes failed: %v", s.Name, s.Errors)
		assert.Empty(t, s.DetectErr, "%s: detect could not run", s.Name)
		// The library's hot keys and, for the naive row, the detector name
		// the viral post (id 1) and its column.
		if assert.NotEmpty(t, s.HotKeys, "%s: hot keys", s.Name) {
			assert.Equal(t, "1", s.HotKeys[0].Key, "%s: hottest key", s.Name)
			assert.Equal(t, s.Name != "naive", s.HotKeys[0].Counter, "%s: hot key is a counter", s.Name)
		}
		if s.Name == "naive" && assert.NotEmpty(t, s.Detected, "naive: detect named no row") {
			d := s.Detected[0]
			assert.True(t, strings.HasSuffix(d.Table, ".viral_naive_posts") && d.Key == "1" && d.Column == "like_count",
				"naive: detect named %s key %s column %s, want viral_naive_posts 1 like_count", d.Table, d.Key, d.Column)
		}
		perStrategy(s)
		if s.Name != "skiplocked64" {
			continue
		}
		assert.Zero(t, s.LockWaits.SampledOver, "%s: lock waits of 100 ms or more, sampled", s.Name)
		if s.LockWaits.Logged >= 0 {
			assert.Zero(t, s.LockWaits.Logged, "%s: lock waits of 100 ms or more in the server log: %v", s.Name, s.LockWaits.LoggedRelations)
		}
	}
}

// TestFlashSaleLab runs a short flash sale (2 s per strategy at 500
// buyers/s, stock for half of it plus a restock) on PostgreSQL and MariaDB
// and checks what must hold whatever the machine's speed (the naive row
// may not sell out on a loaded machine): no buyer is refused while stock
// remained, no row goes below zero, and what left the stock is what was
// sold, up to the takes whose outcome a timeout hid.
func TestFlashSaleLab(t *testing.T) {
	parallel(t)
	for _, k := range []dbKind{pg, my} {
		t.Run(string(k), func(t *testing.T) {
			parallel(t)
			reserve(t, k, 24) // the pool of 20, the observer's connections
			dsn, driver := testdb.Durable(testdb.Postgres(t)), "postgres"
			if k == my {
				dsn, driver = testdb.MySQL(t), "mysql"
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			res, err := lab.FlashSale(ctx, lab.FlashSaleConfig{Config: lab.Config{
				Driver: driver, DSN: dsn, Rate: 500, Duration: 2 * time.Second, Pool: 20, Timeout: 5 * time.Second}})
			require.NoError(t, err)
			require.Len(t, res.Strategies, len(lab.SaleStrategies()))
			for _, s := range res.Strategies {
				t.Logf("%-7s sold %d/s p99 %.1f ms; sold %d refused %d (while stock remained %d) timed out %d; restocked %v, taken %d left %d lowest row %d",
					s.Name, int(s.SoldPerS), s.Takes.P99, s.Sold, s.Refused, s.FalseRefusals, s.TimedOut, s.Restocked, s.Taken, s.Left, s.LowestRow)
				assert.Zero(t, s.FalseRefusals, "%s: refused while stock remained", s.Name)
				assert.GreaterOrEqual(t, s.LowestRow, int64(0), "%s: a row below zero", s.Name)
				assert.Positive(t, s.Sold, "%s: sales", s.Name)
				assert.LessOrEqual(t, int64(s.Sold), s.Taken, "%s: acknowledged sales not taken from the stock", s.Name)
				assert.LessOrEqual(t, s.Taken, int64(s.Sold+s.TimedOut), "%s: taken more than sold", s.Name)
				assert.Zero(t, s.Deadlocked, "%s: deadlocks", s.Name)
				assert.Zero(t, s.Failed, "%s: failed: %v", s.Name, s.Errors)
			}
		})
	}
}
