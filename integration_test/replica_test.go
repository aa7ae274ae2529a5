package integration_test

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// pgPair is a PostgreSQL primary of the package's own and a streaming
// replica of it (pg_basebackup -R), on free loopback ports, started once
// for the package by the first test that asks and stopped when the
// package's tests end. Replay on the replica can be paused, to show lag.
type pgPair struct {
	primary, replica string // DSNs
	dirs             []string
	bin              string
	replicaDB        *sql.DB
	primaryDB        *sql.DB
}

var (
	pairOnce sync.Once
	pair     *pgPair
	pairErr  error
)

// replicaPair returns the package's primary and replica, starting them the
// first time, and runs t in parallel with the tests of other servers. One
// test uses it (its parts pause and resume replay, one after another).
// Without PostgreSQL's server binaries the test is skipped, or fails under
// CI=true.
func replicaPair(t *testing.T) *pgPair {
	t.Helper()
	parallel(t)
	pairOnce.Do(func() { pair, pairErr = startPair() })
	if pairErr != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("a PostgreSQL primary and replica of the tests' own are required under CI=true: %v", pairErr)
		}
		t.Skipf("no PostgreSQL primary and replica: %v", pairErr)
	}
	return pair
}

// postgresBin returns the directory of the newest PostgreSQL server
// binaries Debian installed (/usr/lib/postgresql/N/bin).
func postgresBin() (string, error) {
	found, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(found) == 0 {
		return "", fmt.Errorf("no /usr/lib/postgresql/*/bin/initdb")
	}
	sort.Slice(found, func(i, j int) bool {
		vi, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(found[i]))))
		vj, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(found[j]))))
		return vi < vj
	})
	return filepath.Dir(found[len(found)-1]), nil
}

// asPostgres runs a PostgreSQL binary as the postgres OS user (the server
// refuses root).
func asPostgres(bin string, args ...string) error {
	cmd := exec.Command("runuser", append([]string{"-u", "postgres", "--", bin}, args...)...)
	if os.Geteuid() != 0 {
		cmd = exec.Command(bin, args...)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %v\n%s", filepath.Base(bin), strings.Join(args, " "), err, out)
	}
	return nil
}

func startPair() (*pgPair, error) {
	bin, err := postgresBin()
	if err != nil {
		return nil, err
	}
	root, err := os.MkdirTemp("", "hotcounter-pg-")
	if err != nil {
		return nil, err
	}
	if os.Geteuid() == 0 {
		if err := exec.Command("chown", "postgres:postgres", root).Run(); err != nil {
			return nil, fmt.Errorf("chown %s: %v", root, err)
		}
	}
	p := &pgPair{bin: bin}
	stopAtExit(p.stop)
	start := func(dir string, port int) error {
		p.dirs = append(p.dirs, dir)
		return asPostgres(filepath.Join(bin, "pg_ctl"), "-D", dir, "-l", filepath.Join(dir, "server.log"), "-w", "-t", "60", "-o",
			fmt.Sprintf("-p %d -c listen_addresses=127.0.0.1 -c unix_socket_directories=%s -c fsync=off -c full_page_writes=off -c wal_writer_delay=10ms -c max_connections=200 -c log_lock_waits=on -c deadlock_timeout=20ms -c log_line_prefix='%%m [%%p] %%a '", port, dir),
			"start")
	}
	primaryDir, replicaDir := filepath.Join(root, "primary"), filepath.Join(root, "replica")
	if err := asPostgres(filepath.Join(bin, "initdb"), "-D", primaryDir, "-A", "trust", "-U", "postgres", "--no-sync"); err != nil {
		return nil, err
	}
	pport, rport := freePortNumber(), freePortNumber()
	if err := start(primaryDir, pport); err != nil {
		return nil, err
	}
	if err := asPostgres(filepath.Join(bin, "pg_basebackup"), "-h", "127.0.0.1", "-p", strconv.Itoa(pport), "-U", "postgres",
		"-D", replicaDir, "-R", "-X", "stream", "--no-sync"); err != nil {
		return nil, err
	}
	if err := start(replicaDir, rport); err != nil {
		return nil, err
	}
	dsn := "host=127.0.0.1 port=%d user=postgres dbname=postgres sslmode=disable"
	p.primary, p.replica = fmt.Sprintf(dsn, pport), fmt.Sprintf(dsn, rport)
	if p.primaryDB, err = sql.Open("pgx", p.primary); err != nil {
		return nil, err
	}
	if p.replicaDB, err = sql.Open("pgx", p.replica); err != nil {
		return nil, err
	}
	return p, p.caughtUp(context.Background())
}

func (p *pgPair) stop() {
	for _, db := range []*sql.DB{p.primaryDB, p.replicaDB} {
		if db != nil {
			db.Close()
		}
	}
	for i := len(p.dirs) - 1; i >= 0; i-- {
		_ = asPostgres(filepath.Join(p.bin, "pg_ctl"), "-D", p.dirs[i], "-m", "immediate", "-w", "stop")
	}
	if len(p.dirs) > 0 {
		os.RemoveAll(filepath.Dir(p.dirs[0]))
	}
}

// pause stops replay on the replica: from now on it lags the primary.
func (p *pgPair) pause(t *testing.T) {
	t.Helper()
	_, err := p.replicaDB.Exec("SELECT pg_wal_replay_pause()")
	must(t, err)
}

// resume restarts replay and waits until the replica has replayed
// everything the primary wrote.
func (p *pgPair) resume(t *testing.T) {
	t.Helper()
	_, err := p.replicaDB.Exec("SELECT pg_wal_replay_resume()")
	must(t, err)
	must(t, p.caughtUp(context.Background()))
}

// caughtUp waits until the replica has replayed the WAL the primary has
// flushed (every commit, with synchronous_commit on): the insert position
// may be past a record that stays in the primary's buffers for seconds.
func (p *pgPair) caughtUp(ctx context.Context) error {
	var lsn string
	if err := p.primaryDB.QueryRowContext(ctx, "SELECT pg_current_wal_flush_lsn()::text").Scan(&lsn); err != nil {
		return err
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		var done bool
		err := p.replicaDB.QueryRowContext(ctx, "SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn", lsn).Scan(&done)
		if err == nil && done {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the replica has not replayed up to %s in 60 s (%v)", lsn, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// atExit holds what TestMain stops after the package's tests: servers
// started once for all of them.
var (
	atExitMu sync.Mutex
	atExit   []func()
)

func stopAtExit(fn func()) {
	atExitMu.Lock()
	atExit = append(atExit, fn)
	atExitMu.Unlock()
}

func runAtExit() {
	atExitMu.Lock()
	defer atExitMu.Unlock()
	for i := len(atExit) - 1; i >= 0; i-- {
		atExit[i]()
	}
	atExit = nil
}

// freePortNumber returns a loopback port that is free now and that
// freePort and it never returned before in this process.
func freePortNumber() int {
	for {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			panic(err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		handing.Lock()
		_, taken := handedOut[port]
		handedOut[port] = struct{}{}
		handing.Unlock()
		if !taken {
			return port
		}
	}
}
