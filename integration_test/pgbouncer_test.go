package integration_test

import (
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hotcounter/hotcounter/internal/testdb"
)

// bouncer is a PgBouncer of the package's own in transaction pooling mode
// in front of the tests' PostgreSQL server, on a free loopback port,
// started once for the package by the first test that asks and stopped
// when the package's tests end. Any database name is passed through to
// the server, where each test creates one of its own.
type bouncer struct {
	port int
	cmd  *exec.Cmd
	dir  string
}

var (
	bouncerOnce sync.Once
	theBouncer  *bouncer
	bouncerErr  error
)

// bouncerPoolSize is the server connections PgBouncer opens per database:
// fewer than the tests' clients, so that transactions of different clients
// share server connections one after another.
const bouncerPoolSize = 3

// pgBouncer returns the package's PgBouncer, starting it the first time.
// Without the pgbouncer binary (.ci/run installs Debian's package) the test
// is skipped, or fails under CI=true.
func pgBouncer(t *testing.T) *bouncer {
	t.Helper()
	bouncerOnce.Do(func() { theBouncer, bouncerErr = startBouncer() })
	if bouncerErr != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("PgBouncer is required under CI=true: %v", bouncerErr)
		}
		t.Skipf("no PgBouncer: %v", bouncerErr)
	}
	return theBouncer
}

func startBouncer() (*bouncer, error) {
	bin, err := exec.LookPath("pgbouncer")
	if err != nil {
		if _, statErr := os.Stat("/usr/sbin/pgbouncer"); statErr != nil {
			return nil, err
		}
		bin = "/usr/sbin/pgbouncer"
	}
	server, err := pgHostPort()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "hotcounter-pgbouncer-")
	if err != nil {
		return nil, err
	}
	b := &bouncer{port: freePortNumber(), dir: dir}
	stopAtExit(b.stop)
	conf := fmt.Sprintf(`[databases]
* = host=%s port=%s

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = trust
auth_file = %s
pool_mode = transaction
default_pool_size = %d
max_client_conn = 1000
ignore_startup_parameters = extra_float_digits
logfile = %s
pidfile = %s
`, server[0], server[1], b.port, filepath.Join(dir, "users.txt"), bouncerPoolSize, filepath.Join(dir, "pgbouncer.log"), filepath.Join(dir, "pgbouncer.pid"))
	if err := os.WriteFile(filepath.Join(dir, "users.txt"), []byte(`"postgres" ""`+"\n"), 0o644); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "pgbouncer.ini"), []byte(conf), 0o644); err != nil {
		return nil, err
	}
	args := []string{filepath.Join(dir, "pgbouncer.ini")}
	if os.Geteuid() == 0 {
		args = append([]string{"-u", "postgres"}, args...) // it refuses to run as root
		if err := exec.Command("chown", "-R", "postgres", dir).Run(); err != nil {
			return nil, err
		}
	}
	b.cmd = exec.Command(bin, args...)
	if err := b.cmd.Start(); err != nil {
		return nil, err
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		db, err := sql.Open("pgx", b.dsn("postgres"))
		if err == nil {
			err = db.Ping()
			db.Close()
		}
		if err == nil {
			return b, nil
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "pgbouncer.log"))
			return nil, fmt.Errorf("PgBouncer did not answer in 20 s: %v\n%s", err, log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (b *bouncer) stop() {
	if b.cmd != nil && b.cmd.Process != nil {
		_ = b.cmd.Process.Kill()
		_, _ = b.cmd.Process.Wait()
	}
	os.RemoveAll(b.dir)
}

// dsn is a pgx DSN of database name through PgBouncer, in the pgx mode a
// transaction pool needs: statements are not prepared by name (pgx's
// default caches prepared statements per connection, which PgBouncer 1.18
// hands to other clients).
func (b *bouncer) dsn(name string) string {
	return fmt.Sprintf("host=127.0.0.1 port=%d user=postgres dbname=%s sslmode=disable default_query_exec_mode=exec", b.port, name)
}

// database creates a database of t's own on the server and returns its DSN
// through PgBouncer, and its DSN on the server itself; it is dropped when t
// ends.
func (b *bouncer) database(t *testing.T) (through, direct string) {
	t.Helper()
	var raw [6]byte
	_, _ = rand.Read(raw[:])
	name := "hc_bounced_" + hex.EncodeToString(raw[:])
	admin, err := sql.Open("pgx", testdb.PostgresBaseDSN())
	must(t, err)
	t.Cleanup(func() {
		_, _ = admin.Exec("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)")
		admin.Close()
	})
	_, err = admin.Exec("CREATE DATABASE " + name)
	must(t, err)
	return b.dsn(name), replaceDBName(testdb.PostgresBaseDSN(), name)
}

// pgHostPort returns the host and port of the tests' PostgreSQL server.
func pgHostPort() ([2]string, error) {
	out := [2]string{"127.0.0.1", "5432"}
	for _, f := range strings.Fields(testdb.PostgresBaseDSN()) {
		switch {
		case strings.HasPrefix(f, "host="):
			out[0] = strings.TrimPrefix(f, "host=")
		case strings.HasPrefix(f, "port="):
			out[1] = strings.TrimPrefix(f, "port=")
		}
	}
	return out, nil
}

// pgAddr returns host:port of the tests' PostgreSQL server.
func pgAddr(t testing.TB) string {
	hp, err := pgHostPort()
	must(t, err)
	return net.JoinHostPort(hp[0], hp[1])
}

// replaceDBName returns the key=value DSN with dbname set to name.
func replaceDBName(dsn, name string) string {
	fields := strings.Fields(dsn)
	for i, f := range fields {
		if strings.HasPrefix(f, "dbname=") {
			fields[i] = "dbname=" + name
			return strings.Join(fields, " ")
		}
	}
	return dsn + " dbname=" + name
}
