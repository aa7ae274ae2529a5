package integration_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/hotcounter/hotcounter/entcounter"
	"github.com/hotcounter/hotcounter/integration_test/ent"
)

// entCounts opens ent on a fresh database where shelves count books: the
// migration of shelves and books (and what they need) installs the count
// triggers (WithCounters).
func entCounts(t testing.TB, kind dbKind) *entEnv {
	t.Helper()
	e := openEnt(t, kind, false, pool(writersPool), entTables("shelves", "books"))
	must(t, entMigrateOnly(context.Background(), e.client, e.entRoots, entcounter.WithCounters(e.client)))
	return e
}

func newShelves(t testing.TB, c *ent.Client, n int) []int {
	t.Helper()
	ctx := context.Background()
	var ids []int
	for start := 0; start < n; start += 500 {
		bs := make([]*ent.ShelfCreate, min(500, n-start))
		for i := range bs {
			bs[i] = c.Shelf.Create().SetName(fmt.Sprint("s", start+i))
		}
		got, err := c.Shelf.CreateBulk(bs...).Save(ctx)
		must(t, err)
		for _, s := range got {
			ids = append(ids, s.ID)
		}
	}
	return ids
}

// newBooks creates one book on each given shelf (nil: none).
func newBooks(t testing.TB, c *ent.Client, shelves []*int, status string) []int {
	t.Helper()
	ctx := context.Background()
	var ids []int
	for start := 0; start < len(shelves); start += 500 {
		part := shelves[start:min(start+500, len(shelves))]
		bs := make([]*ent.BookCreate, len(part))
		for i, s := range part {
			bs[i] = c.Book.Create().SetStatus(status).SetNillableShelfID(s)
		}
		got, err := c.Book.CreateBulk(bs...).Save(ctx)
		must(t, err)
		for _, b := range got {
			ids = append(ids, b.ID)
		}
	}
	return ids
}

// entCountMismatches compares every shelf's loaded counts (live) with
// COUNT(*) over books.
func entCountMismatches(t testing.TB, e *entEnv) []string {
	t.Helper()
	shelves, err := e.client.Shelf.Query().All(entcounter.WithLive(context.Background()))
	must(t, err)
	got := map[int][2]int64{}
	for _, s := range shelves {
		got[s.ID] = [2]int64{s.BookCount, s.OpenCount}
	}
	return countMismatches(t, e, got, "books", "shelf_id")
}

// rackCountMismatches does the same for racks and items.
func rackCountMismatches(t testing.TB, e *entEnv) []string {
	t.Helper()
	racks, err := e.client.Rack.Query().All(entcounter.WithLive(context.Background()))
	must(t, err)
	got := map[int][2]int64{}
	for _, r := range racks {
		got[r.ID] = [2]int64{r.ItemCount, r.OpenCount}
	}
	return countMismatches(t, e, got, "items", "rack_id")
}

// countMismatches compares loaded (all, open) counts by parent id with
// COUNT(*) over the child table.
func countMismatches(t testing.TB, e *entEnv, got map[int][2]int64, child, ref string) []string {
	t.Helper()
	type row struct {
		P    int
		All  int64
		Open int64
	}
	var rows []row
	must(t, e.db.Raw(`SELECT `+ref+` AS p, COUNT(*) AS "all", SUM(CASE WHEN status = 'open' THEN 1 ELSE 0 END) AS open
		FROM `+child+` WHERE `+ref+` IS NOT NULL GROUP BY `+ref).Scan(&rows).Error)
	want := map[int][2]int64{}
	for _, r := range rows {
		want[r.P] = [2]int64{r.All, r.Open}
	}
	var bad []string
	for id, g := range got {
		if g != want[id] {
			bad = append(bad, fmt.Sprintf("parent %d: loaded %v, COUNT(*) %v", id, g, want[id]))
		}
	}
	sort.Strings(bad)
	return bad
}

func entCheckCounts(t testing.TB, e *entEnv, step string) {
	t.Helper()
	checkCounts(t, step, entCountMismatches(t, e))
}

func checkCounts(t testing.TB, step string, bad []string) {
	t.Helper()
	if len(bad) > 0 {
		if len(bad) > 5 {
			bad = append(bad[:5], fmt.Sprintf("... %d in all", len(bad)))
		}
		t.Fatalf("after %s, counts differ from COUNT(*):\n%s", step, strings.Join(bad, "\n"))
	}
}

// Deleting a shelf that holds books: ent's edge sets their shelf_id to
// NULL, and the counts of the other shelves stay equal to COUNT(*)
// (TestCountsFollowEveryWritePath has the other writes, for both ORMs).
func TestEntCountsFollowDeletingAParentWithChildren(t *testing.T) {
	parallel(t)
	for _, k := range allKinds {
		t.Run(string(k), func(t *testing.T) {
			e := entCounts(t, k)
			c := e.client
			ss := newShelves(t, c, 2)
			newBooks(t, c, []*int{&ss[0], &ss[0], &ss[1]}, "open")
			entCheckCounts(t, e, "creating books")
			must(t, c.Shelf.DeleteOneID(ss[0]).Exec(context.Background()))
			entCheckCounts(t, e, "deleting a shelf")
			if n := rawInt(t, e.db, "SELECT COUNT(*) FROM books WHERE shelf_id IS NULL"); n != 2 {
				t.Fatalf("%d books without a shelf after deleting the shelf of 2", n)
			}
		})
	}
}
