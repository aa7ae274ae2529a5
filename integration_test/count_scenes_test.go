package integration_test

import (
	"context"
	"reflect"
	"testing"

	"gorm.io/gorm"

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
	// create creates, in one statement, one child in each given parent
	// (nil: none), of the status the filtered count counts (counted) or
	// another, and returns their ids.
	create(t testing.TB, parents []*int64, counted bool) []int64
	// unparent takes child out of its parent.
	unparent(child int64) error
	// moveAll gives every child of from the parent to, in one statement.
	moveAll(from, to int64) error
	// setStatus gives every child of parent the counted status or
	// another, in one statement.
	setStatus(parent int64, counted bool) error
	// insertRaw inserts n children of parent, of the counted status, with
	// raw SQL.
	insertRaw(t testing.TB, parent int64, n int)
	// byTriggers says whether triggers keep the counts (and so count what
	// raw SQL writes).
	byTriggers() bool
	// incrementCount increments parent's count of all children as a
	// counter is incremented (gormcounter.Increment, ent's AddX); name is
	// how the error names that count.
	incrementCount(parent int64) error
	countName() string
	// openTx opens a transaction of the ORM on a session where a lock
	// wait fails (noWaitSession) and returns add, which adds a counted
	// child to parent inside it (raw SQL where triggers keep the counts,
	// the ORM's create where hooks do), and its commit and rollback.
	openTx(t testing.TB) (add func(parent int64) error, commit func() error, rollback func())
	// legacyCount makes the count of all children what it was before it
	// was declared: its slot table dropped, and a plain column of its name
	// on the parent table, holding value for every parent (ent's client is
	// opened again, as a new process). countColumn and parentTable name
	// that column and its table.
	legacyCount(t testing.TB, value int64)
	countColumn() string
	parentTable() string
}

// eachCountScene runs fn on every scene, on every database.
func eachCountScene(t *testing.T, fn func(t *testing.T, s countScene)) {
	t.Helper()
	eachCountSceneKeptBy(t, true, true, fn)
}

// eachCountSceneKeptBy runs fn on the scenes whose counts triggers keep
// (triggers), those that hooks keep (hooks), or both, on every database
// (or those that opts name with on).
func eachCountSceneKeptBy(t *testing.T, triggers, hooks bool, fn func(t *testing.T, s countScene), opts ...option) {
	t.Helper()
	conformanceTest(t)
	parallel(t)
	o := openOptions{kinds: allKinds}
	for _, opt := range opts {
		opt(&o)
	}
	for _, k := range countKinds {
		if k.triggers && !triggers || !k.triggers && !hooks {
			continue
		}
		t.Run("gorm/"+k.name, func(t *testing.T) {
			eachDB(t, func(t *testing.T, e *env) {
				k.migrate(t, e.db)
				fn(t, gormCounts{k: k, e: e})
			}, append([]option{pool(writersPool)}, opts...)...)
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
			for _, k := range o.kinds {
				t.Run(string(k), func(t *testing.T) {
					var e *entEnv
					if byHooks {
						e = openEnt(t, k, true, pool(writersPool), entTables("racks", "items"))
					} else {
						e = entCounts(t, k)
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
	return s.create(t, pointers(parents), true)
}

func (s gormCounts) create(t testing.TB, parents []*int64, counted bool) []int64 {
	owners := make([]*uint, len(parents))
	for i, p := range parents {
		if p != nil {
			id := uint(*p)
			owners[i] = &id
		}
	}
	return int64s(s.k.newChildren(t, s.e.db, owners, s.status(counted)))
}

// status is the value of the children's status column that the filtered
// count counts, or another.
func (gormCounts) status(counted bool) string {
	if counted {
		return "active"
	}
	return "draft"
}

func (s gormCounts) unparent(child int64) error {
	return s.e.db.Model(s.k.childModel()).Where("id = ?", child).Update(s.k.ref, nil).Error
}

func (s gormCounts) moveAll(from, to int64) error {
	return s.e.db.Model(s.k.childModel()).Where(s.k.ref+" = ?", from).Update(s.k.ref, to).Error
}

func (s gormCounts) setStatus(parent int64, counted bool) error {
	return s.e.db.Model(s.k.childModel()).Where(s.k.ref+" = ?", parent).Update("status", s.status(counted)).Error
}

func (s gormCounts) insertRaw(t testing.TB, parent int64, n int) {
	for range n {
		must(t, s.e.db.Exec("INSERT INTO "+s.k.children+" ("+s.k.ref+", status) VALUES (?, 'active')", parent).Error)
	}
}

func (s gormCounts) byTriggers() bool { return s.k.triggers }

func (s gormCounts) incrementCount(parent int64) error {
	return gormcounter.Increment(s.e.db.Model(s.k.parent).Where("id = ?", parent), s.k.all, 1).Error
}

func (s gormCounts) openTx(t testing.TB) (add func(parent int64) error, commit func() error, rollback func()) {
	tx := s.e.db.Session(&gorm.Session{NewDB: true}).Begin()
	must(t, tx.Error)
	must(t, noWaitSession(tx))
	add = func(parent int64) error {
		if s.k.triggers {
			return tx.Exec("INSERT INTO "+s.k.children+" ("+s.k.ref+", status) VALUES (?, 'active')", parent).Error
		}
		p := uint(parent)
		return tx.Create(&Photo{AlbumID: &p, Status: "active"}).Error
	}
	return add, func() error { return tx.Commit().Error }, func() { tx.Rollback() }
}

func (s gormCounts) legacyCount(t testing.TB, value int64) {
	all, _ := s.k.slotTables()
	legacyCountColumn(t, s, all, value)
}

func (s gormCounts) countColumn() string {
	return s.e.db.NamingStrategy.ColumnName("", s.k.all)
}

func (s gormCounts) parentTable() string { return s.k.parents }

func (s gormCounts) countName() string {
	return reflect.TypeOf(s.k.parent).Elem().Name() + "." + s.k.all
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
// pointers returns a pointer to each id.
func pointers(ids []int64) []*int64 {
	out := make([]*int64, len(ids))
	for i := range ids {
		out[i] = &ids[i]
	}
	return out
}

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
	must(t, entMigrateOnly(context.Background(), s.e.client, s.e.entRoots, entcounter.WithCounters(s.e.client)))
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
	return s.create(t, pointers(parents), true)
}

func (s entCountScene) create(t testing.TB, parents []*int64, counted bool) []int64 {
	owners := make([]*int, len(parents))
	for i, p := range parents {
		if p != nil {
			id := int(*p)
			owners[i] = &id
		}
	}
	if s.hooks {
		return int64s(newItems(t, s.e.client, owners, s.status(counted)))
	}
	return int64s(newBooks(t, s.e.client, owners, s.status(counted)))
}

// status is the value of the children's status column that the filtered
// count counts, or another.
func (entCountScene) status(counted bool) string {
	if counted {
		return "open"
	}
	return "draft"
}

func (s entCountScene) unparent(child int64) error {
	ctx := context.Background()
	return s.write(func(c *ent.Client) error {
		if s.hooks {
			return c.Item.UpdateOneID(int(child)).ClearRackID().Exec(ctx)
		}
		return c.Book.UpdateOneID(int(child)).ClearShelfID().Exec(ctx)
	})
}

func (s entCountScene) moveAll(from, to int64) error {
	ctx := context.Background()
	return s.write(func(c *ent.Client) error {
		var err error
		if s.hooks {
			_, err = c.Item.Update().Where(item.RackID(int(from))).SetRackID(int(to)).Save(ctx)
		} else {
			_, err = c.Book.Update().Where(book.ShelfID(int(from))).SetShelfID(int(to)).Save(ctx)
		}
		return err
	})
}

func (s entCountScene) setStatus(parent int64, counted bool) error {
	ctx := context.Background()
	return s.write(func(c *ent.Client) error {
		var err error
		if s.hooks {
			_, err = c.Item.Update().Where(item.RackID(int(parent))).SetStatus(s.status(counted)).Save(ctx)
		} else {
			_, err = c.Book.Update().Where(book.ShelfID(int(parent))).SetStatus(s.status(counted)).Save(ctx)
		}
		return err
	})
}

func (s entCountScene) insertRaw(t testing.TB, parent int64, n int) {
	ref := "shelf_id"
	if s.hooks {
		ref = "rack_id"
	}
	for range n {
		must(t, s.e.db.Exec("INSERT INTO "+s.childTable()+" ("+ref+", status) VALUES (?, 'open')", parent).Error)
	}
}

func (s entCountScene) byTriggers() bool { return !s.hooks }

func (s entCountScene) incrementCount(parent int64) error {
	ctx := context.Background()
	if s.hooks {
		return s.e.client.Rack.UpdateOneID(int(parent)).AddItemCount(1).Exec(ctx)
	}
	return s.e.client.Shelf.UpdateOneID(int(parent)).AddBookCount(1).Exec(ctx)
}

func (s entCountScene) openTx(t testing.TB) (add func(parent int64) error, commit func() error, rollback func()) {
	ctx := context.Background()
	tx, err := s.e.client.Tx(ctx)
	must(t, err)
	must(t, tx.HotCounter().Driver.Exec(ctx, noWaitSQL(dialectName(s.e.kind)), []any{}, nil))
	add = func(parent int64) error {
		if s.hooks {
			return tx.Item.Create().SetRackID(int(parent)).SetStatus("open").Exec(ctx)
		}
		arg := "?"
		if s.e.kind == pg {
			arg = "$1"
		}
		return tx.HotCounter().Driver.Exec(ctx, "INSERT INTO books (shelf_id, status) VALUES ("+arg+", 'open')", []any{parent}, nil)
	}
	return add, tx.Commit, func() { tx.Rollback() }
}

func (s entCountScene) legacyCount(t testing.TB, value int64) {
	slots := "shelf_book_count_slots"
	if s.hooks {
		slots = "rack_item_count_slots"
	}
	legacyCountColumn(t, s, slots, value)
	s.e.client = reopenEnt(t, s.e) // the new version's process: nothing learned yet
}

func (s entCountScene) countColumn() string {
	if s.hooks {
		return "item_count"
	}
	return "book_count"
}

func (s entCountScene) parentTable() string {
	if s.hooks {
		return "racks"
	}
	return "shelves"
}

func (s entCountScene) countName() string {
	if s.hooks {
		return "Rack.item_count"
	}
	return "Shelf.book_count"
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

// legacyCountColumn drops slots, the slot table of s's count of all
// children, and adds its plain column to the parent table, holding value
// in every row.
func legacyCountColumn(t testing.TB, s countScene, slots string, value int64) {
	db := s.onEnv().db
	must(t, db.Exec("DROP TABLE "+slots).Error)
	must(t, db.Exec("ALTER TABLE "+s.parentTable()+" ADD COLUMN "+s.countColumn()+" BIGINT NOT NULL DEFAULT 0").Error)
	must(t, db.Exec("UPDATE "+s.parentTable()+" SET "+s.countColumn()+" = ?", value).Error)
}
