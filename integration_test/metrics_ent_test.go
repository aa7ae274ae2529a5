package integration_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/hotcounter/hotcounter/entcounter"
)

// ent's hot keys count the increments of plain integer fields too
// (AddX on a field that is no counter), beside its counters'.
func TestEntHotKeysCountPlainFieldIncrements(t *testing.T) {
	eachEnt(t, func(t *testing.T, e *entEnv) {
		ctx := context.Background()
		hook, err := entcounter.Configure(e.client, entcounter.Config{})
		must(t, err)
		e.client.Use(hook)

		post := e.client.Post.Create().SetTitle("hot").SaveX(ctx)
		naive := e.client.NaivePost.Create().SaveX(ctx)
		for i := 0; i < 12; i++ {
			must(t, e.client.Post.UpdateOneID(post.ID).AddLikes(1).Exec(ctx))
		}
		for i := 0; i < 5; i++ {
			must(t, e.client.NaivePost.UpdateOneID(naive.ID).AddLikes(1).Exec(ctx))
		}
		want := map[string]int64{
			"posts.likes " + fmt.Sprint(post.ID) + " counter":      12,
			"naive_posts.likes " + fmt.Sprint(naive.ID) + " plain": 5,
		}
		got := map[string]int64{}
		hot, err := entcounter.HotKeys(e.client, 10)
		must(t, err)
		for _, k := range hot {
			kind := "plain"
			if k.Counter {
				kind = "counter"
			}
			got[k.Table+"."+k.Column+" "+k.Key+" "+kind] = k.Count
			if k.Error != 0 || k.Rate <= 0 {
				t.Errorf("hot key %+v: want an exact count and a rate", k)
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("hot keys = %v, want %v", got, want)
		}
	}, entTables("posts", "naive_posts"))
}
