package integration_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	entsql "entgo.io/ent/dialect/sql"
	"gorm.io/gorm"

	"github.com/hotcounter/hotcounter"
	"github.com/hotcounter/hotcounter/entcounter"
	"github.com/hotcounter/hotcounter/gormcounter"
	"github.com/hotcounter/hotcounter/integration_test/ent"
)

// countKind is one way to keep counts, with its models behind one face, so
// that the same scenarios run on both.
type countKind struct {
	name     string
	parent   any    // a *Category or *Album, for Migrate and Recount
	child    any    // a *Object or *Photo
	parents  string // table names
	children string
	ref      string // child column that references the parent
	all      string // the two counters' field names
	active   string
	triggers bool
}

var countKinds = []countKind{
	{"triggers", &Category{}, &Object{}, "categories", "objects", "category_id", "ObjectCount", "ActiveCount", true},
	{"hooks", &Album{}, &Photo{}, "albums", "photos", "album_id", "PhotoCount", "LiveCount", false},
}

func (k countKind) migrate(t testing.TB, db *gorm.DB) {
	t.Helper()
	must(t, db.AutoMigrate(k.parent, k.child))
}

// newParents creates n parents in batches and returns their ids.
func (k countKind) newParents(t testing.TB, db *gorm.DB, n int) []uint {
	t.Helper()
	ids := make([]uint, n)
	if k.triggers {
		rows := make([]Category, n)
		for i := range rows {
			rows[i].Name = fmt.Sprint("c", i)
		}
		must(t, db.CreateInBatches(rows, 500).Error)
		for i := range rows {
			ids[i] = rows[i].ID
		}
	} else {
		rows := make([]Album, n)
		for i := range rows {
			rows[i].Name = fmt.Sprint("a", i)
		}
		must(t, db.CreateInBatches(rows, 500).Error)
		for i := range rows {
			ids[i] = rows[i].ID
		}
	}
	return ids
}

// newChildren creates one child in each of the given parents (nil: none)
// in one Create, and returns their ids.
func (k countKind) newChildren(t testing.TB, db *gorm.DB, parents []*uint, status string) []uint {
	t.Helper()
	ids := make([]uint, len(parents))
	if k.triggers {
		rows := make([]Object, len(parents))
		for i, p := range parents {
			rows[i] = Object{CategoryID: p, Status: status}
		}
		must(t, db.CreateInBatches(rows, 1000).Error)
		for i := range rows {
			ids[i] = rows[i].ID
		}
	} else {
		rows := make([]Photo, len(parents))
		for i, p := range parents {
			rows[i] = Photo{AlbumID: p, Status: status}
		}
		must(t, db.CreateInBatches(rows, 1000).Error)
		for i := range rows {
			ids[i] = rows[i].ID
		}
	}
	return ids
}

// loaded returns every parent's two counters as a load fills them (live,
// so that the rollup counter is exact), by id.
func (k countKind) loaded(t testing.TB, db *gorm.DB) map[uint][2]int64 {
	t.Helper()
	out := map[uint][2]int64{}
	db = db.Clauses(gormcounter.Live)
	if k.triggers {
		var cs []Category
		must(t, db.Find(&cs).Error)
		for _, c := range cs {
			out[c.ID] = [2]int64{c.ObjectCount, c.ActiveCount}
		}
	} else {
		var as []Album
		must(t, db.Find(&as).Error)
		for _, a := range as {
			out[a.ID] = [2]int64{a.PhotoCount, a.LiveCount}
		}
	}
	return out
}

// truth returns every parent's counts as COUNT(*) over the child table.
func (k countKind) truth(t testing.TB, db *gorm.DB) map[uint][2]int64 {
	t.Helper()
	out := map[uint][2]int64{}
	var ids []uint
	must(t, db.Table(k.parents).Pluck("id", &ids).Error)
	for _, id := range ids {
		out[id] = [2]int64{}
	}
	type row struct {
		P      uint
		All    int64
		Active int64
	}
	var rows []row
	must(t, db.Raw(`SELECT `+k.ref+` AS p, COUNT(*) AS "all", SUM(CASE WHEN status = 'active' THEN 1 ELSE 0 END) AS active
		FROM `+k.children+` WHERE deleted_at IS NULL AND `+k.ref+` IS NOT NULL GROUP BY `+k.ref).Scan(&rows).Error)
	for _, r := range rows {
		out[r.P] = [2]int64{r.All, r.Active}
	}
	return out
}

// mismatches lists the parents whose loaded counts differ from COUNT(*).
func (k countKind) mismatches(t testing.TB, db *gorm.DB) []string {
	t.Helper()
	got, want := k.loaded(t, db), k.truth(t, db)
	var bad []string
	for id, w := range want {
		if got[id] != w {
			bad = append(bad, fmt.Sprintf("%d: loaded %v, COUNT(*) %v", id, got[id], w))
		}
	}
	if len(got) != len(want) {
		bad = append(bad, fmt.Sprintf("loaded %d parents, the table has %d", len(got), len(want)))
	}
	return bad
}

func (k countKind) check(t testing.TB, db *gorm.DB, step string) {
	t.Helper()
	if bad := k.mismatches(t, db); len(bad) > 0 {
		if len(bad) > 5 {
			bad = append(bad[:5], fmt.Sprintf("... %d in all", len(bad)))
		}
		t.Fatalf("after %s, counts differ from COUNT(*):\n%s", step, strings.Join(bad, "\n"))
	}
}

// childModel returns a pointer to a zero child, for Model and Delete.
func (k countKind) childModel() any {
	if k.triggers {
		return &Object{}
	}
	return &Photo{}
}

// A parent's counts follow every way the ORM writes its child table, and
// raw SQL: after each step they equal COUNT(*). Counts kept by triggers
// and by hooks, GORM and ent, on every database. Raw SQL is counted by
// triggers; hooks cannot see it, and Recount repairs what it changed. A
// count is not incremented as a counter is: that is refused with
// ErrNotIncrement naming it.
func TestCountsFollowEveryWritePath(t *testing.T) {
	eachCountScene(t, func(t *testing.T, s countScene) {
		check := func(step string, err error) {
			t.Helper()
			must(t, err)
			checkCounts(t, step, s.mismatches(t))
		}
		ps := s.parents(t, 4)
		check("creating parents", nil)
		ids := s.create(t, []*int64{&ps[0], &ps[0], &ps[1], nil, &ps[2]}, true)
		check("a batch create", nil)
		s.create(t, []*int64{&ps[3]}, false)
		check("a create that the condition leaves out", nil)

		check("a move", s.move(ids[0], ps[1]))
		check("a move from no parent", s.move(ids[3], ps[3]))
		check("a move to no parent", s.unparent(ids[4]))
		check("a bulk move", s.moveAll(ps[1], ps[2]))
		check("a bulk status change", s.setStatus(ps[2], false))
		check("a delete", s.remove(ids[1], false))
		check("a bulk delete", s.removeAllOf(ps[3]))

		s.insertRaw(t, ps[2], 2)
		if !s.byTriggers() {
			if len(s.mismatches(t)) == 0 {
				t.Fatal("a raw insert was counted without triggers: the check cannot see drift")
			}
			for _, filtered := range []bool{false, true} {
				n, err := s.recount(t, filtered, 0)
				must(t, err)
				if n != 1 {
					t.Errorf("Recount (filtered: %v) corrected %d parents, want 1", filtered, n)
				}
			}
		}
		check("a raw insert", nil)
		for _, filtered := range []bool{false, true} {
			n, err := s.recount(t, filtered, 0)
			must(t, err)
			if n != 0 {
				t.Errorf("Recount (filtered: %v) of exact counts corrected %d parents", filtered, n)
			}
		}

		err := s.incrementCount(ps[0])
		if !errors.Is(err, hotcounter.ErrNotIncrement) || !strings.Contains(err.Error(), s.countName()) {
			t.Errorf("an increment of a count: %v; want ErrNotIncrement naming %s", err, s.countName())
		}
		check("a refused increment", nil)
	})
}

// A count declared over a column the parent table already has (old
// code's bookkeeping, drifted): the migration counts the children that
// exist, not the column's value, and later children are counted once,
// whatever old code still adds to the column. Counts by triggers and by
// hooks, GORM and ent, on every database.
func TestACountOverAnExistingColumnIsRecounted(t *testing.T) {
	eachCountScene(t, func(t *testing.T, s countScene) {
		ps := s.parents(t, 2)
		s.children(t, []int64{ps[0], ps[0], ps[0], ps[1], ps[1]})
		s.legacyCount(t, 9)
		s.migrate(t)
		checkCounts(t, "the migration over the existing column", s.mismatches(t))
		s.create(t, []*int64{&ps[1]}, true)
		must(t, s.onEnv().db.Exec("UPDATE "+s.parentTable()+" SET "+s.countColumn()+" = "+s.countColumn()+" + 1 WHERE id = ?", ps[1]).Error) // old code's bookkeeping
		checkCounts(t, "a new child and old code's increment of the column", s.mismatches(t))
		n, err := s.recount(t, false, 0)
		must(t, err)
		if n != 0 {
			t.Errorf("Recount corrected %d parents; the counts were exact", n)
		}
	})
}

// GORM's writes of its own on counted children: Updates of the status and
// the parent at once, a soft delete and its undo, a bulk soft delete, and
// hard deletes (of a row, and of rows deleted softly before). Counts by
// triggers and by hooks, on every database.
func TestCountsFollowGormsUpdatesAndSoftDeletes(t *testing.T) {
	parallel(t)
	for _, k := range countKinds {
		t.Run(k.name, func(t *testing.T) {
			eachDB(t, func(t *testing.T, e *env) {
				db := e.db
				k.migrate(t, db)
				ps := k.newParents(t, db, 3)
				ids := k.newChildren(t, db, []*uint{&ps[0], &ps[1], &ps[1], &ps[2]}, "draft")
				child := k.childModel()
				must(t, db.Model(child).Where("id IN ?", ids[:2]).Updates(map[string]any{"status": "active", k.ref: ps[0]}).Error)
				k.check(t, db, "Updates of status and parent")
				must(t, db.Delete(child, ids[1]).Error)
				k.check(t, db, "a soft delete")
				must(t, db.Unscoped().Model(child).Where("id = ?", ids[1]).Update("deleted_at", nil).Error)
				k.check(t, db, "an undelete")
				must(t, db.Where(k.ref+" = ?", ps[1]).Delete(child).Error)
				k.check(t, db, "a bulk soft delete")
				must(t, db.Unscoped().Where("id = ?", ids[0]).Delete(child).Error)
				k.check(t, db, "a hard delete")
				must(t, db.Unscoped().Where("1 = 1").Delete(child).Error)
				k.check(t, db, "a hard delete of the soft-deleted rows too")
			})
		})
	}
}

// Recount refuses a counter that counts no children.
func TestRecountRefusesACounterThatCountsNothing(t *testing.T) {
	parallel(t)
	e := open(t, lite)
	if _, err := gormcounter.Recount(e.db.Model(&Post{}), "Likes"); !errors.Is(err, hotcounter.ErrNotCounter) {
		t.Fatalf("Recount of a plain counter: %v; want ErrNotCounter", err)
	}
}

// The scenario of depesz's "objects in categories": 200 parents, 300
// children, many goroutines moving random children between random parents
// and between four hot ones (so moves in opposite directions meet), then
// deleting 80% of the children while half the writers keep moving: one by
// one (every tenth for good, where the ORM deletes softly), and every
// hundredth with all the children of a hot parent in one statement. Not
// those bulk deletes on MariaDB, where they can deadlock with the moves
// through the child rows themselves (see docs/counts.md): the bulk
// statement locks the child's secondary index before its primary key, and
// a move by id the other way round. Nothing retries, so a deadlock would
// surface as an error. It must end with no error at all and every count
// equal to COUNT(*). Counts by triggers and by hooks, GORM and ent, on
// every database.
func TestCountsStayExactUnderMovesAndDeletes(t *testing.T) {
	eachCountScene(t, func(t *testing.T, s countScene) {
		writers, moves := 32, 12
		if s.kind() == lite {
			writers, moves = 4, 8
		}
		parents := s.parents(t, 200)
		owners := make([]int64, 300)
		for i := range owners {
			owners[i] = parents[rand.IntN(len(parents))]
		}
		children := s.children(t, owners)
		hot := parents[:4]
		move := func() error {
			target := parents[rand.IntN(len(parents))]
			if rand.IntN(2) == 0 {
				target = hot[rand.IntN(len(hot))]
			}
			return s.move(children[rand.IntN(len(children))], target)
		}
		moved := hammer(t, writers, moves, move)
		checkCounts(t, "the moves", s.mismatches(t))

		doomed := rand.Perm(len(children))[:len(children)*4/5]
		var next, bulk atomic.Int64
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			moved += hammer(t, max(writers/2, 1), moves, move)
		}()
		deletes := hammer(t, max(writers/2, 1), len(doomed), func() error {
			i := int(next.Add(1)) - 1
			if i >= len(doomed) {
				return errStop
			}
			if s.kind() != my && i%100 == 0 {
				bulk.Add(1)
				if err := s.removeAllOf(hot[rand.IntN(len(hot))]); err != nil {
					return err
				}
			}
			return s.remove(children[doomed[i]], i%10 == 0)
		})
		wg.Wait()
		if t.Failed() {
			t.FailNow()
		}
		checkCounts(t, "the deletes", s.mismatches(t))
		left := s.left(t)
		if left > int64(len(children)-len(doomed)) {
			t.Fatalf("%d of %d children left: the deletes did not run", left, len(children))
		}
		t.Logf("%d writers, %d moves, %d deletes (%d bulk), %d children left, no error, every count exact",
			writers, moved, deletes, bulk.Load(), left)
	})
}

// slotTables returns the slot tables of a kind's two counters.
func (k countKind) slotTables() (all, active string) {
	if k.triggers {
		return "category_object_count_slots", "category_active_count_slots"
	}
	return "album_photo_count_slots", "album_live_count_slots"
}

// Drift is injected behind the counts' back (raw SQL on what holds them)
// into 15 of 150 parents; then Recount runs, 50 parents at a time, while
// writers keep moving children among all parents. It must correct exactly
// the drifted parents (a write that commits during the recount is never
// mistaken for drift) and leave every count equal to COUNT(*). Counts by
// triggers and by hooks, GORM and ent, on every database.
func TestRecountFixesDriftWhileWritesGoOn(t *testing.T) {
	eachCountScene(t, func(t *testing.T, s countScene) {
		parents := s.parents(t, 150)
		owners := make([]int64, 450)
		for i := range owners {
			owners[i] = parents[i%len(parents)]
		}
		children := s.children(t, owners)
		checkCounts(t, "setting up", s.mismatches(t))
		var drifted []int64
		for i := 7; i < len(parents); i += 10 {
			drifted = append(drifted, parents[i])
		}
		s.drift(t, drifted)
		if bad := s.mismatches(t); len(bad) != len(drifted) {
			t.Fatalf("injected drift into %d parents, the check sees %d", len(drifted), len(bad))
		}

		var done atomic.Bool
		var wg sync.WaitGroup
		wg.Add(1)
		writers := 8
		if s.kind() == lite {
			writers = 2
		}
		var moved int64
		var started atomic.Int64
		go func() {
			defer wg.Done()
			moved = hammer(t, writers, 1<<30, func() error {
				if done.Load() {
					return errStop
				}
				// Paced: writers that never pause would only make the
				// recount they race take longer (and then write more), and
				// on SQLite, whose busy wait is unfair, starve it.
				started.Add(1)
				time.Sleep(2 * time.Millisecond)
				return s.move(children[rand.IntN(len(children))], parents[rand.IntN(len(parents))])
			})
		}()
		for started.Load() < 2*int64(writers) {
			time.Sleep(time.Millisecond)
		}
		var fixed [2]int64
		for i, filtered := range []bool{false, true} {
			n, err := s.recount(t, filtered, 50) // three batches
			must(t, err)
			fixed[i] = n
		}
		done.Store(true)
		wg.Wait()
		for i, what := range []string{"all children", "the filtered children"} {
			if fixed[i] != int64(len(drifted)) {
				t.Errorf("Recount of the count of %s corrected %d parents; drift was injected into %d", what, fixed[i], len(drifted))
			}
		}
		if moved == 0 {
			t.Fatal("no write ran during the recount")
		}
		checkCounts(t, "the recount", s.mismatches(t))
		t.Logf("corrected %v of %d drifted parents while %d moves ran", fixed, len(drifted), moved)
	})
}

// A count kept by hooks has no triggers: a migration of the version that
// keeps it by hooks drops the triggers an earlier version, whose count
// triggers kept, left on the child table, which would count each child
// write a second time. GORM and ent, on every database.
func TestCountsByHooksDropTheTriggersOfAnEarlierVersion(t *testing.T) {
	eachCountSceneKeptBy(t, false, true, func(t *testing.T, s countScene) {
		s.leaveTriggers(t)
		s.migrate(t)
		if n := triggersOn(t, s.onEnv(), s.childTable()); n != 0 {
			t.Errorf("%d triggers on %s after the migration of the version whose hooks keep its counts", n, s.childTable())
		}
		parents := s.parents(t, 3)
		s.children(t, append(parents, parents[0]))
		checkCounts(t, "four children written after the migration", s.mismatches(t))
	})
}

// A migration that alters the parent table, which SQLite does by
// rebuilding it (a new table, the rows copied, the old one dropped, the new
// one renamed), keeps the counts its triggers keep on the child table:
// counted before it, and counted after. GORM and ent, on every database.
func TestCountsStayExactWhenAMigrationAltersTheirParentTable(t *testing.T) {
	eachCountSceneKeptBy(t, true, false, func(t *testing.T, s countScene) {
		parents := s.parents(t, 3)
		s.children(t, parents)
		s.alterParent(t)
		s.children(t, append(parents, parents[0]))
		checkCounts(t, "a migration that altered the parent table", s.mismatches(t))
	})
}

type countsUnknown struct {
	ID uint
	N  int64 `gorm:"counter:counts=Things"`
}

type countsBelongsTo struct {
	ID      uint
	OwnerID uint
	Owner   Category
	N       int64 `gorm:"counter:counts=Owner"`
}

type countsWhereAlone struct {
	ID uint
	N  int64 `gorm:"counter:where=status = 'active'"`
}

type countsWhereSubquery struct {
	ID      uint
	N       int64    `gorm:"counter:counts=Objects,where=status IN (SELECT name FROM open_states)"`
	Objects []Object `gorm:"foreignKey:CategoryID"`
}

type countsWhereUnknownColumn struct {
	ID      uint
	N       int64    `gorm:"counter:counts=Objects,where=state = 'open' AND deleted_at IS NULL"`
	Objects []Object `gorm:"foreignKey:CategoryID"`
}

type countsTotalByHooks struct {
	ID    uint
	N     int64  `gorm:"counter:counts=Files,total=size,hooks"`
	Files []File `gorm:"foreignKey:FolderID"`
}

// TestCountDeclarationErrors: a count that names no has-many relation, a
// condition without a count, a condition that reads other rows (a
// subquery) or names a column the child rows lack, fails AutoMigrate
// naming the model and field (before any table is made).
func TestCountDeclarationErrors(t *testing.T) {
	parallel(t)
	e := open(t, lite)
	for _, c := range []struct {
		model any
		says  []string
	}{
		{&countsUnknown{}, []string{"countsUnknown.N", "counts=Things", "no relation Things"}},
		{&countsBelongsTo{}, []string{"countsBelongsTo.N", "belongs_to", "has many or many to many"}},
		{&countsWhereAlone{}, []string{"countsWhereAlone.N", "add counts="}},
		{&countsWhereSubquery{}, []string{"countsWhereSubquery.N", "subquery"}},
		{&countsWhereUnknownColumn{}, []string{"countsWhereUnknownColumn.N", "names state", "objects", "status"}},
		{&countsTotalByHooks{}, []string{"countsTotalByHooks.N", "total=", "hooks"}},
	} {
		err := e.db.AutoMigrate(c.model)
		if !errors.Is(err, hotcounter.ErrInvalidCounter) {
			t.Errorf("AutoMigrate(%T) = %v; want ErrInvalidCounter", c.model, err)
			continue
		}
		for _, s := range c.says {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("AutoMigrate(%T) error %q does not say %q", c.model, err, s)
			}
		}
	}
}

// TestCountTriggersFollowMigrations: a parent migrated before its child
// table exists gets its triggers when the child is migrated; dropping the
// parent's table removes them, so the child stays writable.
func TestCountTriggersFollowMigrations(t *testing.T) {
	parallel(t)
	eachDB(t, func(t *testing.T, e *env) {
		db := e.db
		k := countKinds[0]
		must(t, db.AutoMigrate(&Category{}))
		must(t, db.AutoMigrate(&Object{}))
		ps := k.newParents(t, db, 2)
		must(t, db.Exec("INSERT INTO objects (category_id, status) VALUES (?, 'active')", ps[0]).Error)
		k.check(t, db, "migrating the child after the parent and a raw insert")

		must(t, db.Exec("DELETE FROM objects").Error)
		must(t, db.Migrator().DropConstraint(&Category{}, "Objects"))
		must(t, db.Migrator().DropTable(&Category{}))
		must(t, db.Exec("INSERT INTO objects (category_id, status) VALUES (?, 'active')", ps[0]).Error)
		var n int64
		must(t, db.Model(&Object{}).Count(&n).Error)
		if n != 1 {
			t.Fatalf("objects has %d rows, want 1", n)
		}
	})
}

// TestCountsWithRollupLoop: a rollup loop folds a rollup count's slots into
// its column while 8 writers move children; every count stays equal to
// COUNT(*) (live), and after a last pass the cached column alone is exact.
func TestCountsWithRollupLoop(t *testing.T) {
	parallel(t)
	for _, kind := range []dbKind{pg, my} {
		t.Run(string(kind), func(t *testing.T) {
			e := open(t, kind)
			db := e.db
			k := countKinds[0]
			k.migrate(t, db)
			ps := k.newParents(t, db, 20)
			owners := make([]*uint, 400)
			for i := range owners {
				owners[i] = &ps[i%len(ps)]
			}
			objs := k.newChildren(t, db, owners, "active")
			ctx, cancel := context.WithCancel(context.Background())
			loop := make(chan error, 1)
			go func() { loop <- gormcounter.RollupLoop(ctx, db, 5*time.Millisecond, &Category{}) }()
			moved := hammer(t, 8, 100, func() error {
				return db.Model(&Object{}).Where("id = ?", objs[rand.IntN(len(objs))]).Update(k.ref, ps[rand.IntN(len(ps))]).Error
			})
			cancel()
			must(t, <-loop)
			k.check(t, db, "moves during a rollup loop")
			must(t, gormcounter.RollupPass(db, &Category{}))
			var cs []Category
			must(t, db.Find(&cs).Error) // not live: the cached column
			for _, c := range cs {
				var want int64
				must(t, db.Model(&Object{}).Where("category_id = ? AND status = 'active'", c.ID).Count(&want).Error)
				if c.ActiveCount != want {
					t.Fatalf("category %d: cached active count %d after a last pass, COUNT(*) %d", c.ID, c.ActiveCount, want)
				}
			}
			if moved != 800 {
				t.Fatalf("%d of 800 moves ran", moved)
			}
		})
	}
}

// liveCounts returns the values of a parent's counter fields, loaded live,
// by the parent's key.
func liveCounts[P any](t *testing.T, db *gorm.DB, key func(P) any, val func(P) []int64) map[string][]int64 {
	t.Helper()
	var ps []P
	must(t, db.Clauses(gormcounter.Live).Find(&ps).Error)
	out := map[string][]int64{}
	for _, p := range ps {
		out[fmt.Sprint(key(p))] = val(p)
	}
	return out
}

func expectCounts(t *testing.T, step string, got map[string][]int64, want map[string][]int64) {
	t.Helper()
	for k, w := range want {
		if fmt.Sprint(got[k]) != fmt.Sprint(w) {
			t.Errorf("after %s: parent %s has counts %v, want %v", step, k, got[k], w)
		}
	}
}

var countSchema string

func TestCountsOfSchemaQualifiedTables(t *testing.T) {
	parallel(t)
	for _, kind := range []dbKind{pg, my} {
		t.Run(string(kind), func(t *testing.T) {
			serial(t) // QualCat's table name reads countSchema
			e := open(t, kind)
			db := e.db
			countSchema = fmt.Sprintf("hc_other_%08x", rand.Uint32())
			if kind == pg {
				must(t, db.Exec("CREATE SCHEMA "+countSchema).Error)
				t.Cleanup(func() { db.Exec("DROP SCHEMA " + countSchema + " CASCADE") })
			} else {
				must(t, db.Exec("CREATE DATABASE "+countSchema).Error)
				t.Cleanup(func() { db.Exec("DROP DATABASE " + countSchema) })
			}
			must(t, db.AutoMigrate(&QualCat{}, &QualItem{}))
			c := QualCat{}
			must(t, db.Create(&c).Error)
			must(t, db.Create(&[]QualItem{{CatID: &c.ID}, {CatID: &c.ID}}).Error)
			got := liveCounts(t, db, func(c QualCat) any { return c.ID }, func(c QualCat) []int64 { return []int64{c.N, c.H} })
			// [N (triggers), H (hooks)]
			expectCounts(t, "creates in another schema", got, map[string][]int64{fmt.Sprint(c.ID): {2, 2}})
		})
	}
}

func TestCountsIgnoreChildFieldsWithoutColumns(t *testing.T) {
	parallel(t)
	eachDB(t, func(t *testing.T, e *env) {
		db := e.db
		must(t, db.AutoMigrate(&GapCat{}, &GapItem{}))
		c := GapCat{}
		must(t, db.Create(&c).Error)
		must(t, db.Create(&GapItem{CatID: &c.ID}).Error)
		got := liveCounts(t, db, func(c GapCat) any { return c.ID }, func(c GapCat) []int64 { return []int64{c.N} })
		expectCounts(t, "a create", got, map[string][]int64{fmt.Sprint(c.ID): {1}})
	})
}

// Without foreign key constraints (DisableForeignKeyConstraintWhenMigrating),
// a child may name a parent that does not exist (yet): creating it succeeds,
// with triggers and with hooks, on every database (the count skips the row
// rather than insert a slot row whose foreign key would fail the child's
// INSERT).
func TestCountsOfChildrenOfMissingParents(t *testing.T) {
	parallel(t)
	for _, kind := range allKinds {
		t.Run(string(kind), func(t *testing.T) {
			e := open(t, kind, config(&gorm.Config{DisableForeignKeyConstraintWhenMigrating: true}))
			db := e.db
			for _, k := range countKinds {
				k.migrate(t, db)
				k.newParents(t, db, 1)
				k.newChildren(t, db, []*uint{ptr(999)}, "active")
			}
		})
	}
}

// Recount inside the caller's transaction (PostgreSQL, GORM and ent)
// corrects drift, over several batches, and leaves the transaction's settings as it found them:
// each batch turns JIT compilation off for itself (on a table never
// analysed, compiling a batch cost more than running it) and puts the
// caller's value back, here a jit the caller set to on.
func TestRecountInTheCallersTransactionLeavesItsSettingsAsTheyWere(t *testing.T) {
	parallel(t)
	check := func(t *testing.T, jit string, corrected int64) {
		t.Helper()
		if jit != "on" {
			t.Errorf("jit is %q after the recount in the transaction, want the caller's on", jit)
		}
		if corrected != 3 {
			t.Errorf("the recount corrected %d parents, want the 3 with drift", corrected)
		}
	}
	t.Run("gorm", func(t *testing.T) {
		e := open(t, pg)
		db := e.db
		k := countKinds[0]
		k.migrate(t, db)
		ps := k.newParents(t, db, 2500) // five batches of 500
		for _, p := range []uint{ps[0], ps[1500], ps[2499]} {
			must(t, db.Exec("INSERT INTO category_object_count_slots (category_id, slot, n) VALUES (?, 0, 7)", p).Error)
		}
		must(t, db.Transaction(func(tx *gorm.DB) error {
			must(t, tx.Exec("SET LOCAL jit = on").Error)
			n, err := gormcounter.Recount(tx.Model(&Category{}), "ObjectCount")
			must(t, err)
			var jit string
			must(t, tx.Raw("SHOW jit").Row().Scan(&jit))
			check(t, jit, n)
			return nil
		}))
		k.check(t, db, "the recount")
	})
	t.Run("ent", func(t *testing.T) {
		e := openEnt(t, pg, false, pool(writersPool))
		ctx := context.Background()
		c := e.client
		must(t, entMigrateOnly(ctx, c, []string{"shelves", "books"}, entcounter.WithCounters(c)))
		var ids []int
		for range 3 {
			ids = append(ids, c.Shelf.Create().SaveX(ctx).ID)
		}
		for _, id := range ids {
			must(t, e.db.Exec("INSERT INTO shelf_book_count_slots (shelf_id, slot, n) VALUES (?, 0, 7)", id).Error)
		}
		must(t, inTxRollingBack(ctx, c, false, func(tx *ent.Tx) error {
			if err := tx.HotCounter().Driver.Exec(ctx, "SET LOCAL jit = on", []any{}, nil); err != nil {
				return err
			}
			n, err := entcounter.Recount(ctx, tx, "Shelf", "book_count")
			if err != nil {
				return err
			}
			var rows entsql.Rows
			if err := tx.HotCounter().Driver.Query(ctx, "SHOW jit", []any{}, &rows); err != nil {
				return err
			}
			defer rows.Close()
			var jit string
			for rows.Next() {
				must(t, rows.Scan(&jit))
			}
			check(t, jit, n)
			return rows.Err()
		}))
		for _, id := range ids {
			if got := c.Shelf.GetX(ctx, id).BookCount; got != 0 {
				t.Errorf("shelf %d: book_count=%d after the recount, want 0", id, got)
			}
		}
	})
}
