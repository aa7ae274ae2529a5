package integration_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/hotcounter/hotcounter"
	"github.com/hotcounter/hotcounter/entcounter"
	"github.com/hotcounter/hotcounter/gormcounter"
)

// Lock order across statements on MariaDB (docs/counts.md, "Deadlocks"):
// two transactions creating objects in two categories in opposite orders,
// over two statements each, neither wait nor deadlock, also when their
// connection ids are equal modulo the slot count (sessions that shared a
// slot row, and deadlocked, before each session wrote slot rows of its
// own). A classic counter cache, one row per category, deadlocks on every
// such pair.
func TestCountTriggersLockOrderAcrossStatements(t *testing.T) {
	parallel(t)
	for _, kind := range []dbKind{my} {
		t.Run(string(kind), func(t *testing.T) {
			e := open(t, kind)
			db := e.db
			k := countKinds[0]
			k.migrate(t, db)
			ps := k.newParents(t, db, 2)
			sqlDB, err := db.DB()
			must(t, err)
			ctx := context.Background()
			idQuery := "SELECT pg_backend_pid()"
			if kind == my {
				idQuery = "SELECT CONNECTION_ID()"
			}
			// Two pairs of connections: one sharing a slot (ids equal modulo
			// 16, ObjectCount's slots), one not.
			var same, other [2]*sql.Conn
			seen := map[int64]*sql.Conn{}
			for same[0] == nil || other[0] == nil {
				c, err := sqlDB.Conn(ctx)
				must(t, err)
				defer c.Close()
				var id int64
				must(t, c.QueryRowContext(ctx, idQuery).Scan(&id))
				if prev, ok := seen[id%16]; ok && same[0] == nil {
					same = [2]*sql.Conn{prev, c}
					continue
				}
				for slot, prev := range seen {
					if slot != id%16 && other[0] == nil && prev != same[0] && prev != same[1] {
						other = [2]*sql.Conn{prev, c}
						break
					}
				}
				if other[1] != c {
					seen[id%16] = c
				}
			}
			crossed := func(pair [2]*sql.Conn) (error, error) {
				tx1, err := pair[0].BeginTx(ctx, nil)
				must(t, err)
				defer tx1.Rollback()
				tx2, err := pair[1].BeginTx(ctx, nil)
				must(t, err)
				defer tx2.Rollback()
				ins := func(tx *sql.Tx, cat uint) error {
					_, err := tx.ExecContext(ctx, fmt.Sprintf("INSERT INTO objects (category_id, status) VALUES (%d, 'draft')", cat))
					return err
				}
				must(t, ins(tx1, ps[1]))
				must(t, ins(tx2, ps[0]))
				done := make(chan error, 1)
				go func() { done <- ins(tx1, ps[0]) }()
				time.Sleep(200 * time.Millisecond)
				err2 := ins(tx2, ps[1])
				if err2 == nil {
					tx2.Rollback()
				}
				return <-done, err2
			}
			if err1, err2 := crossed(other); err1 != nil || err2 != nil {
				t.Fatalf("sessions on different slots, opposite orders over two statements: %v / %v; want no wait and no error", err1, err2)
			}
			if err1, err2 := crossed(same); err1 != nil || err2 != nil {
				t.Fatalf("sessions whose ids are equal modulo the slot count, opposite orders over two statements: %v / %v; want no wait and no error", err1, err2)
			}
		})
	}
}

// Migrator().AlterColumn of the child on SQLite recreates the table, whose
// triggers go with it: the plugin's migrator puts them back, and a raw insert
// afterwards is counted.
func TestCountTriggersSurviveAlterColumn(t *testing.T) {
	parallel(t)
	e := open(t, lite)
	db := e.db
	k := countKinds[0]
	k.migrate(t, db)
	ps := k.newParents(t, db, 1)
	must(t, db.Migrator().AlterColumn(&Object{}, "Status"))
	must(t, db.Exec("INSERT INTO objects (category_id, status) VALUES (?, 'active')", ps[0]).Error)
	k.check(t, db, "Migrator().AlterColumn(&Object{}, \"Status\") and a raw insert")
}

// A deploy that migrates the child model alone, in a process that has not
// loaded Category: SQLite recreates objects to alter Status, and the plugin's
// migrator, which reads the triggers from the database, puts them back.
func TestCountTriggersSurviveMigratingTheChildAlone(t *testing.T) {
	parallel(t)
	e := open(t, lite)
	k := countKinds[0]
	k.migrate(t, e.db)
	ps := k.newParents(t, e.db, 1)

	db2, err := gorm.Open(dialectorFor(e.kind, e.dsn), &gorm.Config{Logger: e.log})
	must(t, err)
	sqlDB, _ := db2.DB()
	defer sqlDB.Close()
	must(t, db2.Use(gormcounter.New(gormcounter.Config{})))
	must(t, db2.AutoMigrate(&ObjectV2{}))

	must(t, e.db.Exec("INSERT INTO objects (category_id, status) VALUES (?, 'active')", ps[0]).Error)
	k.check(t, e.db, "AutoMigrate of the child alone (fresh process) and a raw insert")
}

// dropTriggersOf drops the count triggers of slot table slots on child
// table child, as a dump restored without triggers leaves them.
func dropTriggersOf(t *testing.T, e *env, slots, child string) {
	t.Helper()
	for _, op := range []string{"ins", "upd", "del"} {
		q := "DROP TRIGGER hc_" + slots + "_" + op
		if e.kind == pg {
			q += " ON " + child
		}
		must(t, e.db.Exec(q).Error)
	}
}

// A count whose triggers went missing (dropped, a dump restored without
// them, a first migration without the counters' setup) fails the loads of
// a process that has not seen them, naming the count and the migration
// that installs them, rather than read counts no trigger kept; the next
// migration repairs it: the triggers come back and the rows written
// meanwhile are counted, through GORM's AutoMigrate and ent's
// Schema.Create with WithCounters, on every database.
func TestMissingCountTriggersFailLoadsNamingTheMigrationThatRepairsThem(t *testing.T) {
	parallel(t)
	t.Run("gorm", func(t *testing.T) {
		eachDB(t, func(t *testing.T, e *env) {
			k := countKinds[0]
			k.migrate(t, e.db)
			ps := k.newParents(t, e.db, 2)
			k.newChildren(t, e.db, []*uint{&ps[0], &ps[1]}, "active")
			dropTriggersOf(t, e, "category_object_count_slots", "objects")
			dropTriggersOf(t, e, "category_active_count_slots", "objects")
			must(t, e.db.Exec("INSERT INTO objects (category_id, status) VALUES (?, 'active'), (?, 'active')", ps[0], ps[1]).Error)
			fresh, err := gorm.Open(dialectorFor(e.kind, e.dsn), &gorm.Config{Logger: e.log})
			must(t, err)
			sqlDB, _ := fresh.DB()
			defer sqlDB.Close()
			must(t, fresh.Use(gormcounter.New(gormcounter.Config{})))
			err = fresh.Find(&[]Category{}).Error
			if !errors.Is(err, hotcounter.ErrNotMigrated) || !strings.Contains(err.Error(), "Category.ObjectCount") || !strings.Contains(err.Error(), "AutoMigrate") {
				t.Fatalf("a load with the triggers missing = %v; want ErrNotMigrated naming Category.ObjectCount and AutoMigrate", err)
			}
			k.migrate(t, e.db)
			k.check(t, e.db, "the next AutoMigrate")
			k.check(t, fresh, "the next AutoMigrate, loaded by the process that was refused")
			must(t, e.db.Exec("INSERT INTO objects (category_id, status) VALUES (?, 'active')", ps[0]).Error)
			k.check(t, e.db, "a raw insert after it")
		})
	})
	t.Run("ent", func(t *testing.T) {
		eachDB(t, func(t *testing.T, e *env) {
			ee := withEnt(t, e, false)
			ctx := context.Background()
			must(t, entMigrate(ctx, ee.client)) // without WithCounters: no triggers
			ss := newShelves(t, ee.client, 2)
			// ent's own writes of books are refused meanwhile
			// (TestAChildWriteWhoseCountHasNoTriggersIsRefused): other code's.
			for _, s := range []int{ss[0], ss[1], ss[1]} {
				_, err := ee.sqlDB.ExecContext(ctx, fmt.Sprintf("INSERT INTO books (status, shelf_id) VALUES ('open', %d)", s))
				must(t, err)
			}
			_, err := ee.client.Shelf.Query().All(ctx)
			if !errors.Is(err, hotcounter.ErrNotMigrated) || !strings.Contains(err.Error(), "Shelf.book_count") || !strings.Contains(err.Error(), "WithCounters") {
				t.Fatalf("a load with the triggers missing = %v; want ErrNotMigrated naming Shelf.book_count and WithCounters", err)
			}
			must(t, entMigrate(ctx, ee.client, entcounter.WithCounters(ee.client)))
			entCheckCounts(t, ee, "the next Schema.Create with WithCounters")
			newBooks(t, ee.client, []*int{&ss[0]}, "open")
			entCheckCounts(t, ee, "a create after it")
		})
	})
}
