package integration_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/hotcounter/hotcounter"
	"github.com/hotcounter/hotcounter/gormcounter"
)

// TestUpdateOfSomePostsWithACounterTouchesOnlyThem: Updates on a slice of
// posts with a Where, setting a column and incrementing a counter, changes
// exactly those posts. (On MariaDB the increment's savepoint once ran on the
// update's own statement and dropped the slice's key condition: every post
// matching the Where got the new title.)
func TestUpdateOfSomePostsWithACounterTouchesOnlyThem(t *testing.T) {
	parallel(t)
	eachDB(t, func(t *testing.T, e *env) {
		db := e.db
		posts := seed(t, db, 3)
		before := exact(t, db, posts[2].ID)
		some := []Post{{ID: posts[0].ID}, {ID: posts[1].ID}}
		tx := db.Model(&some).Where("title = ?", "post").Updates(map[string]any{"title": "changed", "views": gorm.Expr("views + ?", 1)})
		must(t, tx.Error)
		for i, p := range posts {
			got := exact(t, db, p.ID)
			changed := i < 2
			if (got.Title == "changed") != changed {
				t.Fatalf("post %d: title %q (should change: %v)", i, got.Title, changed)
			}
			if i == 2 && got.Views != before.Views {
				t.Fatalf("post 3: views %d, want %d", got.Views, before.Views)
			}
		}
		if v := exact(t, db, posts[0].ID).Views; v != 10+1 {
			t.Fatalf("post 1: views %d, want 11", v)
		}
	})
}

// TestConcurrentUpdateColumnOnARollupCounter: the rewritten UpdateColumn
// form runs in GORM's default transaction, where hotcounter cannot retry.
// On MariaDB a rollup counter's slot rows are inserted by its increments
// (a pass removes them), which is where InnoDB deadlocks: inserting without
// updating first keeps the gap free, so these must end exact and without
// failures.
func TestConcurrentUpdateColumnOnARollupCounter(t *testing.T) {
	parallel(t)
	eachDB(t, func(t *testing.T, e *env) {
		db := e.db
		must(t, migrateAll(db))
		post := newPost(t, db, "p")
		writers, each := 32, 10
		if e.kind == lite {
			writers = 8
		}
		done := hammer(t, writers, each, func() error {
			return db.Model(&Post{ID: post.ID}).UpdateColumn("views", gorm.Expr("views + ?", 1)).Error
		})
		if got := exact(t, db, post.ID).Views; got != done || done != int64(writers*each) {
			t.Fatalf("views %d after %d of %d updates", got, done, writers*each)
		}
	})
}

// TestRollupIncrementsDoNotLockTheParent: once a rollup counter's slot row
// exists, incrementing it on MariaDB is an UPDATE of that row alone, even
// inside GORM's default transaction: a transaction that has updated the post
// (holding its row lock) does not hold it up. (An INSERT ... ON DUPLICATE
// KEY UPDATE would: its foreign key check locks the parent even when the
// row exists.)
func TestRollupIncrementsDoNotLockTheParent(t *testing.T) {
	parallel(t)
	e := open(t, my)
	db := e.db
	must(t, migrateAll(db))
	post := newPost(t, db, "p")
	// Give every slot row of views a value, so that any slot picked exists.
	for s := range 64 {
		must(t, db.Exec("INSERT INTO post_views_slots (post_id, slot, n) VALUES (?, ?, 0)", post.ID, s).Error)
	}
	holder := db.Begin()
	must(t, holder.Exec("UPDATE posts SET title = 'held' WHERE id = ?", post.ID).Error)
	defer holder.Rollback()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	for range 20 {
		must(t, gormcounter.Increment(db.WithContext(ctx).Model(&Post{ID: post.ID}), "Views", 1).Error)
		must(t, db.WithContext(ctx).Model(&Post{ID: post.ID}).UpdateColumn("views", gorm.Expr("views + ?", 1)).Error)
	}
	must(t, holder.Rollback().Error)
	if got := exact(t, db, post.ID).Views; got != 40 {
		t.Fatalf("views = %d, want 40", got)
	}
}

// TestIncrementOfADeletedPostWithTranslateError: a post that is gone counts
// as no row, as GORM's UPDATE would count it, also when GORM translates the
// foreign key error of the slot row's insert.
func TestIncrementOfADeletedPostWithTranslateError(t *testing.T) {
	parallel(t)
	for _, k := range allKinds {
		t.Run(string(k), func(t *testing.T) {
			e := open(t, k, config(&gorm.Config{TranslateError: true}))
			db := e.db
			must(t, migrateAll(db))
			post := newPost(t, db, "gone")
			must(t, db.Delete(&Post{ID: post.ID}).Error)
			for _, field := range []string{"Likes", "Views"} {
				tx := gormcounter.Increment(db.Model(&Post{ID: post.ID}), field, 1)
				if tx.Error != nil || tx.RowsAffected != 0 {
					t.Fatalf("%s of a deleted post: %v, %d rows", field, tx.Error, tx.RowsAffected)
				}
			}
		})
	}
}

func TestIncrementWritesSlotsNotParent(t *testing.T) {
	parallel(t)
	eachDB(t, func(t *testing.T, e *env) {
		db := e.db
		must(t, migrateAll(db))
		post := newPost(t, db, "hello")
		note := Note{Text: "n"}
		must(t, db.Create(&note).Error)
		before := note.UpdatedAt
		time.Sleep(5 * time.Millisecond) // so that a touched updated_at would differ

		for i := 0; i < 200; i++ {
			must(t, gormcounter.Increment(db.Model(&post), "Likes", 1).Error)
			must(t, gormcounter.Increment(db.Model(&post), "views", 1).Error)
			must(t, db.Model(&note).Update("stars", gorm.Expr("stars + ?", 1)).Error) // Update runs hooks: still no parent write
		}
		rows, sum := slotRows(t, db, "post_likes_slots", "post_id", post.ID)
		if sum != 200 || rows > 16 {
			t.Fatalf("post_likes_slots: %d rows, sum %d; want <= 16 rows summing to 200", rows, sum)
		}
		if used := nonZeroSlots(t, db, "post_likes_slots", "post_id", post.ID); used < 2 {
			t.Fatalf("200 increments used %d slot(s): slot choice is not spreading", used)
		}
		rows, sum = slotRows(t, db, "post_views_slots", "post_id", post.ID)
		if sum != 200 || rows > 64 {
			t.Fatalf("post_views_slots: %d rows, sum %d; want <= 64 rows summing to 200", rows, sum)
		}
		if v := rawInt(t, db, "SELECT views FROM posts WHERE id = ?", post.ID); v != 0 {
			t.Fatalf("posts.views = %d before any rollup; increments must not write the parent", v)
		}
		var reloaded Note
		must(t, db.First(&reloaded, note.ID).Error)
		if reloaded.UpdatedAt != before {
			t.Fatalf("notes.updated_at changed from %d to %d: a counter-only update wrote the parent row", before, reloaded.UpdatedAt)
		}
		if reloaded.Stars != 200 {
			t.Fatalf("note stars = %d, want 200", reloaded.Stars)
		}
		got := exact(t, db, post.ID)
		if got.Likes != 200 || got.Views != 200 {
			t.Fatalf("loaded likes=%d views=%d, want 200 and 200", got.Likes, got.Views)
		}
	})
}

func TestEveryIncrementFormTakesTheSamePath(t *testing.T) {
	parallel(t)
	eachDB(t, func(t *testing.T, e *env) {
		db := e.db
		must(t, migrateAll(db))
		post := newPost(t, db, "old title")

		steps := []struct {
			name string
			run  func() *gorm.DB
			want int64 // likes after the step
		}{
			{"Increment by field name", func() *gorm.DB { return gormcounter.Increment(db.Model(&post), "Likes", 1) }, 1},
			{"Increment by column name", func() *gorm.DB { return gormcounter.Increment(db.Model(&post), "likes", 2) }, 3},
			{"UpdateColumn with Expr", func() *gorm.DB {
				return db.Model(&post).UpdateColumn("likes", gorm.Expr("likes + ?", 4))
			}, 7},
			{"Update with Expr subtracting", func() *gorm.DB {
				return db.Model(&post).Update("Likes", gorm.Expr("likes - ?", 2))
			}, 5},
			{"Expr with the number first", func() *gorm.DB {
				return db.Model(&post).UpdateColumn("likes", gorm.Expr("? + likes", 10))
			}, 15},
			{"Expr with a quoted, qualified column and a literal", func() *gorm.DB {
				return db.Model(&post).UpdateColumn("likes", gorm.Expr(`"posts"."likes" + 5`))
			}, 20},
			{"gen-style SET clause", func() *gorm.DB {
				return db.Model(&post).Clauses(clause.Set{{
					Column: clause.Column{Name: "likes"},
					Value:  gorm.Expr("?+?", clause.Column{Name: "likes"}, 30),
				}}).Updates(map[string]any{})
			}, 50},
		}
		for _, s := range steps {
			res := s.run()
			if res.Error != nil {
				t.Fatalf("%s: %v", s.name, res.Error)
			}
			if res.RowsAffected != 1 {
				t.Fatalf("%s: RowsAffected = %d, want 1", s.name, res.RowsAffected)
			}
			if got := exact(t, db, post.ID).Likes; got != s.want {
				t.Fatalf("%s: likes = %d, want %d", s.name, got, s.want)
			}
		}

		// A mixed update: the title is written to the parent, the counter goes to a slot.
		res := db.Model(&post).Updates(map[string]any{"title": "new title", "views": gorm.Expr("views + ?", 2)})
		must(t, res.Error)
		if res.RowsAffected != 1 {
			t.Fatalf("mixed update RowsAffected = %d, want 1", res.RowsAffected)
		}
		got := exact(t, db, post.ID)
		if got.Title != "new title" || got.Views != 2 || got.Likes != 50 {
			t.Fatalf("after mixed update: %+v", got)
		}
		if v := rawInt(t, db, "SELECT views FROM posts WHERE id = ?", post.ID); v != 0 {
			t.Fatalf("posts.views = %d: the mixed update wrote the counter into the parent", v)
		}
	})
}

// An increment is in the caller's transaction: the transaction reads its
// own increments (a rollup counter's too, exactly), a rollback discards
// them, and an increment then an assignment in one transaction commit as
// the assignment. GORM and ent.
func TestIncrementIsInTheCallersTransaction(t *testing.T) {
	eachORM(t, func(t *testing.T, o counterORM) {
		id := o.create(t, modelPost)
		errRollback := errors.New("roll back")
		err := o.inTx(func(tx counterORM) error {
			must(t, tx.increment(modelPost, id, "likes", 5))
			must(t, tx.increment(modelPost, id, "views", 5))
			if likes, views := exactly(t, tx, modelPost, id, "likes"), exactly(t, tx, modelPost, id, "views"); likes != 5 || views != 5 {
				t.Errorf("inside the transaction: likes=%d views=%d, want 5 and 5", likes, views)
			}
			return errRollback
		})
		if !errors.Is(err, errRollback) {
			t.Fatalf("transaction: %v", err)
		}
		if likes, views := exactly(t, o, modelPost, id, "likes"), exactly(t, o, modelPost, id, "views"); likes != 0 || views != 0 {
			t.Fatalf("after rollback: likes=%d views=%d, want 0 and 0", likes, views)
		}
		must(t, o.inTx(func(tx counterORM) error {
			must(t, tx.increment(modelPost, id, "likes", 2))
			return tx.set(modelPost, id, "likes", 9)
		}))
		if got := exactly(t, o, modelPost, id, "likes"); got != 9 {
			t.Fatalf("after an increment and an assignment of 9 committed: likes=%d", got)
		}
	})
}

// A nested transaction (a savepoint through the wrapped dialector): the
// inner increment is rolled back, the outer one commits. GORM (ent has no
// nested transactions).
func TestIncrementInANestedTransactionRollsBackAlone(t *testing.T) {
	parallel(t)
	eachDB(t, func(t *testing.T, e *env) {
		db := e.db
		must(t, migrateAll(db))
		post := newPost(t, db, "tx")
		errRollback := errors.New("roll back")
		err := db.Transaction(func(tx *gorm.DB) error {
			must(t, gormcounter.Increment(tx.Model(&post), "Likes", 1).Error)
			inner := tx.Transaction(func(tx2 *gorm.DB) error {
				must(t, gormcounter.Increment(tx2.Model(&post), "Likes", 100).Error)
				return errRollback
			})
			if !errors.Is(inner, errRollback) {
				t.Errorf("inner transaction: %v", inner)
			}
			return nil
		})
		must(t, err)
		if got := exact(t, db, post.ID).Likes; got != 1 {
			t.Fatalf("after nested rollback: likes=%d, want 1", got)
		}
	})
}

func TestIncrementAddsToEveryParentItsConditionOrSliceNames(t *testing.T) {
	parallel(t)
	eachDB(t, func(t *testing.T, e *env) {
		db := e.db
		must(t, migrateAll(db))
		var ids []uint
		for i := 0; i < 5; i++ {
			ids = append(ids, newPost(t, db, "p").ID)
		}
		res := gormcounter.Increment(db.Model(&Post{}).Where("id IN ?", ids[:3]), "Likes", -3)
		must(t, res.Error)
		if res.RowsAffected != 3 {
			t.Fatalf("RowsAffected = %d, want 3", res.RowsAffected)
		}
		posts := []Post{{ID: ids[3]}, {ID: ids[4]}}
		res = gormcounter.Increment(db.Model(&posts), "Likes", 7) // a slice model targets its keys
		must(t, res.Error)
		if res.RowsAffected != 2 {
			t.Fatalf("slice model RowsAffected = %d, want 2", res.RowsAffected)
		}
		var all []Post
		must(t, db.Order("id").Find(&all).Error)
		for i, p := range all {
			want := int64(-3)
			if i >= 3 {
				want = 7
			}
			if p.Likes != want {
				t.Fatalf("post %d likes = %d, want %d", p.ID, p.Likes, want)
			}
		}

		// A parent that does not exist: nothing happens, no error, as with Update.
		res = gormcounter.Increment(db.Model(&Post{ID: 999999}), "Likes", 1)
		must(t, res.Error)
		if res.RowsAffected != 0 {
			t.Fatalf("missing parent: RowsAffected = %d, want 0", res.RowsAffected)
		}

		// Soft-deleted rows are not targets, as with Update; Unscoped reaches them.
		n1, n2 := Note{Text: "kept"}, Note{Text: "deleted"}
		must(t, db.Create(&n1).Error)
		must(t, db.Create(&n2).Error)
		must(t, db.Delete(&n2).Error)
		res = gormcounter.Increment(db.Model(&Note{}).Where("id IN ?", []uint{n1.ID, n2.ID}), "Stars", 1)
		must(t, res.Error)
		if res.RowsAffected != 1 {
			t.Fatalf("soft delete: RowsAffected = %d, want 1", res.RowsAffected)
		}
		if _, sum := slotRows(t, db, "note_stars_slots", "note_id", n2.ID); sum != 0 {
			t.Fatalf("a soft-deleted note was incremented")
		}
		must(t, gormcounter.Increment(db.Unscoped().Model(&Note{}).Where("id = ?", n2.ID), "Stars", 1).Error)
		if _, sum := slotRows(t, db, "note_stars_slots", "note_id", n2.ID); sum != 1 {
			t.Fatalf("Unscoped did not reach the soft-deleted note")
		}
	})
}

func TestIncrementWithoutWhereIsRefused(t *testing.T) {
	parallel(t)
	eachDB(t, func(t *testing.T, e *env) {
		db := e.db
		must(t, migrateAll(db))
		a, b := newPost(t, db, "a"), newPost(t, db, "b")
		err := gormcounter.Increment(db.Model(&Post{}), "Likes", 1).Error
		if !errors.Is(err, gorm.ErrMissingWhereClause) {
			t.Fatalf("no WHERE: err = %v, want gorm.ErrMissingWhereClause", err)
		}
		err = gormcounter.Increment(db.Model(&Note{}), "Stars", 1).Error // soft delete's condition alone is not a WHERE
		if !errors.Is(err, gorm.ErrMissingWhereClause) {
			t.Fatalf("no WHERE on a soft-delete model: err = %v, want gorm.ErrMissingWhereClause", err)
		}
		if got := exact(t, db, a.ID).Likes + exact(t, db, b.ID).Likes; got != 0 {
			t.Fatalf("a refused increment wrote something: likes total %d", got)
		}
		res := gormcounter.Increment(db.Session(&gorm.Session{AllowGlobalUpdate: true}).Model(&Post{}), "Likes", 1)
		must(t, res.Error)
		if res.RowsAffected != 2 || exact(t, db, a.ID).Likes != 1 || exact(t, db, b.ID).Likes != 1 {
			t.Fatalf("global increment: RowsAffected %d", res.RowsAffected)
		}
	})
}

// An expression that is neither an increment nor a value is refused,
// naming the counter (a value is an assignment of the total: see
// TestAssignmentSetsTheTotal).
func TestExpressionsThatAreNotIncrementsFail(t *testing.T) {
	parallel(t)
	eachDB(t, func(t *testing.T, e *env) {
		db := e.db
		must(t, migrateAll(db))
		post := newPost(t, db, "p")
		must(t, gormcounter.Increment(db.Model(&post), "Likes", 3).Error)

		cases := []struct {
			name string
			run  func() error
		}{
			{"multiplication", func() error {
				return db.Model(&post).Updates(map[string]any{"title": "x", "likes": gorm.Expr("likes * ?", 2)}).Error
			}},
			{"another column", func() error { return db.Model(&post).UpdateColumn("likes", gorm.Expr("views + ?", 1)).Error }},
			{"subtracting the column", func() error { return db.Model(&post).UpdateColumn("likes", gorm.Expr("? - likes", 1)).Error }},
			{"a SET clause assigning an expression", func() error {
				return db.Model(&post).Clauses(clause.Set{{Column: clause.Column{Name: "likes"}, Value: gorm.Expr("likes * 3")}}).Updates(map[string]any{}).Error
			}},
		}
		for _, c := range cases {
			err := c.run()
			if !errors.Is(err, hotcounter.ErrNotIncrement) {
				t.Fatalf("%s: err = %v, want ErrNotIncrement", c.name, err)
			}
			if !strings.Contains(err.Error(), "Post.") {
				t.Fatalf("%s: error %q does not name the model and field", c.name, err)
			}
		}
		got := exact(t, db, post.ID)
		if got.Likes != 3 || got.Title != "p" {
			t.Fatalf("a refused assignment changed something: %+v", got)
		}

		err := gormcounter.Increment(db.Model(&post), "Title", 1).Error
		if !errors.Is(err, hotcounter.ErrNotCounter) || !strings.Contains(err.Error(), "Post.Title") {
			t.Fatalf("Increment of a non-counter: %v", err)
		}
	})
}

// locked holds a row lock on the row of model with the given id, in its own
// transaction, until release is called. mode is "UPDATE" (SELECT ... FOR
// UPDATE) or "NO KEY UPDATE" (what an UPDATE of the row takes).
func locked(t *testing.T, db *gorm.DB, model any, id uint, mode string) (release func()) {
	t.Helper()
	held, done := make(chan struct{}), make(chan struct{})
	finished := make(chan error, 1)
	go func() {
		finished <- db.Transaction(func(tx *gorm.DB) error {
			err := tx.Model(model).Clauses(clause.Locking{Strength: mode}).Select("id").Where("id = ?", id).Take(model).Error
			close(held)
			if err != nil {
				return err
			}
			<-done
			return nil
		})
	}()
	<-held
	return func() {
		close(done)
		if err := <-finished; err != nil {
			t.Errorf("lock holder: %v", err)
		}
	}
}

// An increment never queues on a lock another transaction holds on the
// parent row. On MariaDB sum counters pre-create their slots by default, so
// their increments are UPDATEs of slot rows that take no lock on the
// parent. Inserting a slot row does (the foreign key check takes a shared
// lock on the parent), so rollup counters, whose slot rows a fold removes,
// and PostgreSQL's FOR UPDATE without precreate are tested where they
// hold. Both ORMs.
func TestIncrementDoesNotWaitForParentLock(t *testing.T) {
	eachORM(t, func(t *testing.T, o counterORM) {
		db := o.db()
		// incrementWhileLocked increments while another transaction holds
		// the row; an increment that queued on the lock would hang until
		// the deadline (the holder lets go only afterwards) and fail.
		incrementWhileLocked := func(t *testing.T, model string, id int64, mode string, fields ...string) {
			release := locked(t, db, gormModel(model, 0), uint(id), mode)
			defer release()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			for i := 0; i < 50; i++ {
				for _, f := range fields {
					if err := o.within(ctx).increment(model, id, f, 1); err != nil {
						t.Fatalf("increment %s with the row held FOR %s: %v (it waited for the parent row lock)", f, mode, err)
					}
				}
			}
			for _, f := range fields {
				if got := exactly(t, o, model, id, f); got != 50 {
					t.Fatalf("%s = %d, want 50", f, got)
				}
			}
		}

		t.Run("FOR UPDATE, fresh row, precreate", func(t *testing.T) {
			incrementWhileLocked(t, modelSkipPost, o.create(t, modelSkipPost), "UPDATE", "likes")
		})
		if o.kind() == my {
			t.Run("FOR UPDATE, fresh post, sum counter pre-created by default", func(t *testing.T) {
				incrementWhileLocked(t, modelPost, o.create(t, modelPost), "UPDATE", "likes")
			})
			return
		}
		t.Run("FOR NO KEY UPDATE (an UPDATE of the post), fresh post, both modes", func(t *testing.T) {
			incrementWhileLocked(t, modelPost, o.create(t, modelPost), "NO KEY UPDATE", "likes", "views")
		})
		t.Run("FOR UPDATE, both modes, slot rows in place", func(t *testing.T) {
			id := o.create(t, modelPost)
			// Without precreate a slot row is inserted by the first increment
			// that picks it (and, in rollup mode, again after each fold); once
			// it exists, increments update it without the foreign key check.
			must(t, db.Exec("INSERT INTO post_likes_slots (post_id, slot, n) SELECT ?, g, 0 FROM generate_series(0, 15) g", id).Error)
			must(t, db.Exec("INSERT INTO post_views_slots (post_id, slot, n) SELECT ?, g, 0 FROM generate_series(0, 63) g", id).Error)
			incrementWhileLocked(t, modelPost, id, "UPDATE", "likes", "views")
		})
	}, on(pg, my))
}

func TestIncrementWritesNothingButSlots(t *testing.T) {
	parallel(t)
	// One connection, so that the warm-up and the counted increment run
	// in one session.
	eachDB(t, func(t *testing.T, e *env) {
		db := e.db
		posts := seed(t, db, 2)
		// A post loaded with its associations, then changed in memory only.
		var p Post
		must(t, db.Preload("Author").Preload("Comments").First(&p, posts[0].ID).Error)
		p.Title = "changed in memory"
		p.Author.Name = "changed in memory"
		p.AuthorID = &posts[1].ID
		p.Comments[0].Body = "changed in memory"

		for _, inc := range []func() *gorm.DB{
			func() *gorm.DB { return gormcounter.Increment(db.Model(&p), "Likes", 1) },
			func() *gorm.DB { return db.Model(&p).UpdateColumn("likes", gorm.Expr("likes + ?", 1)) },
			func() *gorm.DB { return db.Model(&p).Update("likes", gorm.Expr("likes + ?", 1)) },
		} {
			// One upsert; on MariaDB one exact-match UPDATE of the pre-created
			// slot row. The Update forms open no default transaction for an
			// update of one counter alone
			// the same single statement.
			if n := statements(e, func() { must(t, inc().Error) }); n != 1 {
				t.Fatalf("an increment sent %d statements, want 1:\n%s", n, joined(e.log.statements()))
			}
		}
		var got Post
		must(t, db.Preload("Author").Preload("Comments").First(&got, p.ID).Error)
		if want := int64(1 + 3); got.Likes != want {
			t.Fatalf("likes = %d, want %d", got.Likes, want)
		}
		if got.Title == p.Title || got.Author.Name == p.Author.Name || *got.AuthorID == posts[1].ID || got.Comments[0].Body == p.Comments[0].Body {
			t.Fatalf("an increment saved the model or its associations: %+v", got)
		}
	}, pool(1))
}

func TestIncrementsInOtherUpdateForms(t *testing.T) {
	parallel(t)
	eachDB(t, func(t *testing.T, e *env) {
		db := e.db
		must(t, migrateAll(db))
		post := newPost(t, db, "p")

		// A pointer to a map, as Updates accepts it.
		must(t, db.Model(&post).Updates(&map[string]any{"likes": gorm.Expr("likes + ?", 2)}).Error)
		must(t, db.Model(&post).UpdateColumns(&map[string]any{"title": "q", "likes": gorm.Expr("likes + ?", 3)}).Error)
		if got := exact(t, db, post.ID); got.Likes != 5 || got.Title != "q" {
			t.Fatalf("after updates through *map: %+v", got)
		}
		// Omit and Select leave a counter out, as GORM leaves out any column.
		must(t, db.Model(&post).Omit("likes").Updates(map[string]any{"title": "r", "likes": gorm.Expr("likes + ?", 100)}).Error)
		must(t, db.Model(&post).Select("title").Updates(map[string]any{"title": "s", "likes": gorm.Expr("likes + ?", 100)}).Error)
		must(t, db.Model(&post).Select("Likes").Updates(map[string]any{"title": "not me", "likes": gorm.Expr("likes + ?", 1)}).Error)
		if got := exact(t, db, post.ID); got.Likes != 6 || got.Title != "s" {
			t.Fatalf("after Omit/Select: likes %d title %q, want 6 and s", got.Likes, got.Title)
		}
	})
}

func TestSoftDeleteWithOrTargetsLikeGorm(t *testing.T) {
	parallel(t)
	eachDB(t, func(t *testing.T, e *env) {
		db := e.db
		must(t, migrateAll(db))
		notes := []Note{{Text: "x"}, {Text: "y"}, {Text: "x"}}
		must(t, db.Create(&notes).Error)
		// GORM's update reads: (text = x OR text = y) AND deleted_at IS NULL AND id = <note 2>.
		res := gormcounter.Increment(db.Model(&notes[1]).Where("text = ?", "x").Or("text = ?", "y"), "Stars", 1)
		must(t, res.Error)
		if res.RowsAffected != 1 {
			t.Fatalf("RowsAffected = %d, want 1", res.RowsAffected)
		}
		for i, n := range notes {
			_, sum := slotRows(t, db, "note_stars_slots", "note_id", n.ID)
			if want := int64(map[bool]int{true: 1}[i == 1]); sum != want {
				t.Fatalf("note %d stars = %d, want %d", i, sum, want)
			}
		}
	})
}

// TestBatchCreateOfCountersOnlyIsRefused: GORM creates a batch of rows that
// have no column to write with one INSERT ... DEFAULT VALUES, which makes one
// row. Such a batch fails with an error naming the model, and creates
// nothing; one row at a time works.
func TestBatchCreateOfCountersOnlyIsRefused(t *testing.T) {
	parallel(t)
	eachDB(t, func(t *testing.T, e *env) {
		db := e.db
		must(t, db.AutoMigrate(&Stat{}))
		batch := []Stat{{Hits: 1}, {}, {}}
		err := db.Create(&batch).Error
		if err == nil || !strings.Contains(err.Error(), "Stat") || !strings.Contains(err.Error(), "one at a time") {
			t.Fatalf("batch Create of a counters-only model: error %v, want one naming Stat", err)
		}
		if n := rawInt(t, db, "SELECT COUNT(*) FROM stats"); n != 0 {
			t.Fatalf("%d rows were created by a refused batch", n)
		}
		for i := range batch {
			must(t, db.Create(&batch[i]).Error)
		}
		if n := rawInt(t, db, "SELECT COUNT(*) FROM stats"); n != 3 || batch[2].ID == 0 || batch[0].ID == batch[1].ID {
			t.Fatalf("one at a time: %d rows, ids %d %d %d", n, batch[0].ID, batch[1].ID, batch[2].ID)
		}
		var got Stat
		must(t, db.First(&got, batch[0].ID).Error)
		if got.Hits != 1 || got.Total != 0 {
			t.Fatalf("Create of Hits 1: %+v", got)
		}
	})
}

// An increment by 0 of a post that does not exist affects no row.
func TestZeroIncrementOfAMissingPost(t *testing.T) {
	parallel(t)
	eachDB(t, func(t *testing.T, e *env) {
		must(t, migrateAll(e.db))
		for _, f := range []string{"Likes", "Views"} {
			res := gormcounter.Increment(e.db.Model(&Post{ID: 987654}), f, 0)
			if res.Error != nil || res.RowsAffected != 0 {
				t.Errorf("%s +0 of a missing post: err %v, RowsAffected %d, want 0", f, res.Error, res.RowsAffected)
			}
		}
	})
}

// An Increment that cannot be written says why: a statement without a
// model (db.Table, db.Model(nil), db alone, a nil *gorm.DB; Take alike),
// a field the model does not have.
func TestIncrementErrorsSayTheRealCause(t *testing.T) {
	parallel(t)
	e := open(t, lite)
	must(t, migrateAll(e.db))
	post := newPost(t, e.db, "p")
	for what, db := range map[string]*gorm.DB{
		"db.Table":       e.db.Table("posts").Where("id = ?", post.ID),
		"db.Model(nil)":  e.db.Model(nil),
		"db alone":       e.db,
		"a nil *gorm.DB": nil,
	} {
		for call, err := range map[string]error{
			"Increment": gormcounter.Increment(db, "Likes", 1).Error,
			"Take":      gormcounter.Take(db, "Stock", 1).Error,
		} {
			if !errors.Is(err, gormcounter.ErrNoModel) || errors.Is(err, hotcounter.ErrNotConfigured) || !strings.Contains(err.Error(), "db.Model") {
				t.Errorf("%s on %s: %v; want ErrNoModel saying db.Model", call, what, err)
			}
		}
	}
	var loaded Post
	must(t, e.db.First(&loaded, post.ID).Error)
	if loaded.Likes != 0 {
		t.Errorf("likes %d after the refused increments, want 0", loaded.Likes)
	}
	err := gormcounter.Increment(e.db.Model(&post), "Lieks", 1).Error
	if !errors.Is(err, hotcounter.ErrNotCounter) || !strings.Contains(err.Error(), `Post has no field or column "Lieks"`) {
		t.Errorf("Increment of a field Post does not have: %v", err)
	}
}
