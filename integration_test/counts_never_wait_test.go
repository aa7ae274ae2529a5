package integration_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hotcounter/hotcounter/internal/cli"
	"github.com/hotcounter/hotcounter/internal/detect"
	"github.com/jackc/pgx/v5/pgconn"
	"gorm.io/gorm"
)

// noWaitTimeout is the lock_timeout of the sessions of the never-wait tests:
// longer than the waits any writer can meet on a busy server that are not
// row locks, and shorter than the transactions that hold rows in these
// tests (open until the test commits them, or sleeping a second between
// two writes), so that a wait for a row lock fails. PostgreSQL's
// lock_timeout ends every heavyweight lock wait, and a table that grows
// takes the relation extension lock: with log_lock_waits on, the storm
// under a loaded machine logged writers waiting 34 to 40 ms and more for
// "ExclusiveLock on extension of relation" of a slot table, and a 50 ms
// timeout failed 3 of its writes in one run of six, none of them on a row.
const noWaitTimeout = "500ms"

// noWaitSession makes a lock wait of connection c fail: on PostgreSQL
// after noWaitTimeout, on MySQL/MariaDB at once (innodb_lock_wait_timeout
// = 0, the strictest: there the writers read nothing with SKIP LOCKED,
// which that setting would also fail, with error 1180).
func noWaitSession(c *gorm.DB) error {
	return c.Exec(noWaitSQL(c.Dialector.Name())).Error
}

// noWaitSQL is noWaitSession's statement for a gorm dialector name.
func noWaitSQL(dialector string) string {
	if dialector == "mysql" {
		return "SET SESSION innodb_lock_wait_timeout = 0"
	}
	return "SET lock_timeout = '" + noWaitTimeout + "'"
}

// innodbTransactions returns the TRANSACTIONS section of SHOW ENGINE
// INNODB STATUS: what each transaction holds (its locks too, where
// innodb_status_output_locks is on).
func innodbTransactions(db *gorm.DB) string {
	var typ, name, status string
	if err := db.Raw("SHOW ENGINE INNODB STATUS").Row().Scan(&typ, &name, &status); err != nil {
		return err.Error()
	}
	if i := strings.Index(status, "TRANSACTIONS\n"); i >= 0 {
		return status[i:]
	}
	return status
}

// isLockWait reports a lock wait cut short by noWaitSession (PostgreSQL's
// SQLSTATE 55P03, lock_not_available; MySQL's error 1205).
func isLockWait(err error) bool {
	return strings.Contains(err.Error(), "55P03") || strings.Contains(err.Error(), "1205")
}

// failure is how a failed write is reported: its error and, on
// PostgreSQL, what the statement was doing when it failed (the lock it
// waited for: "while locking tuple (0,5) in relation ...").
func failure(op int, err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Where != "" {
		return fmt.Sprintf("op %d: %v [%s]", op, err, pgErr.Where)
	}
	return fmt.Sprintf("op %d: %v", op, err)
}

// PostgreSQL's count triggers never make a writer wait: see countStorm.
func TestCountTriggersNeverWait(t *testing.T) {
	parallel(t)
	countStorm(t, open(t, pg, pool(writersPool)))
}

// countStorm is the storm of "counter writes that never wait": 1,000
// categories, 5,000 objects, 32 writers, each on its own connection where
// a lock wait fails (noWaitSession), and each writing only objects of its
// own (so the application's rows never make one writer wait for another:
// any wait would be the counters'). The writers move objects with GORM and
// raw SQL, move two objects to two categories in one transaction (objects
// in key order, categories in any: opposite directions meet), move five in
// one statement, create objects, and delete them soft and hard. Every
// write must succeed (no deadlock, no wait) and every count equal
// COUNT(*). On MySQL/MariaDB the sessions run at READ COMMITTED (below).
func countStorm(t *testing.T, e *env) {
	kind := e.kind
	db := e.db
	k := countKinds[0]
	k.migrate(t, db)
	cats := k.newParents(t, db, 1000)
	owners := make([]*uint, 5000)
	for i := range owners {
		owners[i] = &cats[rand.IntN(len(cats))]
	}
	objs := k.newChildren(t, db, owners, "active")
	const writers, ops = 32, 40
	// Lock waits sampled as the lab samples them (hotcounter detect, beside
	// the storm): waits shorter than noWaitTimeout do not fail a writer,
	// but they show there.
	sampled := make(chan []detect.Row, 1)
	go func() {
		code, out, errOut := runCommand(t, detectArgs(t, e, "detect", "-for", "2s", "-json")...)
		var rows []detect.Row
		if code != cli.ExitOK && code != cli.ExitFound || json.Unmarshal([]byte(out), &rows) != nil {
			t.Errorf("detect beside the storm exited %d: %s %s", code, out, errOut)
		}
		sampled <- rows
	}()
	var (
		wg               sync.WaitGroup
		mu               sync.Mutex
		failures         []string
		timeouts, locked int
		done             [7]int
	)
	for w := range writers {
		var mine []uint
		for i := w; i < len(objs); i += writers {
			mine = append(mine, objs[i])
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := db.Connection(func(conn *gorm.DB) error {
				// A new session on the connection: every statement
				// below starts from it, on that connection.
				c := conn.Session(&gorm.Session{NewDB: true})
				if err := noWaitSession(c); err != nil {
					return err
				}
				if kind == my {
					// READ COMMITTED: at REPEATABLE READ InnoDB turns the
					// record locks of a transaction on the first row of a
					// page into a gap lock at the end of the page before it
					// when another session's insert splits the page (its
					// lock_rec_inherit_to_gap), and a session's first row of
					// a parent that falls in that gap then waits for that
					// transaction: 1 storm in 8 to 16 under load (see
					// docs/counts.md). At READ COMMITTED InnoDB does not
					// inherit the X locks of statements that have ended.
					if err := c.Exec("SET SESSION tx_isolation = 'READ-COMMITTED'").Error; err != nil {
						return err
					}
				}
				cat := func() uint { return cats[rand.IntN(len(cats))] }
				some := func(n int) []uint {
					out := make([]uint, 0, n)
					for _, i := range rand.Perm(len(mine))[:min(n, len(mine))] {
						out = append(out, mine[i])
					}
					slices.Sort(out)
					return out
				}
				for range ops {
					op := rand.IntN(len(done))
					if len(mine) < 8 {
						op = 4
					}
					var err error
					switch op {
					case 0: // a move through GORM
						err = c.Model(&Object{}).Where("id = ?", some(1)[0]).Update("category_id", cat()).Error
					case 1: // a move in raw SQL
						err = c.Exec("UPDATE objects SET category_id = ? WHERE id = ?", cat(), some(1)[0]).Error
					case 2: // two moves in one transaction, objects in key order
						two := some(2)
						err = c.Transaction(func(tx *gorm.DB) error {
							for i, id := range two {
								if i > 0 {
									// Work between the writes, holding the first
									// move's slot rows: a writer that waited for
									// them would fail (noWaitTimeout).
									time.Sleep(time.Second)
								}
								if err := tx.Exec("UPDATE objects SET category_id = ? WHERE id = ?", cat(), id).Error; err != nil {
									return err
								}
							}
							return nil
						})
					case 3: // a bulk move
						err = c.Exec("UPDATE objects SET category_id = ? WHERE id IN ?", cat(), some(5)).Error
					case 4: // a new object
						parent := cat()
						o := Object{CategoryID: &parent, Status: "active"}
						if err = c.Create(&o).Error; err == nil {
							mine = append(mine, o.ID)
						}
					case 5: // a soft delete
						id := some(1)[0]
						err = c.Delete(&Object{}, id).Error
						mine = slices.DeleteFunc(mine, func(x uint) bool { return x == id })
					case 6: // a hard delete
						id := some(1)[0]
						err = c.Unscoped().Delete(&Object{}, id).Error
						mine = slices.DeleteFunc(mine, func(x uint) bool { return x == id })
					}
					mu.Lock()
					switch {
					case err == nil:
						done[op]++
					case isDeadlock(err):
						locked++
						failures = append(failures, failure(op, err))
					case isLockWait(err):
						timeouts++
						failures = append(failures, failure(op, err))
						if kind == my && timeouts == 1 {
							t.Logf("InnoDB's transactions at the first lock wait:\n%s", innodbTransactions(db))
						}
					default:
						failures = append(failures, failure(op, err))
					}
					mu.Unlock()
				}
				return nil
			})
			if err != nil {
				mu.Lock()
				failures = append(failures, err.Error())
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	waited := <-sampled
	var onCounters []string
	for _, r := range waited {
		if strings.HasSuffix(r.Table, "_slots") {
			onCounters = append(onCounters, fmt.Sprintf("%d waits on %s key %s", r.Waits, r.Table, r.Key))
		}
	}
	if len(failures) > 0 || len(onCounters) > 0 {
		first := ""
		if len(failures) > 0 {
			first = failures[0]
		}
		t.Fatalf("%d deadlocks, %d lock waits, %d writes failed (first: %s; all: %q); sampled waits on counter rows: %v", locked, timeouts, len(failures), first, failures, onCounters)
	}
	k.check(t, db, "the storm")
	t.Logf("%s: lock waits sampled beside the storm: %d rows waited on, none of them counter rows", kind, len(waited))
	t.Logf("%s: %d writers; GORM moves %d, raw moves %d, two-move transactions %d, bulk moves %d, creates %d, soft deletes %d, hard deletes %d: no lock timeout, no deadlock, every count exact",
		kind, writers, done[0], done[1], done[2], done[3], done[4], done[5], done[6])
}

// Twenty open transactions add children to two parents, half of them in
// one order and half in the other, one statement at a time, on sessions
// where a lock wait fails. Each statement finds the slot rows that the
// open transactions hold and takes another row, so none waits: more
// transactions than the count has slots, so that slots chosen by session
// or at random would have to share. (A counter cache of one row per parent
// deadlocks on the first crossing pair.) Every count then equals COUNT(*).
// Counts by triggers (children added with raw SQL) and by hooks (the
// ORM's create), GORM and ent, on PostgreSQL and MariaDB; ent's slot
// tables carry a surrogate id beside the unique (owner, slot) index, where
// an update through that index would lock the gap below its row too.
func TestCountsCrossingTransactionsNeverWait(t *testing.T) {
	eachCountSceneKeptBy(t, true, true, func(t *testing.T, s countScene) {
		const open = 20
		ps := s.parents(t, 2)
		adds := make([]func(int64) error, open)
		commits := make([]func() error, open)
		for i := range open {
			add, commit, rollback := s.openTx(t)
			defer rollback()
			adds[i], commits[i] = add, commit
		}
		for step := range 2 {
			for i, add := range adds {
				if err := add(ps[(i+step)%2]); err != nil { // even transactions: ps[0] first; odd: ps[1]
					t.Fatalf("statement %d of transaction %d, with %d transactions open: %v; want no wait", step+1, i, open, err)
				}
			}
		}
		for _, commit := range commits {
			must(t, commit())
		}
		checkCounts(t, "crossing transactions", s.mismatches(t))
	}, on(pg, my))
}
