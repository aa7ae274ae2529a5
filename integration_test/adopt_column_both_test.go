package integration_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hotcounter/hotcounter"
)

// legacyPosts makes the posts table as an application had it before likes
// became a counter: no slot table for likes, and a plain likes column
// (NOT NULL without a default where the database can drop one; SQLite
// keeps DEFAULT 0). It creates two posts, with 1234 and 0 likes.
func legacyPosts(t *testing.T, o counterORM) (int64, int64) {
	t.Helper()
	db := o.db()
	must(t, db.Exec("DROP TABLE post_likes_slots").Error)
	must(t, db.Exec("ALTER TABLE posts ADD COLUMN likes BIGINT NOT NULL DEFAULT 0").Error)
	if o.kind() != lite {
		must(t, db.Exec("ALTER TABLE posts ALTER COLUMN likes DROP DEFAULT").Error)
	}
	var ids [2]int64
	for i, likes := range []int64{1234, 0} {
		must(t, db.Exec("INSERT INTO posts (title, views, likes) VALUES (?, 0, ?)", fmt.Sprint("old ", i), likes).Error)
		ids[i] = rawInt(t, db, "SELECT MAX(id) FROM posts")
	}
	return ids[0], ids[1]
}

// A counter declared over the column an application already has, migrated
// by a process that never saw the counter before: loads show what the
// column holds plus what the slots hold; the library's increments and old
// code's increments of the column both count, on old rows and on rows new
// code creates (a create writes 0 into the NOT NULL column); an assignment
// sets the total; MoveToSlots moves each column value onto the slots once;
// after the column is dropped every total is as it was. Both ORMs.
func TestACounterOverAnExistingColumnHidesNothing(t *testing.T) {
	eachORM(t, func(t *testing.T, o counterORM) {
		a, b := legacyPosts(t, o)
		o = o.through(t, o.onEnv().dsn, settings{}) // a new process: nothing learned yet
		must(t, o.migrate())
		likes := func(ids ...int64) []int64 {
			out := make([]int64, len(ids))
			for i, id := range ids {
				out[i] = o.cached(t, modelPost, id, "likes")
			}
			return out
		}
		oldIncrement := func(id int64) {
			must(t, o.db().Exec("UPDATE posts SET likes = likes + 1 WHERE id = ?", id).Error)
		}
		assert.Equal(t, []int64{1234, 0}, likes(a, b), "the column's likes")
		must(t, o.increment(modelPost, a, "likes", 1))
		oldIncrement(a)
		assert.Equal(t, []int64{1236, 0}, likes(a, b), "the library's increment and old code's")
		assert.EqualValues(t, 1236, exactly(t, o, modelPost, a, "likes"), "an exact read")

		fresh, err := o.createWith(modelPost, "likes", 3)
		must(t, err)
		oldIncrement(fresh)
		assert.Equal(t, []int64{4}, likes(fresh), "a new post's column starts at 0: old code's increment counts")

		must(t, o.set(modelPost, b, "likes", 10))
		assert.Equal(t, []int64{1236, 10}, likes(a, b), "an assignment sets the total")

		moved, err := o.moveToSlots(modelPost)
		must(t, err)
		assert.Equal(t, hotcounter.Moved{Parents: 2, Amount: 1235 + 1}, moved, "a's column and the new post's")
		assert.Equal(t, []int64{1236, 10, 4}, likes(a, b, fresh), "a move changes no total")
		again, err := o.moveToSlots(modelPost)
		must(t, err)
		assert.Equal(t, hotcounter.Moved{}, again, "a second move finds nothing")

		must(t, o.db().Exec("ALTER TABLE posts DROP COLUMN likes").Error)
		o = o.through(t, o.onEnv().dsn, settings{}) // a new process, which finds the column gone
		assert.Equal(t, []int64{1236, 10, 4}, likes(a, b, fresh), "after the column is dropped")
		must(t, o.increment(modelPost, a, "likes", 1))
		assert.EqualValues(t, 1237, exactly(t, o, modelPost, a, "likes"))
	})
}

// A rolling deploy: old code (likes = likes + 1 on the column) and new
// code (the ORM's increment) write the same posts at once, while moves
// run over and over and a reader checks that no total ever goes
// backwards; the end is exact, and no column value is left once a last
// move has run. Both ORMs.
func TestRollingDeployCountsEverything(t *testing.T) {
	eachORM(t, func(t *testing.T, o counterORM) {
		a, b := legacyPosts(t, o)
		o = o.through(t, o.onEnv().dsn, settings{}) // the new version's process
		must(t, o.migrate())
		ids := []int64{a, b}
		const writers, each = 8, 40
		var oldDone, newDone atomic.Int64
		ctx, cancel := context.WithCancel(context.Background())
		var wg, bg sync.WaitGroup
		errs := make(chan error, 64)
		for w := range writers {
			wg.Go(func() {
				for i := range each {
					id := ids[(w+i)%len(ids)]
					if w%2 == 0 {
						if err := o.db().Exec("UPDATE posts SET likes = likes + 1 WHERE id = ?", id).Error; err != nil {
							errs <- fmt.Errorf("old code: %w", err)
							return
						}
						oldDone.Add(1)
					} else {
						if err := o.increment(modelPost, id, "likes", 1); err != nil {
							errs <- fmt.Errorf("new code: %w", err)
							return
						}
						newDone.Add(1)
					}
				}
			})
		}
		var moves atomic.Int64
		bg.Go(func() {
			for ctx.Err() == nil {
				if _, err := o.moveToSlots(modelPost); err != nil {
					errs <- fmt.Errorf("move: %w", err)
					return
				}
				moves.Add(1)
				time.Sleep(2 * time.Millisecond)
			}
		})
		stopReaders := watchNeverBackwards(ids, "likes", func(id int64) (int64, error) { return o.exact(modelPost, id, "likes") })
		wg.Wait()
		if err := stopReaders(); err != nil {
			t.Errorf("during the moves: %v", err)
		}
		cancel()
		bg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		_, err := o.moveToSlots(modelPost)
		must(t, err)
		total := exactly(t, o, modelPost, a, "likes") + exactly(t, o, modelPost, b, "likes")
		assert.EqualValues(t, 1234+oldDone.Load()+newDone.Load(), total, "the initial 1234 and every increment, old and new")
		assert.EqualValues(t, writers*each, oldDone.Load()+newDone.Load())
		assert.EqualValues(t, 0, rawInt(t, o.db(), "SELECT COUNT(*) FROM posts WHERE likes <> 0"), "column values left after the last move")
		t.Logf("%d moves ran during the writes", moves.Load())
	})
}

// A posts table without a primary key: the slot tables' foreign keys have
// nothing to reference, and the migration says so with ErrInvalidCounter,
// naming a counter of Post. Both ORMs.
func TestAParentWithoutPrimaryKeyIsAnError(t *testing.T) {
	eachORM(t, func(t *testing.T, o counterORM) {
		id := "id bigint NOT NULL"
		if o.kind() == pg {
			id = "id bigint GENERATED BY DEFAULT AS IDENTITY NOT NULL" // as both ORMs make it, less the key
		}
		must(t, o.db().Exec("CREATE TABLE posts ("+id+", title varchar(50) NOT NULL DEFAULT '', views bigint NOT NULL DEFAULT 0, likes bigint)").Error)
		err := o.migrate()
		require.Error(t, err)
		if !strings.Contains(err.Error(), o.name(modelPost, "likes")) && !strings.Contains(err.Error(), o.name(modelPost, "views")) {
			t.Errorf("the migration's error %q names no counter of Post", err)
		}
		assert.Contains(t, err.Error(), "primary key")
		assert.ErrorIs(t, err, hotcounter.ErrInvalidCounter)
	}, unmigrated())
}

// nullableColumn lets column of table hold NULL, as a column of an
// application that never declared it a counter may (SQLite: by copying
// the column into a new one).
func nullableColumn(t *testing.T, o counterORM, table, column string) {
	t.Helper()
	db := o.db()
	switch o.kind() {
	case pg:
		must(t, db.Exec("ALTER TABLE "+table+" ALTER COLUMN "+column+" DROP NOT NULL").Error)
	case my:
		must(t, db.Exec("ALTER TABLE "+table+" MODIFY "+column+" BIGINT NULL").Error)
	default:
		for _, q := range []string{
			"ALTER TABLE " + table + " ADD COLUMN " + column + "_null BIGINT",
			"UPDATE " + table + " SET " + column + "_null = " + column,
			"ALTER TABLE " + table + " DROP COLUMN " + column,
			"ALTER TABLE " + table + " RENAME COLUMN " + column + "_null TO " + column,
		} {
			must(t, db.Exec(q).Error)
		}
	}
}

// A rollup counter (posts.views) and an append counter (stories.claps)
// over a column that holds NULLs: the migration of a new process sets
// them to 0 and makes the column NOT NULL; loads show the column, which
// old code's increments still add to; an exact read adds what the slot or
// delta rows hold, and a rollup pass folds it into the column. Both ORMs.
func TestARollupOrAppendCounterOverANullableColumn(t *testing.T) {
	eachORM(t, func(t *testing.T, o counterORM) {
		for _, c := range []struct{ model, table, field string }{{modelPost, "posts", "views"}, {modelStory, "stories", "claps"}} {
			t.Run(c.field, func(t *testing.T) {
				nullableColumn(t, o, c.table, c.field)
				var ids []int64
				for _, v := range []any{nil, 50} {
					must(t, o.db().Exec("INSERT INTO "+c.table+" (title, "+c.field+") VALUES ('old', ?)", v).Error)
					ids = append(ids, rawInt(t, o.db(), "SELECT MAX(id) FROM "+c.table))
				}
				n := o.through(t, o.onEnv().dsn, settings{}) // a new process: nothing learned yet
				must(t, n.migrate())
				assert.EqualValues(t, 0, rawInt(t, o.db(), "SELECT COUNT(*) FROM "+c.table+" WHERE "+c.field+" IS NULL"), "NULLs became 0")
				load := func(live bool) []int64 {
					out := make([]int64, len(ids))
					for i, id := range ids {
						if live {
							out[i] = exactly(t, n, c.model, id, c.field)
						} else {
							out[i] = n.cached(t, c.model, id, c.field)
						}
					}
					return out
				}
				assert.Equal(t, []int64{0, 50}, load(false))
				for _, id := range ids {
					must(t, n.increment(c.model, id, c.field, 1))
					must(t, o.db().Exec("UPDATE "+c.table+" SET "+c.field+" = "+c.field+" + 1 WHERE id = ?", id).Error) // old code
				}
				assert.Equal(t, []int64{1, 51}, load(false), "the column: old code's increments")
				assert.Equal(t, []int64{2, 52}, load(true), "an exact read: the column and the pending increments")
				must(t, n.rollup(c.model))
				assert.Equal(t, []int64{2, 52}, load(false), "after a rollup pass")
			})
		}
	})
}

// One table whose counter a column held (10), deployed as sum -> rollup ->
// sum -> append -> sum -> 64 slots -> 16 slots, each deploy a new process
// that migrates and adds 20: after each step every version deployed so
// far reads the same total (exactly: live for rollup and append), and a
// plain load of a rollup or append counter shows it once folded. Both ORMs
// (appVersion: GORM's shows models, ent's entversions clients).
func TestChangingModeKeepsTotals(t *testing.T) {
	eachORM(t, func(t *testing.T, o counterORM) {
		id := o.legacyRow(t, 10)
		want := int64(10)
		var readers []string
		exact := func(step string) {
			t.Helper()
			for _, v := range readers {
				got, err := o.version(t, v).value(id, true)
				must(t, err)
				assert.Equal(t, want, got, "%s: read by %s", step, v)
			}
		}
		deploy := func(v string) appVersion {
			t.Helper()
			r := o.version(t, v)
			must(t, r.migrate())
			if !slices.Contains(readers, v) {
				readers = append(readers, v)
			}
			for range 20 {
				must(t, r.add(id, 1))
			}
			want += 20
			return r
		}
		plainly := func(v, step string) {
			t.Helper()
			got, err := o.version(t, v).value(id, false)
			must(t, err)
			assert.Equal(t, want, got, "%s: a plain %s load", step, v)
		}

		deploy("sum16")
		exact("sum over the old column")
		must(t, deploy("rollup").rollup())
		exact("sum -> rollup, folded")
		plainly("rollup", "after the fold")

		deploy("sum16")
		exact("rollup -> sum: the folded column is part of the sum")
		must(t, deploy("deltas").rollup())
		exact("sum -> append, folded (deltas and the slots left by sum)")
		plainly("deltas", "after the fold")

		must(t, deploy("sum16").moveToSlots())
		exact("append -> sum, after MoveToSlots")

		deploy("sum64")
		exact("16 -> 64 slots")
		s := deploy("sum16")
		exact("64 -> 16 slots: rows above 16 keep counting")
		if o.kind() != my {
			must(t, s.compact())
			exact("64 -> 16 slots, compacted")
		}
	}, unmigrated())
}

// Removing a counter for a plain integer field of the same name folds what
// its slot or delta table holds back into the column, exactly once: the
// deploy that migrates to the plain field loads every increment, the table
// is left empty, and a second migration and a plain increment count once.
// From a sum, a rollup (folded once before) and an append counter. Both
// ORMs.
func TestRemovingTheCounterFoldsTheSlotsBack(t *testing.T) {
	eachORM(t, func(t *testing.T, o counterORM) {
		for _, from := range []string{"sum16", "rollup", "deltas"} {
			t.Run(from, func(t *testing.T) {
				table, column := versionedTable(o)
				id := o.legacyRow(t, 3)
				r := o.version(t, from)
				must(t, r.migrate())
				if from != "sum16" {
					must(t, r.add(id, 1))
					must(t, r.rollup()) // the column holds 4, the table nothing
				}
				must(t, r.add(id, 5))
				slots := strings.TrimSuffix(table, "s") + "_" + column + "_slots"
				if from == "deltas" {
					slots = strings.TrimSuffix(slots, "slots") + "deltas"
				}
				held := rawInt(t, o.db(), "SELECT COALESCE(SUM(n), 0) FROM "+slots)
				require.NotZero(t, held, "%s holds the increments after the last fold", slots)

				p := o.version(t, "plain")
				must(t, p.migrate())
				want := int64(8)
				if from != "sum16" {
					want = 9
				}
				got, err := p.value(id, false)
				must(t, err)
				assert.Equal(t, want, got, "a plain load after the counter is removed")
				assert.EqualValues(t, 0, rawInt(t, o.db(), "SELECT COALESCE(SUM(n), 0) FROM "+slots), "what %s held is folded", slots)

				must(t, p.migrate()) // nothing left to fold: counted once
				must(t, p.add(id, 2))
				got, err = p.value(id, false)
				must(t, err)
				assert.Equal(t, want+2, got, "a second migration and a plain increment")
				must(t, o.db().Exec("DROP TABLE "+slots).Error) // the next version starts from the plain table
			})
		}
	}, unmigrated())
}
