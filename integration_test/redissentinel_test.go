package integration_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// sentinelSet is a Redis master with one replica and one Sentinel that
// watches them (quorum 1), on loopback ports, stopped when the test ends.
type sentinelSet struct {
	master, replica *standalone
	sentinel        *exec.Cmd
	sentinelAddr    string
}

// sentinelMaster is the name the Sentinel knows the master by.
const sentinelMaster = "hotcounter"

// startSentinel starts the master, its replica (in sync before it
// returns) and the Sentinel, which declares the master down after 1 s
// without an answer and then promotes the replica.
func startSentinel(t *testing.T) *sentinelSet {
	t.Helper()
	s := &sentinelSet{master: startStandalone(t, "--appendonly", "no")}
	s.replica = startStandalone(t, "--appendonly", "no", "--replicaof", "127.0.0.1", port(s.master.addr))
	waitFor(t, 20*time.Second, "the replica in sync with its master", func() bool {
		out, err := exec.Command("redis-cli", "-p", port(s.replica.addr), "info", "replication").Output()
		return err == nil && strings.Contains(string(out), "master_link_status:up")
	})
	p := freePort(t)
	dir := t.TempDir()
	conf := filepath.Join(dir, "sentinel.conf") // Sentinel rewrites it: a file of its own
	must(t, os.WriteFile(conf, []byte(fmt.Sprintf(`port %d
bind 127.0.0.1
dir %s
logfile %s
sentinel monitor %s 127.0.0.1 %s 1
sentinel down-after-milliseconds %[4]s 1000
sentinel failover-timeout %[4]s 10000
`, p, dir, filepath.Join(dir, "log"), sentinelMaster, port(s.master.addr))), 0o644))
	s.sentinel = exec.Command("redis-server", conf, "--sentinel")
	must(t, s.sentinel.Start())
	t.Cleanup(func() { _ = s.sentinel.Process.Kill(); _, _ = s.sentinel.Process.Wait() })
	s.sentinelAddr = "127.0.0.1:" + strconv.Itoa(p)
	waitFor(t, 10*time.Second, "the Sentinel to know the master and its replica", func() bool {
		out, err := exec.Command("redis-cli", "-p", strconv.Itoa(p), "sentinel", "replicas", sentinelMaster).Output()
		return err == nil && strings.Contains(string(out), port(s.replica.addr))
	})
	return s
}

// client returns a client that asks the Sentinel for the master, through
// redis.NewUniversalClient as an application configures it, closed when
// t ends.
func (s *sentinelSet) client(t *testing.T) redis.UniversalClient {
	t.Helper()
	rdb := redis.NewUniversalClient(&redis.UniversalOptions{Addrs: []string{s.sentinelAddr}, MasterName: sentinelMaster})
	t.Cleanup(func() { rdb.Close() })
	must(t, rdb.Ping(context.Background()).Err())
	return rdb
}

// waitPromoted waits until the Sentinel names the replica as the master.
func (s *sentinelSet) waitPromoted(t *testing.T, limit time.Duration) {
	t.Helper()
	waitFor(t, limit, "the Sentinel to promote the replica", func() bool {
		out, err := exec.Command("redis-cli", "-p", port(s.sentinelAddr), "sentinel", "get-master-addr-by-name", sentinelMaster).Output()
		return err == nil && strings.Contains(string(out), port(s.replica.addr))
	})
}

// The master under a Sentinel is killed (SIGKILL) while 16 writers
// increment through the Redis buffer; the Sentinel promotes the replica
// and the client follows. Replication is asynchronous, so increments the
// master acknowledged but had not sent to its replica can be lost (the
// guarantees table of docs/write-behind.md); none may be counted twice,
// and counting goes on after the failover.
func TestRedisSentinelFailoverCountsNothingTwice(t *testing.T) {
	e := open(t, pg, pool(writersPool))
	s := startSentinel(t)
	rdb := s.client(t)
	must(t, e.db.AutoMigrate(&Post{}))
	post := Post{Title: "viral"}
	must(t, e.db.Create(&post).Error)
	_, buf := redisBuffer(t, e, rdb, clusterPrefix(t), 50*time.Millisecond)

	w := keepIncrementing(buf, post.ID)
	time.Sleep(time.Second)
	s.master.kill(t)
	start := time.Now()
	s.waitPromoted(t, 30*time.Second)
	t.Logf("the replica was promoted %v after the kill", time.Since(start).Round(100*time.Millisecond))
	ackedAtPromotion := w.acked.Load()
	time.Sleep(time.Second) // writes after the failover
	attempted, acked, counted := w.finish(t, e.db)
	t.Logf("killed the master: attempted %d, acknowledged %d, counted %d (acknowledged and lost: %d)",
		attempted, acked, counted, max(0, acked-counted))
	if counted > attempted {
		t.Fatalf("counted %d, more than the %d increments attempted: some counted twice", counted, attempted)
	}
	if acked == ackedAtPromotion {
		t.Fatalf("no increment acknowledged after the promotion (%d before): the client did not follow the Sentinel", acked)
	}
}
