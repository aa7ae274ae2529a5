package integration_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"gorm.io/gorm"

	"github.com/hotcounter/hotcounter"
	"github.com/hotcounter/hotcounter/gormcounter"
)

// hotKey finds the reported row of table.column, or fails.
func hotKey(t *testing.T, keys []hotcounter.HotKey, table, column, key string) hotcounter.HotKey {
	t.Helper()
	for _, k := range keys {
		if k.Table == table && k.Column == column && k.Key == key {
			return k
		}
	}
	t.Fatalf("no hot key %s.%s %s in %+v", table, column, key, keys)
	return hotcounter.HotKey{}
}

func TestHotKeysCountIncrementsPerRowOfCountersAndPlainColumns(t *testing.T) {
	eachDB(t, func(t *testing.T, e *env) {
		plainRows(t, e.db, 50)
		must(t, e.db.AutoMigrate(&Post{}))
		post := Post{Title: "hot"}
		must(t, e.db.Create(&post).Error)
		for i := 0; i < 30; i++ {
			must(t, e.db.Model(&Plain{ID: 42}).UpdateColumn("likes", gorm.Expr("likes + ?", 1)).Error)
		}
		for i := 0; i < 3; i++ {
			must(t, e.db.Model(&Plain{}).Where("id = ?", 9).Update("likes", gorm.Expr("likes + ?", 2)).Error)
			must(t, e.db.Model(&Plain{ID: 7}).Updates(map[string]any{"likes": gorm.Expr("likes + 1"), "title": "t"}).Error)
		}
		for i := 0; i < 20; i++ {
			must(t, gormcounter.Increment(e.db.Model(&post), "Likes", 1).Error)
		}
		// Not increments of one row by its key, or not through GORM's
		// update: not counted.
		must(t, e.db.Model(&Plain{}).Where("id IN ?", []int{1, 2}).UpdateColumn("likes", gorm.Expr("likes + ?", 1)).Error)
		must(t, e.db.Model(&Plain{ID: 3}).UpdateColumn("title", "x").Error)
		must(t, e.db.Exec("UPDATE plains SET likes = likes + 1 WHERE id = 5").Error)

		keys, err := gormcounter.HotKeys(e.db, 10)
		must(t, err)
		for _, want := range []struct {
			table, column, key string
			counter            bool
			count              int64
		}{
			{"plains", "likes", "42", false, 30},
			{"posts", "likes", fmt.Sprint(post.ID), true, 20},
			{"plains", "likes", "9", false, 3},
			{"plains", "likes", "7", false, 3},
		} {
			k := hotKey(t, keys, want.table, want.column, want.key)
			if k.Count != want.count || k.Error != 0 || k.Counter != want.counter || k.Rate <= 0 {
				t.Errorf("%s.%s %s = %+v, want %d increments exactly, counter %v, a rate", want.table, want.column, want.key, k, want.count, want.counter)
			}
		}
		if len(keys) != 4 {
			t.Errorf("hot keys = %+v, want the 4 rows incremented by key", keys)
		}
		if keys[0].Key != "42" {
			t.Errorf("hottest = %+v, want plains 42 first", keys[0])
		}
		// k bounds the rows of all counters and columns together.
		top, err := gormcounter.HotKeys(e.db, 2)
		must(t, err)
		if len(top) != 2 || top[0].Key != "42" || top[1].Column != "likes" || top[1].Table != "posts" {
			t.Errorf("the 2 hottest = %+v, want plains 42 and the post", top)
		}
	})
}

// With the counting of hot keys turned off in the Config, HotKeys says so
// instead of reporting no hot rows. GORM and ent, on every database.
func TestHotKeysWithTheCountingTurnedOffSaySo(t *testing.T) {
	eachORM(t, func(t *testing.T, o counterORM) {
		o = o.with(t, settings{HotKeysOff: true})
		post := o.create(t, modelPost)
		for i := 0; i < 5; i++ {
			must(t, o.increment(modelPost, post, "likes", 1))
		}
		keys, err := o.hotKeys(10)
		if !errors.Is(err, hotcounter.ErrHotKeysOff) || !strings.Contains(err.Error(), "HotKeys.Off") {
			t.Fatalf("HotKeys with the counting off = %v, %v; want hotcounter.ErrHotKeysOff saying HotKeys.Off is set", keys, err)
		}
		if got := exactly(t, o, modelPost, post, "likes"); got != 5 {
			t.Errorf("likes = %d, want 5", got)
		}
	})
}
