package integration_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hotcounter/hotcounter/entcounter"
	"github.com/hotcounter/hotcounter/integration_test/ent"
	"github.com/hotcounter/hotcounter/integration_test/ent/book"
	"github.com/hotcounter/hotcounter/integration_test/ent/shelf"
)

// entCounts opens ent on a fresh database with the count triggers
// installed: by the migration (WithCounters), or after it (InstallTriggers).
func entCounts(t testing.TB, kind dbKind, byMigration bool) *entEnv {
	t.Helper()
	ctx := context.Background()
	e := openEnt(t, kind, !byMigration, pool(writersPool))
	if byMigration {
		must(t, entMigrate(ctx, e.client, entcounter.WithCounters(e.client)))
	} else {
		must(t, entcounter.InstallTriggers(ctx, e.client))
	}
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

// TestEntCountsFollowEveryWritePath walks the books table through ent's
// writes and raw SQL, comparing the shelves' counts with COUNT(*) after
// each step.
func TestEntCountsFollowEveryWritePath(t *testing.T) {
	parallel(t)
	for _, k := range allKinds {
		t.Run(string(k), func(t *testing.T) {
			e := entCounts(t, k, true)
			ctx := context.Background()
			c := e.client
			ss := newShelves(t, c, 4)
			ids := newBooks(t, c, []*int{&ss[0], &ss[0], &ss[1], nil, &ss[2]}, "open")
			entCheckCounts(t, e, "a bulk create")
			newBooks(t, c, []*int{&ss[3]}, "draft")
			entCheckCounts(t, e, "a create the condition leaves out")

			must(t, c.Book.UpdateOneID(ids[0]).SetShelfID(ss[1]).Exec(ctx))
			entCheckCounts(t, e, "a move")
			must(t, c.Book.UpdateOneID(ids[3]).SetShelfID(ss[3]).Exec(ctx))
			entCheckCounts(t, e, "a move from no shelf")
			must(t, c.Book.UpdateOneID(ids[4]).ClearShelfID().Exec(ctx))
			entCheckCounts(t, e, "a move to no shelf")
			_, err := c.Book.Update().Where(book.ShelfID(ss[1])).SetShelfID(ss[2]).Save(ctx)
			must(t, err)
			entCheckCounts(t, e, "a bulk move")
			_, err = c.Book.Update().Where(book.ShelfID(ss[2])).SetStatus("draft").Save(ctx)
			must(t, err)
			entCheckCounts(t, e, "a bulk status change")
			must(t, c.Book.DeleteOneID(ids[0]).Exec(ctx))
			entCheckCounts(t, e, "a delete")
			_, err = c.Book.Delete().Where(book.ShelfID(ss[3])).Exec(ctx)
			must(t, err)
			entCheckCounts(t, e, "a bulk delete")
			must(t, e.db.Exec("INSERT INTO books (shelf_id, status) VALUES (?, 'open')", ss[0]).Error)
			entCheckCounts(t, e, "a raw insert")
			must(t, c.Shelf.DeleteOneID(ss[0]).Exec(ctx))
			entCheckCounts(t, e, "deleting a shelf")

			for _, f := range []string{shelf.FieldBookCount, shelf.FieldOpenCount} {
				n, err := entcounter.Recount(ctx, c, "Shelf", f)
				must(t, err)
				if n != 0 {
					t.Errorf("Recount(%s) of exact counts corrected %d shelves", f, n)
				}
			}
			err = c.Shelf.UpdateOneID(ss[1]).AddBookCount(1).Exec(ctx)
			if !errors.Is(err, entcounter.ErrNotIncrement) || !strings.Contains(err.Error(), "book_count") {
				t.Errorf("AddBookCount: %v; want ErrNotIncrement naming book_count", err)
			}
		})
	}
}

// TestEntCountsDepesz runs the depesz scenario through ent: 200 shelves,
// 300 books, writers moving books among random and hot shelves, then
// deleting 80% while the moves go on. No error (a deadlock would be one),
// every count equal to COUNT(*).
func TestEntCountsDepesz(t *testing.T) {
	parallel(t)
	for _, k := range allKinds {
		t.Run(string(k), func(t *testing.T) {
			e := entCounts(t, k, false)
			ctx := context.Background()
			c := e.client
			writers, moves := 32, 12
			if k == lite {
				writers, moves = 4, 8
			}
			ss := newShelves(t, c, 200)
			owners := make([]*int, 300)
			for i := range owners {
				owners[i] = &ss[rand.IntN(len(ss))]
			}
			books := newBooks(t, c, owners, "open")
			hot := ss[:4]
			move := func() error {
				target := ss[rand.IntN(len(ss))]
				if rand.IntN(2) == 0 {
					target = hot[rand.IntN(len(hot))]
				}
				err := c.Book.UpdateOneID(books[rand.IntN(len(books))]).SetShelfID(target).Exec(ctx)
				if ent.IsNotFound(err) {
					return nil // deleted meanwhile
				}
				return err
			}
			moved := hammer(t, writers, moves, move)
			entCheckCounts(t, e, "the moves")

			doomed := rand.Perm(len(books))[:len(books)*4/5]
			var next atomic.Int64
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
				if k != my && i%100 == 0 { // bulk: see TestCountsDepesz for MariaDB
					if _, err := c.Book.Delete().Where(book.ShelfID(hot[rand.IntN(len(hot))])).Exec(ctx); err != nil {
						return err
					}
				}
				_, err := c.Book.Delete().Where(book.ID(books[doomed[i]])).Exec(ctx)
				return err
			})
			wg.Wait()
			entCheckCounts(t, e, "the deletes")
			left, err := c.Book.Query().Count(ctx)
			must(t, err)
			if left > len(books)-len(doomed) {
				t.Fatalf("%d of %d books left: the deletes did not run", left, len(books))
			}
			t.Logf("ent on %s: %d writers, %d moves, %d deletes, %d books left, no error, every count exact", k, writers, moved, deletes, left)
		})
	}
}

// TestEntRecountFixesDriftWhileWritesGoOn injects drift into 30 of 600
// shelves behind the triggers' back, then recounts while writers move
// books: exactly the drifted shelves are corrected, and every count ends
// equal to COUNT(*).
func TestEntRecountFixesDriftWhileWritesGoOn(t *testing.T) {
	parallel(t)
	for _, k := range allKinds {
		t.Run(string(k), func(t *testing.T) {
			e := entCounts(t, k, true)
			ctx := context.Background()
			c := e.client
			ss := newShelves(t, c, 600) // two batches
			owners := make([]*int, 1800)
			for i := range owners {
				owners[i] = &ss[i%len(ss)]
			}
			books := newBooks(t, c, owners, "open")
			var drifted []int
			for i := 7; i < len(ss); i += 20 {
				drifted = append(drifted, ss[i])
			}
			must(t, e.db.Exec("UPDATE shelf_book_count_slots SET n = n + 7 WHERE shelf_id IN ?", drifted).Error)
			must(t, e.db.Exec("UPDATE shelves SET open_count = open_count - 2 WHERE id IN ?", drifted).Error)
			if bad := entCountMismatches(t, e); len(bad) != len(drifted) {
				t.Fatalf("injected drift into %d shelves, the check sees %d", len(drifted), len(bad))
			}
			var done atomic.Bool
			var started atomic.Int64
			var wg sync.WaitGroup
			wg.Add(1)
			writers := 8
			if k == lite {
				writers = 2
			}
			var moved int64
			go func() {
				defer wg.Done()
				moved = hammer(t, writers, 1<<30, func() error {
					if done.Load() {
						return errStop
					}
					if started.Add(1); k == lite {
						time.Sleep(time.Millisecond) // SQLite's busy wait is unfair: leave the recount a turn
					}
					return c.Book.UpdateOneID(books[rand.IntN(len(books))]).SetShelfID(ss[rand.IntN(len(ss))]).Exec(ctx)
				})
			}()
			for started.Load() < 2*int64(writers) {
				time.Sleep(time.Millisecond)
			}
			var fixed [2]int64
			for i, f := range []string{shelf.FieldBookCount, shelf.FieldOpenCount} {
				n, err := entcounter.Recount(ctx, c, "Shelf", f)
				must(t, err)
				fixed[i] = n
			}
			done.Store(true)
			wg.Wait()
			for i, f := range []string{shelf.FieldBookCount, shelf.FieldOpenCount} {
				if fixed[i] != int64(len(drifted)) {
					t.Errorf("Recount(%s) corrected %d shelves; drift was injected into %d", f, fixed[i], len(drifted))
				}
			}
			entCheckCounts(t, e, "the recount")
			t.Logf("ent on %s: corrected %v of %d drifted shelves while %d moves ran", k, fixed, len(drifted), moved)
		})
	}
}
