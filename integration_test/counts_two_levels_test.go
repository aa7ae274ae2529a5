package integration_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/hotcounter/hotcounter/entcounter"
	"github.com/hotcounter/hotcounter/gormcounter"
	"github.com/hotcounter/hotcounter/integration_test/ent/page"
	"github.com/hotcounter/hotcounter/integration_test/ent/section"
)

// Counts over two levels of relations: a section counts the pages of its
// sub-sections (counter_culture's multi-level counter cache), kept by
// triggers on pages and on sections.

// Section counts the pages of its sub-sections.
type Section struct {
	ID        uint
	Name      string
	ParentID  *uint     `gorm:"index"`
	Children  []Section `gorm:"foreignKey:ParentID;constraint:OnDelete:SET NULL"`
	Pages     []Page    `gorm:"constraint:OnDelete:SET NULL"`
	PageCount int64     `gorm:"counter:counts=Children.Pages"`
}

// Page belongs to a section.
type Page struct {
	ID        uint
	SectionID *uint `gorm:"index"`
}

// levelScene is sections and pages through one ORM.
type levelScene interface {
	onEnv() *env
	// section creates a section under parent (0: none) and returns its id.
	section(t testing.TB, parent int64) int64
	// page creates a page in section and returns its id; tryPage returns
	// the error instead.
	page(t testing.TB, section int64) int64
	tryPage(section int64) (int64, error)
	movePage(page, section int64) error
	moveSection(section, parent int64) error
	deletePage(page int64) error
	deleteSection(section int64) error
	// loaded returns the sections' page counts as the ORM loads them.
	loaded(t testing.TB) map[int64]int64
	recount(t testing.TB) int64
}

func eachLevelScene(t *testing.T, fn func(t *testing.T, s levelScene)) {
	t.Helper()
	conformanceTest(t)
	parallel(t)
	t.Run("gorm", func(t *testing.T) {
		eachDB(t, func(t *testing.T, e *env) {
			must(t, e.db.AutoMigrate(&Section{}, &Page{}))
			fn(t, gormLevels{e})
		}, pool(writersPool))
	})
	t.Run("ent", func(t *testing.T) {
		parallel(t)
		for _, k := range allKinds {
			t.Run(string(k), func(t *testing.T) {
				e := openEnt(t, k, false, pool(writersPool))
				must(t, entMigrateOnly(context.Background(), e.client, []string{"sections", "pages"}, entcounter.WithCounters(e.client)))
				fn(t, entLevels{e})
			})
		}
	})
}

// checkLevels fails t where a section's loaded count differs from the
// pages of its sub-sections, counted by a join.
func checkLevels(t testing.TB, s levelScene, when string) map[int64]int64 {
	t.Helper()
	got := s.loaded(t)
	for id, n := range got {
		want := rawInt(t, s.onEnv().db, "SELECT COUNT(*) FROM pages p JOIN sections s ON s.id = p.section_id WHERE s.parent_id = ?", id)
		if n != want {
			t.Errorf("%s: section %d: PageCount %d, pages of its sub-sections %d", when, id, n, want)
		}
	}
	return got
}

func TestCountsOverTwoLevelsFollowMovesOfTheRowsAndOfTheMiddleRows(t *testing.T) {
	eachLevelScene(t, func(t *testing.T, s levelScene) {
		a, b := s.section(t, 0), s.section(t, 0)
		a1, a2, b1 := s.section(t, a), s.section(t, a), s.section(t, b)
		var pages []int64
		for _, sec := range []int64{a1, a1, a1, a2, a2, b1, a} {
			pages = append(pages, s.page(t, sec))
		}
		step := func(name string, err error) map[int64]int64 {
			t.Helper()
			must(t, err)
			return checkLevels(t, s, name)
		}
		if got := step("created", nil); got[a] != 5 || got[b] != 1 {
			t.Fatalf("sections a and b count %d and %d pages, want 5 and 1 (a's own page is not a sub-section's)", got[a], got[b])
		}
		step("a page moved to another top section's sub-section", s.movePage(pages[0], b1))
		if got := step("a sub-section moved to another parent", s.moveSection(a2, b)); got[a] != 2 || got[b] != 4 {
			t.Fatalf("after the moves sections a and b count %d and %d pages, want 2 and 4", got[a], got[b])
		}
		db := s.onEnv().db
		step("raw insert of a page", db.Exec("INSERT INTO pages (section_id) VALUES (?)", a1).Error)
		step("raw move of a sub-section", db.Exec("UPDATE sections SET parent_id = ? WHERE id = ?", a, b1).Error)
		step("a sub-section made a top section", db.Exec("UPDATE sections SET parent_id = NULL WHERE id = ?", a2).Error)
		step("a page deleted", s.deletePage(pages[1]))
		if got := step("a sub-section deleted", s.deleteSection(a1)); got[a] != 2 {
			t.Fatalf("after deleting a1, section a counts %d pages, want b1's 2", got[a])
		}
		must(t, db.Exec("UPDATE section_page_count_slots SET n = n + 9 WHERE section_id = ?", a).Error)
		if n := s.recount(t); n != 1 {
			t.Fatalf("recount corrected %d sections, want 1", n)
		}
		step("recounted", nil)
	})
}

func TestCountsOverTwoLevelsStayExactWhileMiddleRowsMoveUnderWrites(t *testing.T) {
	// Pages written under sub-sections while the sub-sections move between
	// top sections: a page written under a sub-section whose move has not
	// committed must end under the parent the move commits.
	eachLevelScene(t, func(t *testing.T, s levelScene) {
		writers, each := 12, 20
		if s.onEnv().kind == lite {
			writers = 4
		}
		tops := []int64{s.section(t, 0), s.section(t, 0), s.section(t, 0)}
		var subs []int64
		for i := range 6 {
			subs = append(subs, s.section(t, tops[i%3]))
		}
		var wg sync.WaitGroup
		errs := make(chan error, writers)
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := rand.New(rand.NewPCG(uint64(w), 5))
				var mine []int64
				for range each {
					var err error
					switch op := r.IntN(4); {
					case op == 0 || len(mine) == 0:
						var id int64
						id, err = s.tryPage(subs[r.IntN(len(subs))])
						mine = append(mine, id)
					case op == 1:
						err = s.movePage(mine[r.IntN(len(mine))], subs[r.IntN(len(subs))])
					case op == 2:
						err = s.moveSection(subs[r.IntN(len(subs))], tops[r.IntN(len(tops))])
					default:
						i := r.IntN(len(mine))
						err = s.deletePage(mine[i])
						mine = append(mine[:i], mine[i+1:]...)
					}
					if err != nil {
						errs <- fmt.Errorf("writer %d: %w", w, err)
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		got := checkLevels(t, s, "after the writers")
		var all int64
		for _, top := range tops {
			all += got[top]
		}
		if all == 0 {
			t.Fatal("no pages under the top sections to check")
		}
	})
}

type gormLevels struct{ e *env }

func (s gormLevels) onEnv() *env { return s.e }

func (s gormLevels) section(t testing.TB, parent int64) int64 {
	sec := Section{Name: "s"}
	if parent != 0 {
		p := uint(parent)
		sec.ParentID = &p
	}
	must(t, s.e.db.Create(&sec).Error)
	return int64(sec.ID)
}

func (s gormLevels) page(t testing.TB, section int64) int64 {
	id, err := s.tryPage(section)
	must(t, err)
	return id
}

func (s gormLevels) tryPage(section int64) (int64, error) {
	id := uint(section)
	p := Page{SectionID: &id}
	err := s.e.db.Create(&p).Error
	return int64(p.ID), err
}

func (s gormLevels) movePage(p, section int64) error {
	return s.e.db.Model(&Page{ID: uint(p)}).Update("section_id", section).Error
}

func (s gormLevels) moveSection(sec, parent int64) error {
	return s.e.db.Model(&Section{ID: uint(sec)}).Update("parent_id", parent).Error
}

func (s gormLevels) deletePage(p int64) error { return s.e.db.Delete(&Page{}, p).Error }

func (s gormLevels) deleteSection(sec int64) error { return s.e.db.Delete(&Section{}, sec).Error }

func (s gormLevels) loaded(t testing.TB) map[int64]int64 {
	var ss []Section
	must(t, s.e.db.Find(&ss).Error)
	out := map[int64]int64{}
	for _, sec := range ss {
		out[int64(sec.ID)] = sec.PageCount
	}
	return out
}

func (s gormLevels) recount(t testing.TB) int64 {
	n, err := gormcounter.Recount(s.e.db.Model(&Section{}), "PageCount")
	must(t, err)
	return n
}

type entLevels struct{ e *entEnv }

func (s entLevels) onEnv() *env { return s.e.env }

func (s entLevels) section(t testing.TB, parent int64) int64 {
	c := s.e.client.Section.Create().SetName("s")
	if parent != 0 {
		c.SetParentID(int(parent))
	}
	sec, err := c.Save(context.Background())
	must(t, err)
	return int64(sec.ID)
}

func (s entLevels) page(t testing.TB, section int64) int64 {
	id, err := s.tryPage(section)
	must(t, err)
	return id
}

func (s entLevels) tryPage(section int64) (int64, error) {
	p, err := s.e.client.Page.Create().SetSectionID(int(section)).Save(context.Background())
	if err != nil {
		return 0, err
	}
	return int64(p.ID), nil
}

func (s entLevels) movePage(p, section int64) error {
	return s.e.client.Page.UpdateOneID(int(p)).SetSectionID(int(section)).Exec(context.Background())
}

func (s entLevels) moveSection(sec, parent int64) error {
	return s.e.client.Section.UpdateOneID(int(sec)).SetParentID(int(parent)).Exec(context.Background())
}

func (s entLevels) deletePage(p int64) error {
	_, err := s.e.client.Page.Delete().Where(page.ID(int(p))).Exec(context.Background())
	return err
}

func (s entLevels) deleteSection(sec int64) error {
	_, err := s.e.client.Section.Delete().Where(section.ID(int(sec))).Exec(context.Background())
	return err
}

func (s entLevels) loaded(t testing.TB) map[int64]int64 {
	ss, err := s.e.client.Section.Query().All(context.Background())
	must(t, err)
	out := map[int64]int64{}
	for _, sec := range ss {
		out[int64(sec.ID)] = sec.PageCount
	}
	return out
}

func (s entLevels) recount(t testing.TB) int64 {
	n, err := entcounter.Recount(context.Background(), s.e.client, "Section", section.FieldPageCount)
	must(t, err)
	return n
}
