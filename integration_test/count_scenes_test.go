package integration_test

import (
	"context"
	"testing"

	"github.com/hotcounter/hotcounter/entcounter"
	"github.com/hotcounter/hotcounter/gormcounter"
	"github.com/hotcounter/hotcounter/integration_test/ent"
	"github.com/hotcounter/hotcounter/integration_test/ent/book"
	"github.com/hotcounter/hotcounter/integration_test/ent/item"
	"github.com/hotcounter/hotcounter/integration_test/ent/predicate"
)

// countScene is a parent table whose counts of child rows (all of them,
// and those of the counted status) one ORM keeps, by database triggers or
// by its own hooks: what a count behaviour is written against, once for
// both ORMs. The scenes:
//   - GORM, triggers: categories counting objects (ObjectCount,
//     ActiveCount), every write in GORM's default transaction;
//   - GORM, hooks: albums counting photos (PhotoCount, LiveCount);
//   - ent, triggers: shelves counting books (BookCount, OpenCount);
//   - ent, hooks: racks counting items (ItemCount, OpenCount), every write
//     in a transaction of its own, as hooks need.
type countScene interface {
	kind() dbKind
	// parents creates n parents and returns their ids.
	parents(t testing.TB, n int) []int64
	// children creates one child in each given parent, of the status the
	// filtered count counts, and returns their ids.
	children(t testing.TB, parents []int64) []int64
	// move gives child another parent; a child deleted meanwhile is no
	// error.
	move(child, parent int64) error
	// remove deletes a child: for good if hard (GORM deletes softly by
	// default; ent has no soft delete).
	remove(child int64, hard bool) error
	// removeAllOf deletes every child of parent in one statement.
	removeAllOf(parent int64) error
	// mismatches lists the parents whose loaded counts (live) differ from
	// COUNT(*) over the children.
	mismatches(t testing.TB) []string
	// left is how many children remain.
	left(t testing.TB) int64
	// drift puts the counts of parents off behind their back (raw SQL on
	// what holds them): the count of all children up by 7, the filtered
	// count down by 2.
	drift(t testing.TB, parents []int64)
	// recount runs the ORM's Recount of the count of all children (or of
	// the filtered one), batch parents at a time, and returns how many
	// parents it corrected.
	recount(t testing.TB, filtered bool, batch int) (int64, error)
	// leaveTriggers installs the triggers that keep the scene's counts as
	// an earlier version of the application, whose counts triggers kept,
	// left them on the child table (GORM's AutoMigrate of that version).
	leaveTriggers(t testing.TB)
	// onEnv is the scene's test database; childTable the table of its
	// children.
	onEnv() *env
	childTable() string
	// migrate runs the ORM's migration of the scene's tables again.
	migrate(t testing.TB)
	// alterParent changes a column of the parent table through the ORM's
	// migration (GORM's AutoMigrate; ent's Schema.Create with
	// WithCounters), which on SQLite rebuilds the table.
	alterParent(t testing.TB)
}

// eachCountScene runs fn on every scene, on every database.
func eachCountScene(t *testing.T, fn func(t *testing.T, s countScene)) {
	t.Helper()
	eachCountSceneKeptBy(t, true, true, fn)
}

// eachCountSceneKeptBy runs fn on the scenes whose counts triggers keep
// (triggers), those that hooks keep (hooks), or both, on every database.
func eachCountSceneKeptBy(t *testing.T, triggers, hooks bool, fn func(t *testing.T, s countScene)) {
	t.Helper()
	parallel(t)
	for _, k := range countKinds {
		if k.triggers && !triggers || !k.triggers && !hooks {
			continue
		}
		t.Run("gorm/"+k.name, func(t *testing.T) {
			eachDB(t, func(t *testing.T, e *env) {
				k.migrate(t, e.db)
				fn(t, gormCounts{k: k, e: e})
			}, pool(writersPool))
		})
	}
	for _, byHooks := range []bool{false, true} {
		if byHooks && !hooks || !byHooks && !triggers {
			continue
		}
		name := "ent/triggers"
		if byHooks {
			name = "ent/hooks"
		}
		t.Run(name, func(t *testing.T) {
			parallel(t)
			for _, k := range allKinds {
				t.Run(string(k), func(t *testing.T) {
					var e *entEnv
					if byHooks {
						e = openEnt(t, k, true, pool(writersPool))
					} else {
						e = entCounts(t, k, false)
					}
					fn(t, entCountScene{e: e, hooks: byHooks})
				})
			}
		})
	}
}

type gormCounts struct {
	k countKind
	e *env
}

func (s gormCounts) kind() dbKind { return s.e.kind }

func (s gormCounts) parents(t testing.TB, n int) []int64 {
	return int64s(s.k.newParents(t, s.e.db, n))
}

func (s gormCounts) children(t testing.TB, parents []int64) []int64 {
	owners := make([]*uint, len(parents))
	for i, p := range parents {
		id := uint(p)
		owners[i] = &id
	}
	return int64s(s.k.newChildren(t, s.e.db, owners, "active"))
}

func (s gormCounts) move(child, parent int64) error {
	return s.e.db.Model(s.k.childModel()).Where("id = ?", child).Update(s.k.ref, parent).Error
}

func (s gormCounts) remove(child int64, hard bool) error {
	db := s.e.db
	if hard {
		db = db.Unscoped()
	}
	return db.Delete(s.k.childModel(), child).Error
}

func (s gormCounts) removeAllOf(parent int64) error {
	return s.e.db.Where(s.k.ref+" = ?", parent).Delete(s.k.childModel()).Error
}

func (s gormCounts) mismatches(t testing.TB) []string { return s.k.mismatches(t, s.e.db) }

func (s gormCounts) left(t testing.TB) int64 {
	var n int64
	must(t, s.e.db.Model(s.k.childModel()).Count(&n).Error)
	return n
}

func (s gormCounts) drift(t testing.TB, parents []int64) {
	all, active := s.k.slotTables()
	owner := s.k.ref
	must(t, s.e.db.Exec("UPDATE "+all+" SET n = n + 7 WHERE "+owner+" IN ?", parents).Error)
	must(t, s.e.db.Exec("UPDATE "+active+" SET n = n - 2 WHERE "+owner+" IN ?", parents).Error)
}

func (s gormCounts) recount(t testing.TB, filtered bool, batch int) (int64, error) {
	field := s.k.all
	if filtered {
		field = s.k.active
	}
	return gormcounter.Recount(sharedGorm(t, s.e, gormcounter.Config{RollupBatchSize: batch}).Model(s.k.parent), field)
}

func (s gormCounts) leaveTriggers(t testing.TB) { leaveCountTriggers(t, s.e, s.k.parents) }

func (s gormCounts) migrate(t testing.TB) { s.k.migrate(t, s.e.db) }
func (s gormCounts) onEnv() *env          { return s.e }
func (s gormCounts) childTable() string   { return s.k.children }

func (s gormCounts) alterParent(t testing.TB) {
	if s.k.parents != "categories" {
		t.Fatalf("no other version of %s to migrate to", s.k.parents)
	}
	must(t, s.e.db.AutoMigrate(&CategoryNamed{}))
}

// CategoryNamed is Category as a later version of the application
// declares it: its name required.
type CategoryNamed struct {
	ID          uint
	Name        string   `gorm:"not null;default:''"`
	ObjectCount int64    `gorm:"counter:counts=Objects"`
	ActiveCount int64    `gorm:"counter:slots=4,rollup,counts=Objects,where=status = 'active'"`
	Objects     []Object `gorm:"foreignKey:CategoryID"`
}

func (CategoryNamed) TableName() string { return "categories" }

// leaveCountTriggers migrates, through GORM, the earlier version of the
// parent table (albums or racks) whose counts triggers kept.
func leaveCountTriggers(t testing.TB, e *env, parents string) {
	t.Helper()
	earlier := map[string]any{"albums": &AlbumByTriggers{}, "racks": &RackByTriggers{}}[parents]
	child := map[string]string{"albums": "photos", "racks": "items"}[parents]
	if earlier == nil {
		t.Fatalf("no earlier version of %s keeps its counts by triggers", parents)
	}
	must(t, e.db.AutoMigrate(earlier))
	if n := triggersOn(t, e, child); n == 0 {
		t.Fatalf("the earlier version of %s left no trigger on %s", parents, child)
	}
}

// triggersOn returns how many triggers the table has.
func triggersOn(t testing.TB, e *env, table string) int64 {
	t.Helper()
	switch e.kind {
	case pg:
		return rawInt(t, e.db, "SELECT COUNT(*) FROM pg_trigger WHERE tgrelid = to_regclass(?) AND NOT tgisinternal", table)
	case my:
		return rawInt(t, e.db, "SELECT COUNT(*) FROM information_schema.TRIGGERS WHERE EVENT_OBJECT_SCHEMA = DATABASE() AND EVENT_OBJECT_TABLE = ?", table)
	}
	return rawInt(t, e.db, "SELECT COUNT(*) FROM sqlite_master WHERE type = 'trigger' AND tbl_name = ?", table)
}

// AlbumByTriggers and RackByTriggers are Album and Rack as an earlier
// version of the application declared them, their counts kept by triggers.
type AlbumByTriggers struct {
	ID         uint
	Name       string
	PhotoCount int64   `gorm:"counter:counts=Photos"`
	LiveCount  int64   `gorm:"counter:counts=Photos,where=status = 'active'"`
	Photos     []Photo `gorm:"foreignKey:AlbumID"`
}

func (AlbumByTriggers) TableName() string { return "albums" }

// RackByTriggers: see AlbumByTriggers.
type RackByTriggers struct {
	ID        int
	Name      string `gorm:"not null;default:''"` // as ent declares it
	ItemCount int64  `gorm:"counter:counts=Items"`
	OpenCount int64  `gorm:"counter:slots=4,rollup,counts=Items,where=status = 'open'"`
	Items     []Item `gorm:"foreignKey:RackID"`
}

func (RackByTriggers) TableName() string { return "racks" }

// int64s converts ids.
func int64s[T ~uint | ~int](ids []T) []int64 {
	out := make([]int64, len(ids))
	for i, id := range ids {
		out[i] = int64(id)
	}
	return out
}

type entCountScene struct {
	e     *entEnv
	hooks bool
}

func (s entCountScene) kind() dbKind { return s.e.kind }
func (s entCountScene) onEnv() *env  { return s.e.env }

func (s entCountScene) childTable() string {
	if s.hooks {
		return "items"
	}
	return "books"
}

func (s entCountScene) leaveTriggers(t testing.TB) {
	if !s.hooks {
		t.Fatal("triggers keep this scene's counts already")
	}
	leaveCountTriggers(t, s.e.env, "racks")
}

// alterParent: shelves' name, required in ent's schema, is made
// nullable by GORM's AutoMigrate of Shelf, and required again by ent's
// migration.
func (s entCountScene) alterParent(t testing.TB) {
	if s.hooks {
		t.Fatal("no other version of racks to migrate to")
	}
	must(t, s.e.db.AutoMigrate(&Shelf{}))
	s.migrate(t)
}

func (s entCountScene) migrate(t testing.TB) {
	must(t, entMigrate(context.Background(), s.e.client, entcounter.WithCounters(s.e.client)))
}

// write runs fn on the client, in a transaction of its own where hooks
// keep the counts.
func (s entCountScene) write(fn func(c *ent.Client) error) error {
	if !s.hooks {
		return fn(s.e.client)
	}
	return inTx(context.Background(), s.e.client, func(tx *ent.Tx) error { return fn(tx.Client()) })
}

func (s entCountScene) parents(t testing.TB, n int) []int64 {
	if s.hooks {
		return int64s(newRacks(t, s.e.client, n))
	}
	return int64s(newShelves(t, s.e.client, n))
}

func (s entCountScene) children(t testing.TB, parents []int64) []int64 {
	owners := make([]*int, len(parents))
	for i, p := range parents {
		id := int(p)
		owners[i] = &id
	}
	if s.hooks {
		return int64s(newItems(t, s.e.client, owners, "open"))
	}
	return int64s(newBooks(t, s.e.client, owners, "open"))
}

func (s entCountScene) move(child, parent int64) error {
	ctx := context.Background()
	err := s.write(func(c *ent.Client) error {
		if s.hooks {
			return c.Item.UpdateOneID(int(child)).SetRackID(int(parent)).Exec(ctx)
		}
		return c.Book.UpdateOneID(int(child)).SetShelfID(int(parent)).Exec(ctx)
	})
	if ent.IsNotFound(err) {
		return nil // deleted meanwhile
	}
	return err
}

func (s entCountScene) remove(child int64, _ bool) error {
	return s.delete(item.ID(int(child)), book.ID(int(child)))
}

func (s entCountScene) removeAllOf(parent int64) error {
	return s.delete(item.RackID(int(parent)), book.ShelfID(int(parent)))
}

// delete deletes in one statement the children that the predicate of the
// scene's child type selects.
func (s entCountScene) delete(items predicate.Item, books predicate.Book) error {
	ctx := context.Background()
	return s.write(func(c *ent.Client) error {
		var err error
		if s.hooks {
			_, err = c.Item.Delete().Where(items).Exec(ctx)
		} else {
			_, err = c.Book.Delete().Where(books).Exec(ctx)
		}
		return err
	})
}

func (s entCountScene) mismatches(t testing.TB) []string {
	if s.hooks {
		return rackCountMismatches(t, s.e)
	}
	return entCountMismatches(t, s.e)
}

func (s entCountScene) left(t testing.TB) int64 {
	table := "books"
	if s.hooks {
		table = "items"
	}
	var n int64
	must(t, s.e.db.Table(table).Count(&n).Error)
	return n
}

func (s entCountScene) drift(t testing.TB, parents []int64) {
	// The count of all children sums slot rows; the filtered one is a
	// rollup counter, read from its column.
	slots, owner, parent := "shelf_book_count_slots", "shelf_id", "shelves"
	if s.hooks {
		slots, owner, parent = "rack_item_count_slots", "rack_id", "racks"
	}
	must(t, s.e.db.Exec("UPDATE "+slots+" SET n = n + 7 WHERE "+owner+" IN ?", parents).Error)
	must(t, s.e.db.Exec("UPDATE "+parent+" SET open_count = open_count - 2 WHERE id IN ?", parents).Error)
}

func (s entCountScene) recount(t testing.TB, filtered bool, batch int) (int64, error) {
	c := sharedEnt(s.e)
	if _, err := entcounter.Configure(c, entcounter.Config{RollupBatchSize: batch}); err != nil {
		return 0, err
	}
	typ, field := "Shelf", "book_count"
	if s.hooks {
		typ, field = "Rack", "item_count"
	}
	if filtered {
		field = "open_count"
	}
	return entcounter.Recount(context.Background(), c, typ, field)
}
