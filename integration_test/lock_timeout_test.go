package integration_test

import (
	"context"
	stdsql "database/sql"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"entgo.io/ent/dialect"
	entsql "entgo.io/ent/dialect/sql"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"

	"github.com/hotcounter/hotcounter/entcounter"
	"github.com/hotcounter/hotcounter/gormcounter"
	"github.com/hotcounter/hotcounter/integration_test/ent"
	"github.com/hotcounter/hotcounter/integration_test/ent/book"
)

// Counter writes inside transactions never wait for a lock, under the
// application's own lock_timeout of 50 ms on every writer's session, on a
// loaded machine (two CPU burners beside the test), PostgreSQL, GORM and
// ent: 24 writers, each transaction holding what it wrote for a few
// milliseconds, increment two hot posts in random order (GORM and ent),
// add and move objects of one hot category (count triggers), add photos
// to one hot album (GORM count hooks) and books to one hot shelf (ent,
// count triggers). Beside them, four more sessions increment the same posts
// outside transactions. No write fails, and the server's log
// (log_lock_waits, deadlock_timeout of 20 ms, on the tests' own server)
// shows no wait of a transaction writer's session: not on a slot row, not
// on anything a transaction holds (a relation's extension lock, held while
// one page is added, is not counted). (Increments outside transactions write random slot
// rows, which transactions do not write: they can wait only for each
// other, a statement's length.)
func TestCounterWritesInTransactionsNeverWaitUnderLockTimeout(t *testing.T) {
	p := replicaPair(t)
	ctx := context.Background()
	app := fmt.Sprintf("hc_lock_timeout_%d", rand.IntN(1e9))
	dsn := func(schema, app string) string {
		return p.primary + " search_path=" + schema + " lock_timeout=50ms application_name=" + app
	}
	for _, schema := range []string{"lock_timeout_gorm", "lock_timeout_ent"} {
		_, err := p.primaryDB.Exec("DROP SCHEMA IF EXISTS " + schema + " CASCADE; CREATE SCHEMA " + schema)
		must(t, err)
	}
	openGorm := func(app string) *gorm.DB {
		db, err := gorm.Open(postgres.Open(dsn("lock_timeout_gorm", app)), &gorm.Config{Logger: &counting{}})
		must(t, err)
		sqlDB, err := db.DB()
		must(t, err)
		sqlDB.SetMaxOpenConns(writersPool)
		t.Cleanup(func() { sqlDB.Close() })
		must(t, db.Use(gormcounter.New(gormcounter.Config{})))
		return db
	}
	openEnt := func(app string) *ent.Client {
		entDB, err := stdsql.Open("pgx", dsn("lock_timeout_ent", app))
		must(t, err)
		entDB.SetMaxOpenConns(writersPool)
		c := ent.NewClient(ent.Driver(entsql.OpenDB(dialect.Postgres, entDB)))
		t.Cleanup(func() { c.Close() })
		return c
	}
	db, c := openGorm(app), openEnt(app)
	autoDB, autoC := openGorm(app+"_autocommit"), openEnt(app+"_autocommit")
	must(t, db.AutoMigrate(&Author{}, &Post{}, &Comment{}, &Category{}, &Object{}, &Album{}, &Photo{}))
	must(t, entMigrate(ctx, c, entcounter.WithCounters(c)))

	posts := []Post{{Title: "a"}, {Title: "b"}}
	must(t, db.Create(&posts).Error)
	cat, album := Category{Name: "hot"}, Album{Name: "hot"}
	must(t, db.Create(&cat).Error)
	must(t, db.Create(&album).Error)
	entPosts := []*ent.Post{c.Post.Create().SetTitle("a").SaveX(ctx), c.Post.Create().SetTitle("b").SaveX(ctx)}
	shelf := c.Shelf.Create().SetName("hot").SaveX(ctx)

	stop := burnCPUs(t, 2)
	defer stop()
	logStart := serverLogSize(t, p)

	const writers, ops = 24, 30
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		failures []string
		done     [5]int
	)
	hold := func() { time.Sleep(time.Duration(1+rand.IntN(4)) * time.Millisecond) }
	var autocommit [2][2]int // [GORM, ent][post]
	finished := make(chan struct{})
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-finished:
					return
				default:
				}
				post := rand.IntN(2)
				var err error
				if i%2 == 0 {
					err = gormcounter.Increment(autoDB.Model(&Post{ID: posts[post].ID}), "Likes", 1).Error
				} else {
					err = autoC.Post.UpdateOneID(entPosts[post].ID).AddLikes(1).Exec(ctx)
				}
				mu.Lock()
				if err != nil {
					failures = append(failures, failure(-1, err))
				} else {
					autocommit[i%2][post]++
				}
				mu.Unlock()
			}
		}()
	}
	var txWriters sync.WaitGroup
	for range writers {
		txWriters.Add(1)
		go func() {
			defer txWriters.Done()
			for range ops {
				op := rand.IntN(len(done))
				var err error
				switch op {
				case 0: // GORM: two posts, in random order
					order := rand.Perm(2)
					err = db.Transaction(func(tx *gorm.DB) error {
						for _, i := range order {
							if err := gormcounter.Increment(tx.Model(&Post{ID: posts[i].ID}), "Likes", 1).Error; err != nil {
								return err
							}
							hold()
						}
						return nil
					})
				case 1: // ent: two posts, in random order
					order := rand.Perm(2)
					err = inTxRollingBack(ctx, c, false, func(tx *ent.Tx) error {
						for _, i := range order {
							if err := tx.Post.UpdateOneID(entPosts[i].ID).AddLikes(1).Exec(ctx); err != nil {
								return err
							}
							hold()
						}
						return nil
					})
				case 2: // count triggers: an object added, and one moved in and back
					err = db.Transaction(func(tx *gorm.DB) error {
						o := Object{CategoryID: &cat.ID, Status: "active"}
						if err := tx.Create(&o).Error; err != nil {
							return err
						}
						hold()
						return tx.Model(&Object{}).Where("id = ?", o.ID).Update("status", "draft").Error
					})
				case 3: // GORM count hooks: a photo added
					err = db.Transaction(func(tx *gorm.DB) error {
						hold()
						return tx.Create(&Photo{AlbumID: &album.ID, Status: "active"}).Error
					})
				case 4: // ent, count triggers: a book added
					err = inTxRollingBack(ctx, c, false, func(tx *ent.Tx) error {
						if err := tx.Book.Create().SetShelfID(shelf.ID).Exec(ctx); err != nil {
							return err
						}
						hold()
						return nil
					})
				}
				mu.Lock()
				if err != nil {
					failures = append(failures, failure(op, err))
				} else {
					done[op]++
				}
				mu.Unlock()
			}
		}()
	}
	txWriters.Wait()
	close(finished)
	wg.Wait()
	stop()
	waits := serverLogWaits(t, p, logStart, app)
	if len(failures) > 0 || len(waits) > 0 {
		t.Fatalf("%d of %d writes failed (%q); the server logged %d waits of the writers' sessions:\n%s",
			len(failures), writers*ops, failures, len(waits), strings.Join(waits, "\n"))
	}

	for i, post := range posts {
		var got Post
		must(t, db.Clauses(gormcounter.Live).First(&got, post.ID).Error)
		if want := done[0] + autocommit[0][i]; got.Likes != int64(want) {
			t.Errorf("GORM post %d: likes=%d after %d transactions and %d increments outside them", i, got.Likes, done[0], autocommit[0][i])
		}
		if got, want := c.Post.GetX(ctx, entPosts[i].ID), done[1]+autocommit[1][i]; got.Likes != int64(want) {
			t.Errorf("ent post %d: likes=%d after %d transactions and %d increments outside them", i, got.Likes, done[1], autocommit[1][i])
		}
	}
	countKinds[0].check(t, db, "the storm")
	countKinds[1].check(t, db, "the storm")
	if got, want := c.Shelf.GetX(ctx, shelf.ID).BookCount, c.Book.Query().Where(book.ShelfID(shelf.ID)).CountX(ctx); got != int64(want) || want != done[4] {
		t.Errorf("shelf: book_count=%d, COUNT(*)=%d, %d books added", got, want, done[4])
	}
	t.Logf("%d writers, lock_timeout=50ms, two CPU burners: GORM increment transactions %d, ent %d, count-trigger transactions %d, count-hook %d, ent count-trigger %d; increments outside transactions %d (GORM), %d (ent), whose sessions the server logged %d waits of: no write failed, no wait of a transaction logged",
		writers, done[0], done[1], done[2], done[3], done[4], autocommit[0][0]+autocommit[0][1], autocommit[1][0]+autocommit[1][1], len(serverLogWaits(t, p, logStart, app+"_autocommit")))
}

// burnCPUs starts n processes that spin on a CPU each, as other work on a
// loaded machine does, and returns a function that stops them (once).
func burnCPUs(t *testing.T, n int) (stop func()) {
	t.Helper()
	var cmds []*exec.Cmd
	for range n {
		cmd := exec.Command("sh", "-c", "while :; do :; done")
		must(t, cmd.Start())
		cmds = append(cmds, cmd)
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			for _, cmd := range cmds {
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// serverLogSize returns the size of the primary's log, where a later read
// starts.
func serverLogSize(t *testing.T, p *pgPair) int64 {
	t.Helper()
	fi, err := os.Stat(filepath.Join(p.dirs[0], "server.log"))
	must(t, err)
	return fi.Size()
}

// serverLogWaits returns the lock waits the primary logged since offset
// from sessions named app (log_lock_waits: a wait longer than
// deadlock_timeout), each with the lines that describe it (what it waited
// for, and where: "while inserting index tuple ... in relation ..."),
// except waits for a relation's extension lock, which no transaction
// holds past the page it adds.
func serverLogWaits(t *testing.T, p *pgPair, offset int64, app string) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(p.dirs[0], "server.log"))
	must(t, err)
	if int64(len(data)) < offset {
		offset = 0
	}
	var waits []string
	var cur []string
	flush := func() {
		if len(cur) > 0 {
			waits = append(waits, strings.Join(cur, " | "))
		}
		cur = nil
	}
	for _, line := range strings.Split(string(data[offset:]), "\n") {
		mine := strings.Contains(line, "] "+app+" ")
		switch {
		case mine && strings.Contains(line, "still waiting for") && strings.Contains(line, "on extension of relation"):
			// A relation's extension lock is held while one page is
			// added to the table and let go at once, never until
			// commit: no transaction can make another wait on it for
			// its length. On a loaded machine a holder descheduled
			// mid-extension stretches it past deadlock_timeout; that
			// is the scheduler's wait, not a lock queue.
			flush()
		case mine && strings.Contains(line, "still waiting for"):
			flush()
			cur = []string{line}
		case mine && cur != nil && (strings.Contains(line, "DETAIL:") || strings.Contains(line, "CONTEXT:") || strings.Contains(line, "STATEMENT:")):
			cur = append(cur, line)
		default:
			flush()
		}
	}
	flush()
	return waits
}

// An error the library cannot avoid, a statement_timeout shorter than a
// statement, comes back wrapped, naming the counter, and nothing of the
// write is applied (PostgreSQL, GORM and ent): a transaction holds every
// slot row of a post (16, a sum counter's default), so that an increment
// outside a transaction, on a session with statement_timeout = 200ms,
// waits for one until the server cancels it (57014).
func TestAStatementTimeoutComesBackNamingTheCounter(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	short := func(dsn string) string { return dsn + " statement_timeout=200ms" }
	// holdSlots holds every slot row of the post with that id until the
	// test ends.
	holdSlots := func(t *testing.T, db *gorm.DB, id any) {
		holder := db.Begin()
		must(t, holder.Error)
		t.Cleanup(func() { holder.Rollback() })
		must(t, holder.Exec("INSERT INTO post_likes_slots (post_id, slot, n) SELECT ?, g, 0 FROM generate_series(0, 15) g", id).Error)
	}
	t.Run("gorm", func(t *testing.T) {
		e := open(t, pg)
		must(t, e.db.AutoMigrate(&Author{}, &Post{}, &Comment{}))
		post := Post{Title: "x"}
		must(t, e.db.Create(&post).Error)
		db, err := gorm.Open(postgres.Open(short(e.dsn)), &gorm.Config{Logger: e.log})
		must(t, err)
		e.limit(t, db)
		must(t, db.Use(gormcounter.New(gormcounter.Config{})))
		t.Run("held", func(t *testing.T) {
			holdSlots(t, e.db, post.ID)
			err = gormcounter.Increment(db.Model(&Post{ID: post.ID}), "Likes", 5).Error
			if err == nil || !strings.Contains(err.Error(), "57014") || !strings.Contains(err.Error(), "Post.Likes") {
				t.Fatalf("increment behind a held slot row with statement_timeout = 200ms: %v; want the server's 57014, naming Post.Likes", err)
			}
		})
		if got := exact(t, e.db, post.ID); got.Likes != 0 {
			t.Errorf("likes=%d after the canceled increment, want 0", got.Likes)
		}
	})
	t.Run("ent", func(t *testing.T) {
		e := openEnt(t, pg, true)
		post := e.client.Post.Create().SetTitle("x").SaveX(ctx)
		db, err := stdsql.Open("pgx", short(e.dsn))
		must(t, err)
		db.SetMaxOpenConns(e.pool)
		c := ent.NewClient(ent.Driver(entsql.OpenDB(dialect.Postgres, db)))
		defer c.Close()
		t.Run("held", func(t *testing.T) {
			holdSlots(t, e.db, post.ID)
			err = c.Post.UpdateOneID(post.ID).AddLikes(5).Exec(ctx)
			if err == nil || !strings.Contains(err.Error(), "57014") || !strings.Contains(err.Error(), "Post.likes") {
				t.Fatalf("increment behind a held slot row with statement_timeout = 200ms: %v; want the server's 57014, naming Post.likes", err)
			}
		})
		if got := e.client.Post.GetX(ctx, post.ID); got.Likes != 0 {
			t.Errorf("likes=%d after the canceled increment, want 0", got.Likes)
		}
	})
}
