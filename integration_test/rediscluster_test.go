package integration_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// cluster is a Redis Cluster of three masters with a replica each, on
// loopback ports, that a test starts and that stops when it ends.
type cluster struct {
	addrs []string
	nodes map[string]*exec.Cmd // by address
}

// startCluster starts a cluster for t from the redis-server and redis-cli
// on the PATH (Redis 7.0 here), in a directory of t's own. Without them the
// test is skipped, or fails under CI=true.
func startCluster(t *testing.T) *cluster {
	t.Helper()
	server, err1 := exec.LookPath("redis-server")
	cli, err2 := exec.LookPath("redis-cli")
	if err1 != nil || err2 != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("redis-server and redis-cli are required under CI=true: %v %v", err1, err2)
		}
		t.Skipf("redis-server or redis-cli missing: %v %v", err1, err2)
	}
	dir := t.TempDir()
	c := &cluster{nodes: map[string]*exec.Cmd{}}
	t.Cleanup(func() {
		for _, cmd := range c.nodes {
			_ = cmd.Process.Kill()
			_, _ = cmd.Process.Wait()
		}
	})
	for i := 0; i < 6; i++ {
		port := freePort(t)
		addr := "127.0.0.1:" + strconv.Itoa(port)
		nodeDir := filepath.Join(dir, strconv.Itoa(port))
		must(t, os.MkdirAll(nodeDir, 0o755))
		cmd := exec.Command(server, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--cluster-enabled", "yes",
			"--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "1500", "--save", "", "--appendonly", "no",
			// Replicas sync at once: a replica that never synced cannot take over.
			"--repl-diskless-sync-delay", "0",
			"--dir", nodeDir, "--logfile", filepath.Join(nodeDir, "log"))
		must(t, cmd.Start())
		c.nodes[addr] = cmd
		c.addrs = append(c.addrs, addr)
	}
	for _, addr := range c.addrs {
		waitFor(t, 10*time.Second, "redis at "+addr, func() bool {
			return exec.Command(cli, "-h", "127.0.0.1", "-p", port(addr), "ping").Run() == nil
		})
	}
	args := append([]string{"--cluster", "create"}, c.addrs...)
	args = append(args, "--cluster-replicas", "1", "--cluster-yes")
	if out, err := exec.Command(cli, args...).CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	c.waitHealthy(t, 30*time.Second)
	waitFor(t, 30*time.Second, "every replica in sync with its master", func() bool {
		synced := 0
		for _, addr := range c.addrs {
			out, err := exec.Command(cli, "-h", "127.0.0.1", "-p", port(addr), "info", "replication").Output()
			if err == nil && strings.Contains(string(out), "master_link_status:up") {
				synced++
			}
		}
		return synced == 3
	})
	return c
}

// waitFailover waits until a replica serves the slots of the killed master
// at addr and the cluster is whole again.
func (c *cluster) waitFailover(t *testing.T, addr string, limit time.Duration) {
	t.Helper()
	defer func() {
		if t.Failed() {
			for live := range c.nodes {
				out, _ := exec.Command("redis-cli", "-h", "127.0.0.1", "-p", port(live), "cluster", "nodes").Output()
				t.Logf("%s sees:\n%s", live, out)
			}
		}
	}()
	waitFor(t, limit, "a replica to take over from "+addr, func() bool {
		for live := range c.nodes {
			out, err := exec.Command("redis-cli", "-h", "127.0.0.1", "-p", port(live), "cluster", "nodes").Output()
			if err != nil {
				return false
			}
			for _, line := range strings.Split(string(out), "\n") {
				f := strings.Fields(line)
				if len(f) >= 8 && strings.HasPrefix(f[1], addr+"@") && (!strings.Contains(f[2], "fail") || len(f) > 8) {
					return false // not yet failed, or still holding slots
				}
			}
		}
		return true
	})
	c.waitHealthy(t, limit)
}

// waitHealthy waits until every live node reports cluster_state:ok.
func (c *cluster) waitHealthy(t *testing.T, limit time.Duration) {
	t.Helper()
	waitFor(t, limit, "cluster_state:ok on every node", func() bool {
		for addr := range c.nodes {
			out, err := exec.Command("redis-cli", "-h", "127.0.0.1", "-p", port(addr), "cluster", "info").Output()
			if err != nil || !strings.Contains(string(out), "cluster_state:ok") {
				return false
			}
		}
		return true
	})
}

// client returns a cluster client that follows failovers, closed when t ends.
func (c *cluster) client(t *testing.T) *redis.ClusterClient {
	t.Helper()
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.addrs})
	t.Cleanup(func() { rdb.Close() })
	waitFor(t, 10*time.Second, "the cluster client to see every slot", func() bool {
		return rdb.ForEachShard(context.Background(), func(ctx context.Context, n *redis.Client) error { return n.Ping(ctx).Err() }) == nil
	})
	return rdb
}

// kill kills the master that serves key with SIGKILL, and returns its
// address.
func (c *cluster) kill(t *testing.T, rdb *redis.ClusterClient, key string) string {
	t.Helper()
	ctx := context.Background()
	master, err := rdb.MasterForKey(ctx, key)
	must(t, err)
	addr := master.Options().Addr
	cmd := c.nodes[addr]
	if cmd == nil {
		t.Fatalf("no node at %s", addr)
	}
	must(t, cmd.Process.Signal(syscall.SIGKILL))
	_, _ = cmd.Process.Wait()
	delete(c.nodes, addr)
	return addr
}

func port(addr string) string { _, p, _ := net.SplitHostPort(addr); return p }

// handedOut holds every port freePort has returned in this process, and
// their bus ports.
var (
	handing   sync.Mutex
	handedOut = map[int]struct{}{}
)

// freePort returns a loopback port that is free now, with its cluster bus
// port (10,000 above) free too, and that it never returned before in this
// process. The kernel may hand the same ephemeral port to two listeners
// opened and closed in turn, and a cluster given one node's port twice
// starts on five nodes, one of them master of two slot ranges.
func freePort(t *testing.T) int {
	t.Helper()
	for range 100 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		must(t, err)
		port := ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		if port+10000 > 65535 {
			continue
		}
		bus, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port+10000))
		if err != nil {
			continue
		}
		bus.Close()
		handing.Lock()
		_, taken := handedOut[port]
		_, busTaken := handedOut[port+10000]
		if !taken && !busTaken {
			handedOut[port], handedOut[port+10000] = struct{}{}, struct{}{}
		}
		handing.Unlock()
		if !taken && !busTaken {
			return port
		}
	}
	t.Fatal("no free loopback port pair after 100 tries")
	return 0
}

func waitFor(t *testing.T, limit time.Duration, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(limit); !ok(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("gave up after %v waiting for %s", limit, what)
		}
	}
}

// clusterPrefix is a key prefix of the test's own.
func clusterPrefix(t *testing.T) string {
	return fmt.Sprintf("hctest%x", time.Now().UnixNano())
}

// standalone is one redis-server of a test's own, restartable on the same
// port and directory (to test what its persistence keeps).
type standalone struct {
	addr, dir string
	args      []string
	cmd       *exec.Cmd
}

// startStandalone starts a redis-server with the given persistence
// arguments, stopped when t ends.
func startStandalone(t *testing.T, persistence ...string) *standalone {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("redis-server is required under CI=true: %v", err)
		}
		t.Skipf("redis-server missing: %v", err)
	}
	p := freePort(t)
	s := &standalone{addr: "127.0.0.1:" + strconv.Itoa(p), dir: t.TempDir()}
	s.args = append([]string{"--port", strconv.Itoa(p), "--bind", "127.0.0.1", "--save", "", "--dir", s.dir,
		"--logfile", filepath.Join(s.dir, "log")}, persistence...)
	s.start(t)
	t.Cleanup(func() { s.kill(t) })
	return s
}

func (s *standalone) start(t *testing.T) {
	t.Helper()
	s.cmd = exec.Command("redis-server", s.args...)
	must(t, s.cmd.Start())
	waitFor(t, 10*time.Second, "redis at "+s.addr, func() bool {
		return exec.Command("redis-cli", "-p", port(s.addr), "ping").Run() == nil
	})
}

// kill kills the server with SIGKILL: nothing is flushed on the way out.
func (s *standalone) kill(t *testing.T) {
	t.Helper()
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	_, _ = s.cmd.Process.Wait()
	s.cmd = nil
}
