package integration_test

import (
	"context"
	"testing"

	"github.com/hotcounter/hotcounter/entcounter"
)

// InnoDB's trap through ent: 64 goroutines increment a parent created an
// instant before. likes has pre-created slots (MariaDB's default): exact,
// and the server counts no deadlock. views (rollup) has its slot rows
// inserted by the first increments: exact; deadlocks and waits are logged.
func TestEntFirstIncrementsOfAFreshParentDoNotDeadlock(t *testing.T) {
	exclusive(t, my) // it reads the server's count of deadlocks
	e := openEnt(t, my, true, pool(70))
	ctx := context.Background()
	c := e.client
	const writers, each = 64, 20
	for _, field := range []string{"likes", "views"} {
		t.Run(field, func(t *testing.T) {
			for round := range 5 {
				p := c.Post.Create().SetTitle("fresh").SaveX(ctx)
				deadlocks, waits := innodbStatus(t, e.db, "Innodb_deadlocks"), innodbStatus(t, e.db, "Innodb_row_lock_waits")
				done := hammer(t, writers, each, func() error {
					u := c.Post.UpdateOneID(p.ID)
					if field == "likes" {
						return u.AddLikes(1).Exec(ctx)
					}
					return u.AddViews(1).Exec(ctx)
				})
				deadlocks = innodbStatus(t, e.db, "Innodb_deadlocks") - deadlocks
				waits = innodbStatus(t, e.db, "Innodb_row_lock_waits") - waits
				got := c.Post.GetX(entcounter.WithLive(ctx), p.ID)
				value := got.Likes
				if field == "views" {
					value = got.Views
				}
				t.Logf("round %d: %d writers x %d: %s %d, deadlocks %d, row lock waits %d", round, writers, each, field, value, deadlocks, waits)
				if done != writers*each || value != done {
					t.Fatalf("%s %d after %d of %d increments", field, value, done, writers*each)
				}
				if field == "likes" && deadlocks != 0 {
					t.Fatalf("%d deadlocks with pre-created slots", deadlocks)
				}
			}
		})
	}
}
