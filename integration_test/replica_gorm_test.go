package integration_test

import (
	"fmt"
	"testing"

	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
	"gorm.io/plugin/dbresolver"

	"github.com/hotcounter/hotcounter"
	"github.com/hotcounter/hotcounter/gormcounter"
)

// gormBehindAReplica returns GORM, with the plugin and dbresolver (reads
// to the replica, the plugin first unless resolverFirst), on a fresh
// schema of the pair's primary.
func gormBehindAReplica(t *testing.T, p *pgPair, schema string, resolverFirst bool) gormORM {
	_, err := p.primaryDB.Exec("DROP SCHEMA IF EXISTS " + schema + " CASCADE; CREATE SCHEMA " + schema)
	must(t, err)
	p.resume(t)
	db := openResolved(t, p, schema, resolverFirst)
	return gormORM{e: &env{kind: pg, dsn: p.primary + " search_path=" + schema, db: db, pool: 10}, gdb: db}
}

// gormRecountAndLoadsBehindAReplica: Recount corrects to the primary's
// COUNT(*), and a Live load reads the row and its counters from one
// database: both from the primary with dbresolver.Write, both from the
// replica without.
func gormRecountAndLoadsBehindAReplica(t *testing.T, p *pgPair, db *gorm.DB) {
	primary := func(q string, args ...any) int64 { return rawInt(t, db.Clauses(dbresolver.Write), q, args...) }
	p.pause(t)
	must(t, db.AutoMigrate(&Category{}, &Object{}))
	p.resume(t)

	// Recount: drift added on the primary and children the replica has
	// not seen.
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
	if (moved != hotcounter.Moved{Parents: 3, Amount: 1229, Nulls: 1}) {
		t.Fatalf("the first move: %+v", moved)
	}
	again, err := gormcounter.MoveToSlots(db, &SumShow{})
	must(t, err)
	if (again != hotcounter.Moved{}) {
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
