package integration_test

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/hotcounter/hotcounter/gormcounter"
	"github.com/hotcounter/hotcounter/internal/cli"
	"github.com/hotcounter/hotcounter/internal/detect"
	"github.com/hotcounter/hotcounter/internal/testdb"
)

// Plain is a table with a hot column that is not a counter yet: what a
// user runs `hotcounter detect` against.
type Plain struct {
	ID    uint
	Title string
	Likes int64
}

// runCommand runs the hotcounter command in process and returns its exit
// code, stdout and stderr.
func runCommand(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := cli.Main(context.Background(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// detectArgs returns the arguments that point detect or status at e's
// database, and on PostgreSQL at its schema only (other tests and the
// README's examples write in other schemas of the same database).
func detectArgs(t *testing.T, e *env, cmd string, more ...string) []string {
	t.Helper()
	args := []string{cmd, "-dsn", e.dsn}
	if e.kind == pg {
		var schema string
		must(t, e.db.Raw("SELECT current_schema()").Row().Scan(&schema))
		args = append(args, "-schema", schema)
	}
	return append(args, more...)
}

func plainRows(t *testing.T, db *gorm.DB, n int) {
	t.Helper()
	must(t, db.AutoMigrate(&Plain{}))
	rows := make([]Plain, n)
	for i := range rows {
		rows[i] = Plain{Title: "post"}
	}
	must(t, db.CreateInBatches(rows, 100).Error)
}

func TestDetectNamesTheRowWritersQueueOn(t *testing.T) {
	eachDB(t, func(t *testing.T, e *env) {
		plainRows(t, e.db, 100)
		const hot = 42
		db := e.db
		if e.kind == pg {
			// The writers log their waits longer than 10 ms, as a server with
			// log_lock_waits on does after deadlock_timeout, and commit
			// durably, as production does: detect reads the log too.
			var err error
			db, err = gorm.Open(dialectorFor(pg, testdb.WithParams(testdb.Durable(e.dsn), map[string]string{"log_lock_waits": "on", "deadlock_timeout": "10ms"})), &gorm.Config{Logger: e.log})
			must(t, err)
			e.limit(t, db)
			must(t, db.Use(gormcounter.New(gormcounter.Config{})))
		}
		var stop atomic.Bool
		var wg sync.WaitGroup
		var done int64
		wg.Add(1)
		go func() {
			defer wg.Done()
			done = hammer(t, 32, 1<<30, func() error {
				if stop.Load() {
					return errStop
				}
				return db.Model(&Plain{ID: hot}).UpdateColumn("likes", gorm.Expr("likes + ?", 1)).Error
			})
		}()
		time.Sleep(300 * time.Millisecond)
		code, out, errOut := runCommand(t, detectArgs(t, e, "detect", "-for", "3s", "-json")...)
		stop.Store(true)
		wg.Wait()
		if code != cli.ExitFound {
			t.Fatalf("detect exited %d, want %d (hot rows found); stderr: %s; stdout: %s", code, cli.ExitFound, errOut, out)
		}
		var rows []detect.Row
		must(t, json.Unmarshal([]byte(out), &rows))
		if len(rows) == 0 {
			t.Fatalf("detect found no rows: %s", out)
		}
		first := rows[0]
		if !strings.HasSuffix(first.Table, ".plains") || first.Key != "42" {
			t.Fatalf("hottest row = %s key %q, want plains key 42; all: %s", first.Table, first.Key, out)
		}
		if first.Column != "likes" || first.Slots < 4 || !strings.Contains(first.GORM, `gorm:"counter:slots=`) || first.Sessions < 2 {
			t.Fatalf("hottest row's advice = column %q, %d slots, %q, %d sessions; want likes, >= 4 slots, a counter tag, several sessions",
				first.Column, first.Slots, first.GORM, first.Sessions)
		}
		if e.kind == pg && first.LoggedWaits == 0 {
			t.Errorf("detect counted no logged wait on plains, though the writers log theirs")
		}
		hotKeys, err := gormcounter.HotKeys(db, 1)
		must(t, err)
		if len(hotKeys) != 1 || hotKeys[0].Table != "plains" || hotKeys[0].Column != "likes" || hotKeys[0].Key != "42" || hotKeys[0].Count != done {
			t.Fatalf("the library's hot keys = %+v, want plains.likes 42 with %d increments", hotKeys, done)
		}
		if got := rawInt(t, e.db, "SELECT likes FROM plains WHERE id = ?", hot); got != done {
			t.Fatalf("likes = %d after %d increments", got, done)
		}
		t.Logf("%s: %d increments; hottest %s key %s: %d sessions, %.1fs waiting, %.1f writers at once, %d slots, %d waits logged",
			e.kind, done, first.Table, first.Key, first.Sessions, first.WaitSeconds, first.MeanWriters, first.Slots, first.LoggedWaits)
	}, on(pg, my), pool(writersPool))
}

func TestDetectReportsNothingOnAnIdleDatabase(t *testing.T) {
	eachDB(t, func(t *testing.T, e *env) {
		plainRows(t, e.db, 10)
		code, out, errOut := runCommand(t, detectArgs(t, e, "detect", "-for", "1s", "-json")...)
		if code != cli.ExitOK {
			t.Fatalf("detect exited %d on an idle database, want %d; stderr: %s; stdout: %s", code, cli.ExitOK, errOut, out)
		}
		if strings.TrimSpace(out) != "[]" {
			t.Fatalf("detect on an idle database printed %s, want []", out)
		}
	}, on(pg, my))
}

func TestDetectRefusesSQLite(t *testing.T) {
	e := open(t, lite)
	code, _, errOut := runCommand(t, "detect", "-dsn", e.dsn, "-for", "100ms")
	if code != cli.ExitError || !strings.Contains(errOut, "one writer") {
		t.Fatalf("detect on SQLite exited %d (%s), want %d and why", code, errOut, cli.ExitError)
	}
}

func TestStatusReportsCounterTables(t *testing.T) {
	eachDB(t, func(t *testing.T, e *env) {
		must(t, e.db.AutoMigrate(&Post{}))
		posts := []Post{{Title: "cold"}, {Title: "hot"}}
		must(t, e.db.Create(&posts).Error)
		for i := 0; i < 40; i++ {
			must(t, gormcounter.Increment(e.db.Model(&posts[1]), "Likes", 1).Error)
		}
		must(t, gormcounter.Increment(e.db.Model(&posts[0]), "Likes", 1).Error)
		code, out, errOut := runCommand(t, detectArgs(t, e, "status", "-json")...)
		if code != cli.ExitOK {
			t.Fatalf("status exited %d: %s", code, errOut)
		}
		var tables []detect.Table
		must(t, json.Unmarshal([]byte(out), &tables))
		var slots *detect.Table
		for i := range tables {
			if tables[i].Table == "post_likes_slots" || strings.HasSuffix(tables[i].Table, ".post_likes_slots") {
				slots = &tables[i]
			}
		}
		if slots == nil {
			t.Fatalf("status did not list post_likes_slots: %s", out)
		}
		rows := rawInt(t, e.db, "SELECT COUNT(*) FROM post_likes_slots")
		sum := rawInt(t, e.db, "SELECT SUM(n) FROM post_likes_slots")
		if slots.Kind != "slots" || slots.Rows != rows || slots.Parents != 2 || len(slots.Widest) == 0 {
			t.Fatalf("post_likes_slots = %+v, want kind slots, %d rows, 2 parents, widest parents listed", *slots, rows)
		}
		var widest int64
		for _, p := range slots.Widest {
			widest += p.Sum
		}
		if widest != sum || slots.Widest[0].Rows != slots.MaxRows {
			t.Fatalf("widest parents %+v: sums %d, want %d in all; first has %d rows, want the most (%d)", slots.Widest, widest, sum, slots.Widest[0].Rows, slots.MaxRows)
		}
	})
}

// TestStatusGoesOnPastATableItCannotRead: a slot table whose figures
// cannot be read (a parent's total beyond int64, written by other code)
// is listed with why, the other tables with their figures, and the exit
// code says something failed.
func TestStatusGoesOnPastATableItCannotRead(t *testing.T) {
	eachDB(t, func(t *testing.T, e *env) {
		must(t, e.db.AutoMigrate(&Post{}))
		p := newPost(t, e.db, "overflowed")
		must(t, gormcounter.Increment(e.db.Model(&p), "Views", 3).Error)
		must(t, e.db.Exec("DELETE FROM post_likes_slots WHERE post_id = ?", p.ID).Error) // MariaDB pre-creates them
		must(t, e.db.Exec("INSERT INTO post_likes_slots (post_id, slot, n) VALUES (?, 0, ?), (?, 1, ?)",
			p.ID, int64(math.MaxInt64), p.ID, int64(math.MaxInt64)).Error)
		code, out, errOut := runCommand(t, detectArgs(t, e, "status", "-json")...)
		if code != cli.ExitError || !strings.Contains(errOut, "post_likes_slots") {
			t.Fatalf("status exited %d (stderr %q), want %d naming post_likes_slots", code, errOut, cli.ExitError)
		}
		var tables []detect.Table
		must(t, json.Unmarshal([]byte(out), &tables))
		byName := map[string]detect.Table{}
		for _, tb := range tables {
			byName[tb.Table[strings.LastIndex(tb.Table, ".")+1:]] = tb
		}
		if likes := byName["post_likes_slots"]; likes.Error == "" {
			t.Errorf("post_likes_slots = %+v, want an error", likes)
		}
		if views := byName["post_views_slots"]; views.Error != "" || views.Rows == 0 || len(views.Widest) != 1 || views.Widest[0].Sum != 3 {
			t.Errorf("post_views_slots = %+v, want its figures (a parent holding 3)", views)
		}
	})
}
