package integration_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/hotcounter/hotcounter/gormcounter"
	"github.com/hotcounter/hotcounter/integration_test/ent"
	"github.com/hotcounter/hotcounter/integration_test/ent/post"
)

// Bulk writes of many new parents work with the server's default settings
// (PostgreSQL's max_locks_per_transaction of 64, which bounds the locks
// all transactions hold together at 64 x max_connections: 6,400 here; a
// lock per new slot row failed such writes with "out of shared memory"),
// and every count and total is exact afterwards, GORM and ent:
//   - one INSERT ... SELECT of 40,000 children into 8,000 new categories
//     (count triggers);
//   - one transaction of many statements: a child of each of another 8,000
//     new categories, in batches of 1,000 (triggers), and a photo of each of
//     8,000 new albums (GORM count hooks);
//   - one increment of 8,000 new posts, outside a transaction and inside
//     one (GORM's Increment with a Where, ent's bulk Update).
//
// MariaDB, which takes no lock per row in a lock table of fixed size, runs
// the same with 6,000 children into 2,000 parents. The sizes of the
// issue, by hand: HOTCOUNTER_BULK=100000,1000000 (parents, children) runs
// 1,000,000 children into 100,000 new categories in one statement, as many
// in one transaction (and as many photos), and increments of 100,000 new
// posts, on both databases.
func TestBulkWritesOfManyNewParentsNeedNoServerSettings(t *testing.T) {
	eachDB(t, func(t *testing.T, e *env) {
		parents, children := 8_000, 40_000
		if e.kind == my {
			parents, children = 2_000, 6_000
		}
		inTx := parents // children written in the one transaction
		if sizes := os.Getenv("HOTCOUNTER_BULK"); sizes != "" {
			if _, err := fmt.Sscanf(sizes, "%d,%d", &parents, &children); err != nil {
				t.Fatalf("HOTCOUNTER_BULK=%q: want parents,children: %v", sizes, err)
			}
			inTx = children
		}
		lap := time.Now()
		step := func(what string) {
			t.Logf("%s: %v", what, time.Since(lap).Round(time.Millisecond))
			lap = time.Now()
		}
		db := e.db
		must(t, db.AutoMigrate(&Author{}, &Post{}, &Comment{}, &Category{}, &Object{}, &Album{}, &Photo{}))

		// newParents inserts n rows into table in one statement and
		// returns the first id.
		newParents := func(table string) uint {
			var first uint
			must(t, db.Raw("SELECT COALESCE(MAX(id), 0) + 1 FROM "+table).Row().Scan(&first))
			must(t, db.Exec(fmt.Sprintf("INSERT INTO %s (id, name) SELECT ? + n, '' FROM %s", table, numbers(e.kind, parents)), first).Error)
			return first
		}
		cats := newParents("categories")
		must(t, db.Exec(fmt.Sprintf("INSERT INTO objects (category_id, status) SELECT ? + MOD(n, %d), 'active' FROM %s", parents, numbers(e.kind, children)), cats).Error)
		countKinds[0].check(t, db, fmt.Sprintf("one statement of %d children into %d new categories", children, parents))
		step("one statement")

		cats, albums := newParents("categories"), newParents("albums")
		must(t, db.Transaction(func(tx *gorm.DB) error {
			objects, photos := make([]Object, inTx), make([]Photo, inTx)
			for i := range objects {
				objects[i] = Object{CategoryID: ptr(cats + uint(i%parents)), Status: "active"}
				photos[i] = Photo{AlbumID: ptr(albums + uint(i%parents)), Status: "active"}
			}
			if err := tx.CreateInBatches(objects, 1000).Error; err != nil {
				return err
			}
			return tx.CreateInBatches(photos, 1000).Error
		}))
		countKinds[0].check(t, db, fmt.Sprintf("one transaction of %d children in batches of 1,000 into %d new categories", inTx, parents))
		countKinds[1].check(t, db, fmt.Sprintf("one transaction of %d photos in batches of 1,000 into %d new albums", inTx, parents))
		step("one transaction")

		posts := make([]Post, parents)
		must(t, db.CreateInBatches(posts, 1000).Error)
		// By range: an IN list of 100,000 ids is past the 65,535 parameters
		// of PostgreSQL's protocol, whatever the statement.
		first, last := posts[0].ID, posts[len(posts)-1].ID
		must(t, gormcounter.Increment(db.Model(&Post{}).Where("id BETWEEN ? AND ?", first, last), "Likes", 1).Error)
		must(t, db.Transaction(func(tx *gorm.DB) error {
			return gormcounter.Increment(tx.Model(&Post{}).Where("id BETWEEN ? AND ?", first, last), "Likes", 2).Error
		}))
		var wrong int64
		must(t, db.Raw("SELECT COUNT(*) FROM posts p WHERE COALESCE((SELECT SUM(n) FROM post_likes_slots s WHERE s.post_id = p.id), 0) <> 3").Row().Scan(&wrong))
		if wrong != 0 {
			t.Errorf("%d of %d posts do not hold the 3 likes of two increments of them all", wrong, parents)
		}
		step("increments")

		t.Run("ent", func(t *testing.T) {
			ee := withEnt(t, open(t, e.kind), true)
			ctx := context.Background()
			c := ee.client
			bulk := make([]*ent.PostCreate, parents)
			for i := range bulk {
				bulk[i] = c.Post.Create().SetTitle("p")
			}
			var ids []int
			for start := 0; start < len(bulk); start += 1000 {
				for _, p := range c.Post.CreateBulk(bulk[start:min(start+1000, len(bulk))]...).SaveX(ctx) {
					ids = append(ids, p.ID)
				}
			}
			first, last := ids[0], ids[len(ids)-1]
			if n := c.Post.Update().Where(post.IDGTE(first), post.IDLTE(last)).AddLikes(1).SaveX(ctx); n != parents {
				t.Fatalf("a bulk Update of %d new posts wrote %d", parents, n)
			}
			must(t, inTxRollingBack(ctx, c, false, func(tx *ent.Tx) error {
				return tx.Post.Update().Where(post.IDGTE(first), post.IDLTE(last)).AddLikes(2).Exec(ctx)
			}))
			var wrong int64
			must(t, ee.db.Raw("SELECT COUNT(*) FROM posts p WHERE COALESCE((SELECT SUM(n) FROM post_likes_slots s WHERE s.post_id = p.id), 0) <> 3").Row().Scan(&wrong))
			if wrong != 0 {
				t.Errorf("%d of %d posts do not hold the 3 likes of two bulk Updates of them all", wrong, parents)
			}
		})
	}, on(pg, my))
}

// numbers is a FROM item of the numbers 0 to n-1 as column n.
func numbers(kind dbKind, n int) string {
	if kind == my {
		return fmt.Sprintf("(SELECT seq - 1 AS n FROM seq_1_to_%d) AS hc_numbers", n)
	}
	return fmt.Sprintf("generate_series(0, %d) AS hc_numbers(n)", n-1)
}
