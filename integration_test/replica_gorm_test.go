package integration_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
	"gorm.io/plugin/dbresolver"

	"github.com/hotcounter/hotcounter/gormcounter"
)

// Behind a streaming replica, every read of the library that decides a
// write goes to the primary, with replay paused (the replica lags by
// everything written since): through GORM's dbresolver (registered before
// and after the plugin) and through ent's FAQ read/write split. The three
// parts share the package's primary and replica, one after another.
func TestReadsThatDecideWritesGoToThePrimaryBehindAReplica(t *testing.T) {
	p := replicaPair(t)
	t.Run("gorm", func(t *testing.T) { gormBehindAReplica(t, p) })
	t.Run("gorm MoveToSlots", func(t *testing.T) { gormMoveToSlotsBehindAReplica(t, p) })
	t.Run("ent", func(t *testing.T) { entBehindAReplica(t, p) })
}

// gormBehindAReplica: AutoMigrate creates the tables, Recount corrects to
// the primary's COUNT(*), Take sells the stock the primary holds,
// RollupPass folds what the primary holds. A Live load reads the row and
// its counters from one database: both from the primary with
// dbresolver.Write, both from the replica without.
func gormBehindAReplica(t *testing.T, p *pgPair) {
	for i, order := range []string{"plugin, then dbresolver", "dbresolver, then plugin"} {
		t.Run(order, func(t *testing.T) {
			schema := fmt.Sprintf("replica_gorm_%d", i)
			_, err := p.primaryDB.Exec("DROP SCHEMA IF EXISTS " + schema + " CASCADE; CREATE SCHEMA " + schema)
			must(t, err)
			p.resume(t)
			db := openResolved(t, p, schema, i == 1)
			primary := func(q string, args ...any) int64 { return rawInt(t, db.Clauses(dbresolver.Write), q, args...) }

			p.pause(t)
			must(t, db.AutoMigrate(&Author{}, &Post{}, &Comment{}, &Category{}, &Object{}, &Product{}, &Board{}))
			must(t, db.AutoMigrate(&Post{}, &Category{}, &Product{}, &Board{})) // a second migration probes the tables it made
			p.resume(t)

			// Recount: drift added on the primary and children the replica
			// has not seen.
			cat := Category{Name: "c"}
			must(t, db.Create(&cat).Error)
			for range 10 {
				must(t, db.Create(&Object{CategoryID: &cat.ID}).Error)
			}
			p.resume(t)
			p.pause(t)
			must(t, db.Exec("UPDATE category_object_count_slots SET n = n + 5 WHERE category_id = ?", cat.ID).Error)
			for range 3 {
				must(t, db.Create(&Object{CategoryID: &cat.ID}).Error)
			}
			for round := range 3 {
				_, err := gormcounter.Recount(db.Model(&Category{}).Where("id = ?", cat.ID), "ObjectCount")
				must(t, err)
				var got Category
				must(t, db.Clauses(dbresolver.Write, gormcounter.Live).First(&got, cat.ID).Error)
				if want := primary("SELECT COUNT(*) FROM objects WHERE category_id = ?", cat.ID); got.ObjectCount != want {
					t.Fatalf("round %d: the recounted count is %d on the primary; COUNT(*) there is %d", round, got.ObjectCount, want)
				}
			}

			// Take: a restock the replica has not seen.
			prod := Product{Name: "p"}
			must(t, db.Create(&prod).Error)
			p.resume(t)
			p.pause(t)
			must(t, gormcounter.Increment(db.Model(&prod), "Stock", 100).Error)
			var refused atomic.Int64
			var wg sync.WaitGroup
			for range 32 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if err := gormcounter.Take(db.Model(&Product{ID: prod.ID}), "Stock", 1).Error; err != nil {
						refused.Add(1)
						t.Errorf("a take of 1 of the 100 the primary holds: %v", err)
					}
				}()
			}
			wg.Wait()
			var left Product
			must(t, db.Clauses(dbresolver.Write, gormcounter.Live).First(&left, prod.ID).Error)
			if left.Stock != 68 || refused.Load() != 0 {
				t.Fatalf("32 takes of 1 from 100: %d refused, %d left; want 0 and 68", refused.Load(), left.Stock)
			}

			// RollupPass: increments the replica has not seen.
			b := Board{}
			must(t, db.Create(&b).Error)
			p.resume(t)
			p.pause(t)
			for range 5 {
				must(t, gormcounter.Increment(db.Model(&b), "Score", 10).Error)
			}
			must(t, gormcounter.RollupPass(db, &Board{}))
			if col, pending := primary("SELECT score FROM boards WHERE id = ?", b.ID), primary("SELECT COUNT(*) FROM board_score_slots WHERE board_id = ? AND n <> 0", b.ID); col != 50 || pending != 0 {
				t.Fatalf("after a rollup pass: the primary's column holds %d with %d slot rows pending; want 50 and 0", col, pending)
			}

			// Live loads: the row and its counters from one database.
			post := Post{Title: "p"}
			must(t, db.Create(&post).Error)
			p.resume(t)
			p.pause(t)
			must(t, gormcounter.Increment(db.Model(&post), "Likes", 1600).Error)
			must(t, db.Model(&post).Update("title", "seen on the primary").Error)
			var fromPrimary, fromReplica, plain Post
			must(t, db.Clauses(dbresolver.Write, gormcounter.Live).First(&fromPrimary, post.ID).Error)
			must(t, db.Clauses(gormcounter.Live).First(&fromReplica, post.ID).Error)
			must(t, db.First(&plain, post.ID).Error)
			if fromPrimary.Title != "seen on the primary" || fromPrimary.Likes != 1600 {
				t.Errorf("a Live load with dbresolver.Write: title %q, likes %d; want the primary's (1600)", fromPrimary.Title, fromPrimary.Likes)
			}
			if fromReplica.Title != "p" || fromReplica.Likes != 0 || plain.Title != "p" || plain.Likes != 0 {
				t.Errorf("loads from the lagging replica: Live %q/%d, plain %q/%d; want the replica's row and counters (p, 0)",
					fromReplica.Title, fromReplica.Likes, plain.Title, plain.Likes)
			}
			p.resume(t)
			var caught Post
			must(t, db.Clauses(gormcounter.Live).First(&caught, post.ID).Error)
			if caught.Likes != 1600 {
				t.Errorf("a Live load from the replica once it caught up: likes %d; want 1600", caught.Likes)
			}
		})
	}
}

// gormMoveToSlotsBehindAReplica: a second MoveToSlots while the replica
// still shows the columns the first one emptied finds nothing to move, and
// no total changes.
func gormMoveToSlotsBehindAReplica(t *testing.T, p *pgPair) {
	schema := "replica_gorm_move"
	_, err := p.primaryDB.Exec("DROP SCHEMA IF EXISTS " + schema + " CASCADE; CREATE SCHEMA " + schema)
	must(t, err)
	p.resume(t)
	db := openResolved(t, p, schema, false)
	ids := oldShows(t, db, i64(1234), i64(0), nil, i64(-5))
	must(t, db.AutoMigrate(&SumShow{}))
	p.resume(t)
	p.pause(t)
	defer p.resume(t)
	moved, err := gormcounter.MoveToSlots(db, &SumShow{})
	must(t, err)
	if (moved != gormcounter.Moved{Parents: 3, Amount: 1229, Nulls: 1}) {
		t.Fatalf("the first move: %+v", moved)
	}
	again, err := gormcounter.MoveToSlots(db, &SumShow{})
	must(t, err)
	if (again != gormcounter.Moved{}) {
		t.Fatalf("a second move while the replica lags: %+v; want nothing moved", again)
	}
	p.resume(t)
	if got := sumLikes(t, db, ids); fmt.Sprint(got) != "[1234 0 0 -5]" {
		t.Fatalf("totals after the moves: %v; want [1234 0 0 -5]", got)
	}
}

// openResolved opens the pair's primary with the plugin and dbresolver
// (reads to the replica), in schema, the plugin first unless
// resolverFirst.
func openResolved(t *testing.T, p *pgPair, schema string, resolverFirst bool) *gorm.DB {
	t.Helper()
	dsn := func(base string) string { return base + " search_path=" + schema }
	db, err := gorm.Open(postgres.Open(dsn(p.primary)), &gorm.Config{Logger: logger.Discard})
	must(t, err)
	sqlDB, err := db.DB()
	must(t, err)
	t.Cleanup(func() { sqlDB.Close() })
	resolver := dbresolver.Register(dbresolver.Config{Replicas: []gorm.Dialector{postgres.Open(dsn(p.replica))}})
	plugin := gormcounter.New(gormcounter.Config{})
	if resolverFirst {
		must(t, db.Use(resolver))
		must(t, db.Use(plugin))
	} else {
		must(t, db.Use(plugin))
		must(t, db.Use(resolver))
	}
	return db
}
