package lab

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hotcounter/hotcounter/internal/testdb"
)

// TestObserverCountsARealLockWait makes one writer of the pool wait 300 ms
// (from the moment it waits) behind a row lock and checks that both ways of counting lock waits see it:
// the server's log (read back through SQL) and the pg_locks samples. The
// lab's zero-wait results mean something only if this wait is counted.
func TestObserverCountsARealLockWait(t *testing.T) {
	ctx := context.Background()
	tg, err := newTarget("postgres", testdb.Postgres(t))
	require.NoError(t, err)
	obsDB, err := tg.sqlDB(nil, nil)
	require.NoError(t, err)
	defer obsDB.Close()
	obs, err := newObserver(ctx, obsDB, tg, "auto")
	require.NoError(t, err)
	if obs.log == nil && os.Getenv("CI") == "true" {
		t.Fatalf("the server log must be readable under CI: %s", obs.server.LockWaitLog)
	}
	cfg := Config{Pool: 2}
	cfg.defaults()
	p, err := tg.openPool(cfg, obs.server.Superuser)
	require.NoError(t, err)
	defer p.sql.Close()
	require.NoError(t, p.db.Exec(`CREATE TABLE lw (id int PRIMARY KEY, n int NOT NULL)`).Error)
	require.NoError(t, p.db.Exec(`INSERT INTO lw VALUES (1, 0)`).Error)

	var from int64
	if obs.log != nil {
		from, err = obs.log.Size(ctx)
		require.NoError(t, err)
	}
	sampling := obs.sample(ctx)
	holder := p.db.Begin()
	require.NoError(t, holder.Exec(`SELECT * FROM lw WHERE id = 1 FOR UPDATE`).Error)
	released := make(chan error, 1)
	go func() {
		// Hold the lock 300 ms from the moment the update waits on it, as
		// the server measures the wait, not from when it was sent: on a
		// busy machine the update may reach the server late.
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			var waiting int
			if err := obsDB.QueryRowContext(ctx, `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE 'UPDATE lw SET n = n + 1%'`).Scan(&waiting); err != nil || waiting > 0 {
				break
			}
		}
		time.Sleep(300 * time.Millisecond)
		released <- holder.Commit().Error
	}()
	start := time.Now()
	require.NoError(t, p.db.Exec(`UPDATE lw SET n = n + 1 WHERE id = 1`).Error)
	waited := time.Since(start)
	require.NoError(t, <-released)
	require.Greater(t, waited, 250*time.Millisecond, "the update did not wait for the row lock")

	var w LockWaits
	sampling.finish(&w, cfg.Threshold, p.backends())
	assert.Equal(t, 1, w.Sampled, "distinct waits sampled")
	assert.Equal(t, 1, w.SampledOver, "sampled waits of 100 ms or more")
	if obs.log == nil {
		t.Logf("server log not read: %s", obs.server.LockWaitLog)
		return
	}
	// The server writes its "acquired" line after the wait ends, when it
	// gets to it: read the log until it is there.
	var text string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		text, err = obs.log.ReadFrom(ctx, from)
		require.NoError(t, err)
		if strings.Contains(text, " acquired ") || time.Now().After(deadline) {
			break
		}
	}
	parseLog(text, p.backends(), &w)
	assert.Equal(t, 1, w.Logged, "logged waits in:\n%s", text)
	assert.Equal(t, map[string]int{"lw": 1}, w.LoggedRelations)
	assert.Greater(t, w.LongestMs, 250.0, "longest wait, ms")

	// Waits of processes outside the pool are not the pool's.
	var other LockWaits
	parseLog(text, map[int]bool{}, &other)
	assert.Zero(t, other.Logged)
	sampledElsewhere := obs.sample(ctx)
	sampledElsewhere.finish(&other, cfg.Threshold, map[int]bool{})
	assert.Zero(t, other.Sampled)
}
