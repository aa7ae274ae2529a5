package integration_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/hotcounter/hotcounter/entcounter"
	"github.com/hotcounter/hotcounter/gormcounter"
	"github.com/hotcounter/hotcounter/integration_test/ent"
	"github.com/hotcounter/hotcounter/integration_test/ent/file"
	"github.com/hotcounter/hotcounter/integration_test/ent/folder"
)

// Running totals: a folder's bytes is the total of its files' size, kept
// by triggers on files (counter_culture's delta column).

// Folder adds up its files' sizes.
type Folder struct {
	ID    uint
	Name  string
	Bytes int64  `gorm:"counter:counts=Files,total=size"`
	Files []File `gorm:"foreignKey:FolderID"`
}

// File has a size, which may be NULL (it adds 0).
type File struct {
	ID       uint
	FolderID *uint `gorm:"index"`
	Size     *int64
}

// totalScene is folders and files through one ORM.
type totalScene interface {
	onEnv() *env
	folders(t testing.TB, n int) []int64
	// file creates a file of size in folder and returns its id.
	file(t testing.TB, folder int64, size *int64) int64
	resize(file int64, size *int64) error
	move(file, folder int64) error
	remove(file int64) error
	// loaded returns the folders' bytes as the ORM loads them.
	loaded(t testing.TB) map[int64]int64
	recount(t testing.TB) int64
}

func eachTotalScene(t *testing.T, fn func(t *testing.T, s totalScene)) {
	t.Helper()
	conformanceTest(t)
	parallel(t)
	t.Run("gorm", func(t *testing.T) {
		eachDB(t, func(t *testing.T, e *env) {
			must(t, e.db.AutoMigrate(&Folder{}, &File{}))
			fn(t, gormTotals{e})
		}, pool(writersPool))
	})
	t.Run("ent", func(t *testing.T) {
		parallel(t)
		for _, k := range allKinds {
			t.Run(string(k), func(t *testing.T) {
				e := openEnt(t, k, false, pool(writersPool))
				must(t, entMigrateOnly(context.Background(), e.client, []string{"folders", "files"}, entcounter.WithCounters(e.client)))
				fn(t, entTotals{e})
			})
		}
	})
}

// checkTotals fails t where a folder's loaded bytes differ from the SUM
// of its files' sizes, and returns the sum over every folder.
func checkTotals(t testing.TB, s totalScene, when string) int64 {
	t.Helper()
	var all int64
	for id, got := range s.loaded(t) {
		want := rawInt(t, s.onEnv().db, "SELECT COALESCE(SUM(size), 0) FROM files WHERE folder_id = ?", id)
		if got != want {
			t.Errorf("%s: folder %d: Bytes %d, SUM(size) %d", when, id, got, want)
		}
		all += want
	}
	return all
}

func size(n int64) *int64 { return &n }

func TestRunningTotalsFollowInsertsMovesDeletesAndUpdatesOfTheColumn(t *testing.T) {
	eachTotalScene(t, func(t *testing.T, s totalScene) {
		fs := s.folders(t, 3)
		a := s.file(t, fs[0], size(100))
		b := s.file(t, fs[0], size(20))
		c := s.file(t, fs[1], nil)
		checkTotals(t, s, "created")
		step := func(name string, err error) {
			t.Helper()
			must(t, err)
			checkTotals(t, s, name)
		}
		step("resized", s.resize(a, size(150)))
		step("a NULL size set", s.resize(c, size(7)))
		step("a size set to NULL", s.resize(b, nil))
		step("moved", s.move(a, fs[2]))
		db := s.onEnv().db
		step("raw resize and move at once", db.Exec("UPDATE files SET size = size + 1, folder_id = ? WHERE id = ?", fs[1], a).Error)
		step("raw bulk resize", db.Exec("UPDATE files SET size = 3 WHERE folder_id = ?", fs[1]).Error)
		step("raw insert", db.Exec("INSERT INTO files (folder_id, size) VALUES (?, 40), (?, 2)", fs[2], fs[2]).Error)
		step("deleted", s.remove(c))
		got := s.loaded(t)
		if got[fs[1]] != 3 || got[fs[2]] != 42 {
			t.Fatalf("folders 1 and 2 hold %d and %d bytes, want 3 and 42", got[fs[1]], got[fs[2]])
		}
		must(t, db.Exec("UPDATE folder_bytes_slots SET n = n + 1000 WHERE folder_id = ?", fs[2]).Error)
		if n := s.recount(t); n != 1 {
			t.Fatalf("recount corrected %d folders, want 1", n)
		}
		checkTotals(t, s, "recounted")
	})
}

func TestRunningTotalsStayExactUnderConcurrentResizesAndMoves(t *testing.T) {
	eachTotalScene(t, func(t *testing.T, s totalScene) {
		writers, each := 16, 15
		if s.onEnv().kind == lite {
			writers = 4
		}
		fs := s.folders(t, 4)
		var files []int64
		for i := range writers * 2 {
			files = append(files, s.file(t, fs[i%len(fs)], size(int64(i))))
		}
		var wg sync.WaitGroup
		errs := make(chan error, writers)
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := rand.New(rand.NewPCG(uint64(w), 3))
				mine := files[w*2 : w*2+2]
				for range each {
					f := mine[r.IntN(2)]
					var err error
					if r.IntN(2) == 0 {
						err = s.resize(f, size(int64(r.IntN(1000))))
					} else {
						err = s.move(f, fs[r.IntN(len(fs))])
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
		if total := checkTotals(t, s, "after the writers"); total == 0 {
			t.Fatal("no bytes left to check")
		}
	})
}

type gormTotals struct{ e *env }

func (s gormTotals) onEnv() *env { return s.e }

func (s gormTotals) folders(t testing.TB, n int) []int64 {
	fs := make([]Folder, n)
	for i := range fs {
		fs[i].Name = fmt.Sprint("f", i)
	}
	must(t, s.e.db.Create(&fs).Error)
	ids := make([]int64, n)
	for i, f := range fs {
		ids[i] = int64(f.ID)
	}
	return ids
}

func (s gormTotals) file(t testing.TB, folder int64, size *int64) int64 {
	id := uint(folder)
	f := File{FolderID: &id, Size: size}
	must(t, s.e.db.Create(&f).Error)
	return int64(f.ID)
}

func (s gormTotals) resize(file int64, size *int64) error {
	return s.e.db.Model(&File{ID: uint(file)}).Update("size", size).Error
}

func (s gormTotals) move(file, folder int64) error {
	return s.e.db.Model(&File{ID: uint(file)}).Update("folder_id", folder).Error
}

func (s gormTotals) remove(file int64) error { return s.e.db.Delete(&File{}, file).Error }

func (s gormTotals) loaded(t testing.TB) map[int64]int64 {
	var fs []Folder
	must(t, s.e.db.Find(&fs).Error)
	out := map[int64]int64{}
	for _, f := range fs {
		out[int64(f.ID)] = f.Bytes
	}
	return out
}

func (s gormTotals) recount(t testing.TB) int64 {
	n, err := gormcounter.Recount(s.e.db.Model(&Folder{}), "Bytes")
	must(t, err)
	return n
}

type entTotals struct{ e *entEnv }

func (s entTotals) onEnv() *env { return s.e.env }

func (s entTotals) folders(t testing.TB, n int) []int64 {
	bs := make([]*ent.FolderCreate, n)
	for i := range bs {
		bs[i] = s.e.client.Folder.Create().SetName(fmt.Sprint("f", i))
	}
	got, err := s.e.client.Folder.CreateBulk(bs...).Save(context.Background())
	must(t, err)
	ids := make([]int64, n)
	for i, f := range got {
		ids[i] = int64(f.ID)
	}
	return ids
}

func (s entTotals) file(t testing.TB, folder int64, size *int64) int64 {
	f, err := s.e.client.File.Create().SetFolderID(int(folder)).SetNillableSize(size).Save(context.Background())
	must(t, err)
	return int64(f.ID)
}

func (s entTotals) resize(id int64, size *int64) error {
	u := s.e.client.File.UpdateOneID(int(id))
	if size == nil {
		u.ClearSize()
	} else {
		u.SetSize(*size)
	}
	return u.Exec(context.Background())
}

func (s entTotals) move(id, folder int64) error {
	return s.e.client.File.UpdateOneID(int(id)).SetFolderID(int(folder)).Exec(context.Background())
}

func (s entTotals) remove(id int64) error {
	_, err := s.e.client.File.Delete().Where(file.ID(int(id))).Exec(context.Background())
	return err
}

func (s entTotals) loaded(t testing.TB) map[int64]int64 {
	fs, err := s.e.client.Folder.Query().All(context.Background())
	must(t, err)
	out := map[int64]int64{}
	for _, f := range fs {
		out[int64(f.ID)] = f.Bytes
	}
	return out
}

func (s entTotals) recount(t testing.TB) int64 {
	n, err := entcounter.Recount(context.Background(), s.e.client, "Folder", folder.FieldBytes)
	must(t, err)
	return n
}

func TestAutoMigrateOfANewDatabaseReportsNoCountTriggerMissing(t *testing.T) {
	// GORM's AutoMigrate creates a parent and then its child or join table,
	// each on its own: the triggers installed after the child's creation
	// were never missing, and no row went uncounted. Triggers dropped
	// behind the migration's back are, and the next one says so.
	eachDB(t, func(t *testing.T, e *env) {
		db := e.db
		must(t, db.AutoMigrate(&Folder{}, &File{}, &Conversation{}, &Label{}, &Article{}, &Video{}, &Remark{}, &Section{}, &Page{}))
		missing := func() []string {
			var out []string
			for _, w := range e.log.warned() {
				if strings.Contains(w, "were missing") {
					out = append(out, w)
				}
			}
			return out
		}
		if m := missing(); len(m) > 0 {
			t.Fatalf("the migration of a new database reported missing triggers: %q", m)
		}
		folder := Folder{Name: "f"}
		must(t, db.Create(&folder).Error)
		for _, op := range []string{"ins", "upd", "del"} {
			stmt := "DROP TRIGGER IF EXISTS hc_folder_bytes_slots_" + op
			if e.kind == pg {
				stmt += " ON files"
			}
			must(t, db.Exec(stmt).Error)
		}
		must(t, db.Exec("INSERT INTO files (folder_id, size) VALUES (?, 64)", folder.ID).Error)
		must(t, db.AutoMigrate(&Folder{}, &File{}))
		if m := missing(); len(m) != 1 || !strings.Contains(m[0], "Folder.Bytes") {
			t.Fatalf("after its triggers were dropped, the migration reported %q; want one warning for Folder.Bytes", m)
		}
		var got Folder
		must(t, db.First(&got, folder.ID).Error)
		if got.Bytes != 64 {
			t.Fatalf("folder holds %d bytes after the repair, want the 64 written without triggers", got.Bytes)
		}
	})
}
