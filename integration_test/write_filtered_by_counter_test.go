package integration_test

import (
	"context"
	"sort"
	"testing"

	"github.com/hotcounter/hotcounter/entcounter"
	"github.com/hotcounter/hotcounter/gormcounter"
	"github.com/hotcounter/hotcounter/integration_test/ent"
	"github.com/hotcounter/hotcounter/integration_test/ent/shelf"
	"github.com/hotcounter/hotcounter/integration_test/ent/tag"
)

// filteredWrites is what the test does with tags and shelves in either
// ORM: updates and deletes whose condition reads a sum counter (Tag.uses)
// or a count (Shelf.book_count), which have no column.
type filteredWrites interface {
	tag(t *testing.T, name string, uses int64) int
	shelf(t *testing.T, books int) int
	renameTagsUsedAtLeast(t *testing.T, uses int64, name string) int
	renameTagUsedAtLeast(t *testing.T, id int, uses int64, name string) (found bool)
	deleteTagsUsedLessThan(t *testing.T, uses int64) int
	renameShelvesWithFewerBooks(t *testing.T, books int64, name string) int
	deleteShelvesWithFewerBooks(t *testing.T, books int64) int
	tagNames(t *testing.T) []string
	shelfNames(t *testing.T) []string
}

type gormFiltered struct{ e *env }

func (g gormFiltered) tag(t *testing.T, name string, uses int64) int {
	tg := Tag{Name: name}
	must(t, g.e.db.Create(&tg).Error)
	if uses > 0 {
		must(t, gormcounter.Increment(g.e.db.Model(&Tag{ID: tg.ID}), "Uses", uses).Error)
	}
	return int(tg.ID)
}

func (g gormFiltered) shelf(t *testing.T, books int) int {
	s := Shelf{}
	for range books {
		s.Books = append(s.Books, Book{})
	}
	must(t, g.e.db.Create(&s).Error)
	return s.ID
}

func (g gormFiltered) renameTagsUsedAtLeast(t *testing.T, uses int64, name string) int {
	res := g.e.db.Model(&Tag{}).Where("uses >= ?", uses).Update("name", name)
	must(t, res.Error)
	return int(res.RowsAffected)
}

func (g gormFiltered) renameTagUsedAtLeast(t *testing.T, id int, uses int64, name string) bool {
	res := g.e.db.Model(&Tag{ID: uint(id)}).Where("uses >= ?", uses).Update("name", name)
	must(t, res.Error)
	return res.RowsAffected == 1
}

func (g gormFiltered) deleteTagsUsedLessThan(t *testing.T, uses int64) int {
	res := g.e.db.Where("uses < ?", uses).Delete(&Tag{})
	must(t, res.Error)
	return int(res.RowsAffected)
}

func (g gormFiltered) renameShelvesWithFewerBooks(t *testing.T, books int64, name string) int {
	res := g.e.db.Model(&Shelf{}).Where("book_count < ?", books).Update("name", name)
	must(t, res.Error)
	return int(res.RowsAffected)
}

func (g gormFiltered) deleteShelvesWithFewerBooks(t *testing.T, books int64) int {
	res := g.e.db.Where("book_count < ?", books).Delete(&Shelf{})
	must(t, res.Error)
	return int(res.RowsAffected)
}

func (g gormFiltered) tagNames(t *testing.T) []string {
	var names []string
	must(t, g.e.db.Model(&Tag{}).Order("name").Pluck("name", &names).Error)
	return names
}

func (g gormFiltered) shelfNames(t *testing.T) []string {
	var names []string
	must(t, g.e.db.Model(&Shelf{}).Order("name").Pluck("name", &names).Error)
	return names
}

type entFiltered struct{ c *ent.Client }

func (w entFiltered) tag(t *testing.T, name string, uses int64) int {
	return w.c.Tag.Create().SetName(name).SetUses(uses).SaveX(context.Background()).ID
}

func (w entFiltered) shelf(t *testing.T, books int) int {
	ctx := context.Background()
	s := w.c.Shelf.Create().SaveX(ctx)
	for range books {
		w.c.Book.Create().SetShelfID(s.ID).ExecX(ctx)
	}
	return s.ID
}

func (w entFiltered) renameTagsUsedAtLeast(t *testing.T, uses int64, name string) int {
	return w.c.Tag.Update().Where(tag.UsesGTE(uses)).SetName(name).SaveX(context.Background())
}

func (w entFiltered) renameTagUsedAtLeast(t *testing.T, id int, uses int64, name string) bool {
	err := w.c.Tag.UpdateOneID(id).Where(tag.UsesGTE(uses)).SetName(name).Exec(context.Background())
	if ent.IsNotFound(err) {
		return false
	}
	must(t, err)
	return true
}

func (w entFiltered) deleteTagsUsedLessThan(t *testing.T, uses int64) int {
	return w.c.Tag.Delete().Where(tag.UsesLT(uses)).ExecX(context.Background())
}

func (w entFiltered) renameShelvesWithFewerBooks(t *testing.T, books int64, name string) int {
	return w.c.Shelf.Update().Where(shelf.BookCountLT(books)).SetName(name).SaveX(context.Background())
}

func (w entFiltered) deleteShelvesWithFewerBooks(t *testing.T, books int64) int {
	return w.c.Shelf.Delete().Where(shelf.BookCountLT(books)).ExecX(context.Background())
}

func (w entFiltered) tagNames(t *testing.T) []string {
	names := w.c.Tag.Query().Select(tag.FieldName).StringsX(context.Background())
	sort.Strings(names)
	return names
}

func (w entFiltered) shelfNames(t *testing.T) []string {
	names := w.c.Shelf.Query().Select(shelf.FieldName).StringsX(context.Background())
	sort.Strings(names)
	return names
}

// TestUpdatesAndDeletesFilteredByACounter: an update or delete whose
// condition reads a sum counter or a count, which have no column, writes
// exactly the rows whose value matches, whatever else it sets: a bulk
// update, an update of one row by id (not found when its value does not
// match), a bulk delete. Both ORMs, every database.
func TestUpdatesAndDeletesFilteredByACounter(t *testing.T) {
	parallel(t)
	walk := func(t *testing.T, f filteredWrites) {
		hot, warm := f.tag(t, "hot", 30), f.tag(t, "warm", 5)
		f.tag(t, "cold", 0)
		if n := f.renameTagsUsedAtLeast(t, 24, "popular"); n != 1 {
			t.Errorf("renaming the tags used at least 24 times wrote %d rows, want 1", n)
		}
		if f.renameTagUsedAtLeast(t, warm, 24, "popular too") {
			t.Error("renaming a tag used 5 times where it was used at least 24 times wrote it")
		}
		if !f.renameTagUsedAtLeast(t, hot, 24, "viral") {
			t.Error("renaming a tag used 30 times where it was used at least 24 times found none")
		}
		if n := f.deleteTagsUsedLessThan(t, 1); n != 1 {
			t.Errorf("deleting the tags never used deleted %d rows, want 1", n)
		}
		if got := f.tagNames(t); len(got) != 2 || got[0] != "viral" || got[1] != "warm" {
			t.Errorf("tags left %v, want [viral warm]", got)
		}
		f.shelf(t, 2)
		f.shelf(t, 0)
		if n := f.renameShelvesWithFewerBooks(t, 1, "empty"); n != 1 {
			t.Errorf("renaming the shelves without books wrote %d rows, want 1", n)
		}
		if got := f.shelfNames(t); len(got) != 2 || got[0] != "" || got[1] != "empty" {
			t.Errorf("shelf names %q, want one renamed", got)
		}
		if n := f.deleteShelvesWithFewerBooks(t, 1); n != 1 {
			t.Errorf("deleting the shelves without books deleted %d rows, want 1", n)
		}
		if got := f.shelfNames(t); len(got) != 1 || got[0] != "" {
			t.Errorf("shelves left %q, want the one with books", got)
		}
	}
	t.Run("gorm", func(t *testing.T) {
		eachDB(t, func(t *testing.T, e *env) {
			must(t, e.db.AutoMigrate(&Tag{}, &Shelf{}, &Book{}))
			walk(t, gormFiltered{e: e})
		})
	})
	t.Run("ent", func(t *testing.T) {
		eachDB(t, func(t *testing.T, e *env) {
			ee := withEnt(t, e, false)
			must(t, entMigrateOnly(context.Background(), ee.client, []string{"tags", "shelves", "books"}, entcounter.WithCounters(ee.client)))
			walk(t, entFiltered{c: ee.client})
		})
	})
}

// TestGroupByACounterWithHaving: GORM's Group on a sum counter with a
// Having on it returns the groups whose value passes, and a Having that
// sums the counter over groups of another expression too, on every
// database.
func TestGroupByACounterWithHaving(t *testing.T) {
	eachDB(t, func(t *testing.T, e *env) {
		must(t, e.db.AutoMigrate(&Tag{}))
		for i, uses := range []int64{90, 90, 80, 10} {
			tg := Tag{Name: string(rune('a' + i))}
			must(t, e.db.Create(&tg).Error)
			must(t, gormcounter.Increment(e.db.Model(&Tag{ID: tg.ID}), "Uses", uses).Error)
		}
		var groups []struct{ Uses, N int64 }
		must(t, e.db.Model(&Tag{}).Select("uses, COUNT(*) AS n").Group("uses").Having("uses >= ?", 80).Order("uses").Scan(&groups).Error)
		if len(groups) != 2 || groups[0].Uses != 80 || groups[0].N != 1 || groups[1].Uses != 90 || groups[1].N != 2 {
			t.Fatalf("groups of tags used at least 80 times: %+v, want 80: 1 and 90: 2", groups)
		}
		// Grouped by another expression, Having may sum the counter.
		var totals []struct{ L, Total int64 }
		must(t, e.db.Model(&Tag{}).Select("LENGTH(name) AS l, SUM(uses) AS total").Group("LENGTH(name)").Having("SUM(uses) > ?", 100).Scan(&totals).Error)
		if len(totals) != 1 || totals[0].Total != 270 {
			t.Fatalf("groups by name length whose uses add up past 100: %+v, want one of 270", totals)
		}
	})
}
