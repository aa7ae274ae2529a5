package integration_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/hotcounter/hotcounter"
	"github.com/hotcounter/hotcounter/examples/gormgen/model"
	"github.com/hotcounter/hotcounter/examples/gormgen/query"
	"github.com/hotcounter/hotcounter/gormcounter"
)

// gorm.io/gen: the typed queries it generates from a model with counter
// tags (those of examples/gormgen) write and read counters as GORM's own
// API does, with nothing added for gen.

// genPosts migrates gen's model on e's database and returns its queries
// and n new posts.
func genPosts(t *testing.T, e *env, n int) (*query.Query, []uint) {
	t.Helper()
	must(t, e.db.AutoMigrate(&model.Post{}))
	q := query.Use(e.db)
	ids := make([]uint, n)
	for i := range ids {
		p := &model.Post{Title: "post"}
		must(t, q.Post.WithContext(context.Background()).Create(p))
		ids[i] = p.ID
	}
	return q, ids
}

// Increments written through gen's typed API (UpdateSimple(p.Likes.Add(1)),
// Update(p.Likes, p.Likes.Add(1)), UpdateColumnSimple, in gen's
// transactions) go to the slots, as gorm.Expr does, from many writers:
// every one is counted, and a rollup counter's column is not written until
// a rollup pass folds the slots into it. Every database.
func TestGenIncrementsGoToTheSlots(t *testing.T) {
	eachDB(t, func(t *testing.T, e *env) {
		q, ids := genPosts(t, e, 1)
		id := ids[0]
		ctx := context.Background()
		p := q.Post
		writers, each := writersFor(e.kind)
		done := hammer(t, writers, each, func() error {
			var err error
			switch rand.IntN(4) {
			case 0:
				_, err = p.WithContext(ctx).Where(p.ID.Eq(id)).UpdateSimple(p.Likes.Add(1), p.Views.Add(2))
			case 1:
				_, err = p.WithContext(ctx).Where(p.ID.Eq(id)).Update(p.Likes, p.Likes.Add(1))
				if err == nil {
					_, err = p.WithContext(ctx).Where(p.ID.Eq(id)).Update(p.Views, p.Views.Add(2))
				}
			case 2:
				_, err = p.WithContext(ctx).Where(p.ID.Eq(id)).UpdateColumnSimple(p.Likes.Add(1), p.Views.Add(2))
			default:
				err = q.Transaction(func(tx *query.Query) error {
					_, err := tx.Post.WithContext(ctx).Where(tx.Post.ID.Eq(id)).UpdateSimple(tx.Post.Likes.Add(1), tx.Post.Views.Add(2))
					return err
				})
			}
			return err
		})
		if column := rawInt(t, e.db, "SELECT views FROM gormgen_posts WHERE id = ?", id); column != 0 {
			t.Errorf("the views column holds %d before any rollup pass; the increments must go to the slots", column)
		}
		got, err := p.WithContext(gormcounter.WithLive(ctx)).Where(p.ID.Eq(id)).First()
		must(t, err)
		if got.Likes != done || got.Views != 2*done {
			t.Fatalf("likes=%d views=%d after %d increments of each through gen, want %d and %d", got.Likes, got.Views, done, done, 2*done)
		}
		must(t, gormcounter.RollupPass(e.db, &model.Post{}))
		if column := rawInt(t, e.db, "SELECT views FROM gormgen_posts WHERE id = ?", id); column != 2*done {
			t.Errorf("the views column holds %d after a rollup pass, want %d", column, 2*done)
		}
	}, pool(writersPool))
}

// Loads and queries through gen read the counters as GORM's own do: First
// and Find fill them; Where and Order on a sum counter read its total;
// Select of it reads it; a rollup counter reads its column, or the exact
// value under Clauses(gormcounter.Live) or gormcounter.WithLive.
// Assignments set the total (p.Likes.Value(7), Update(p.Likes, 9)), and a
// write that is no increment is refused naming the counter. Every database.
func TestGenReadsAndAssignsCountersAsGORMDoes(t *testing.T) {
	eachDB(t, func(t *testing.T, e *env) {
		q, ids := genPosts(t, e, 3)
		ctx := context.Background()
		p := q.Post
		for i, id := range ids {
			_, err := p.WithContext(ctx).Where(p.ID.Eq(id)).UpdateSimple(p.Likes.Add(int64(i+1)), p.Views.Add(int64(10*(i+1))))
			must(t, err)
		}
		first, err := p.WithContext(ctx).Where(p.ID.Eq(ids[2])).First()
		must(t, err)
		if first.Likes != 3 || first.Views != 0 {
			t.Errorf("First: likes=%d views=%d, want 3 and 0 (views: the column, before a rollup)", first.Likes, first.Views)
		}
		all, err := p.WithContext(ctx).Order(p.ID).Find()
		must(t, err)
		if len(all) != len(ids) {
			t.Fatalf("Find: %d posts, want %d", len(all), len(ids))
		}
		for i, got := range all {
			if got.Likes != int64(i+1) {
				t.Errorf("Find: post %d likes=%d, want %d", got.ID, got.Likes, i+1)
			}
		}
		if n, err := p.WithContext(ctx).Where(p.Likes.Gt(1)).Count(); err != nil || n != 2 {
			t.Errorf("Where(Likes > 1).Count() = %d (%v), want 2", n, err)
		}
		top, err := p.WithContext(ctx).Order(p.Likes.Desc()).First()
		must(t, err)
		if top.ID != ids[2] {
			t.Errorf("Order(Likes desc).First() is post %d, want %d", top.ID, ids[2])
		}
		sel, err := p.WithContext(ctx).Select(p.ID, p.Likes).Where(p.ID.Eq(ids[1])).First()
		must(t, err)
		if sel.Likes != 2 {
			t.Errorf("Select(ID, Likes): likes=%d, want 2", sel.Likes)
		}
		live, err := p.WithContext(ctx).Clauses(gormcounter.Live).Where(p.ID.Eq(ids[2])).First()
		must(t, err)
		withLive, err := p.WithContext(gormcounter.WithLive(ctx)).Where(p.ID.Eq(ids[2])).First()
		must(t, err)
		if live.Views != 30 || withLive.Views != 30 {
			t.Errorf("views under Clauses(Live) %d, under WithLive %d, want 30", live.Views, withLive.Views)
		}

		_, err = p.WithContext(ctx).Where(p.ID.Eq(ids[0])).UpdateSimple(p.Likes.Value(7))
		must(t, err)
		_, err = p.WithContext(ctx).Where(p.ID.Eq(ids[1])).Update(p.Likes, 9)
		must(t, err)
		for id, want := range map[uint]int64{ids[0]: 7, ids[1]: 9} {
			got, err := p.WithContext(ctx).Where(p.ID.Eq(id)).First()
			must(t, err)
			if got.Likes != want {
				t.Errorf("post %d: likes=%d after an assignment, want %d", id, got.Likes, want)
			}
		}
		_, err = p.WithContext(ctx).Where(p.ID.Eq(ids[0])).UpdateSimple(p.Likes.Mul(2))
		if !errors.Is(err, hotcounter.ErrNotIncrement) || !strings.Contains(err.Error(), "Post.Likes") {
			t.Errorf("UpdateSimple(Likes.Mul(2)): %v, want ErrNotIncrement naming Post.Likes", err)
		}
	})
}
