package integration_test

import "testing"

// InnoDB's trap: an UPDATE that finds no slot row locks its gap, and the
// INSERT that follows deadlocks with other writers doing the same (MySQL
// bug 52020). 64 goroutines increment a post created an instant before,
// five times per counter, through each ORM. likes, a sum counter, has its
// slot rows pre-created (the default on MariaDB), so every increment is an
// exact-match UPDATE: the total is exact and the server counts no
// deadlock. views, a rollup counter, has its slot rows inserted by the
// first increments: the total must be exact (the library retries a
// deadlock it owns); the deadlocks and row lock waits the server counted
// are logged.
func TestFirstIncrementsOfAFreshParentDoNotDeadlock(t *testing.T) {
	exclusive(t, my) // it reads the server's count of deadlocks
	eachORMInTurn(t, my, func(t *testing.T, o counterORM) {
		const writers, each = 64, 20
		for _, field := range []string{"likes", "views"} {
			t.Run(field, func(t *testing.T) {
				for round := range 5 {
					id := o.create(t, modelPost)
					deadlocks, waits := innodbStatus(t, o.db(), "Innodb_deadlocks"), innodbStatus(t, o.db(), "Innodb_row_lock_waits")
					done := hammer(t, writers, each, func() error { return o.increment(modelPost, id, field, 1) })
					deadlocks = innodbStatus(t, o.db(), "Innodb_deadlocks") - deadlocks
					waits = innodbStatus(t, o.db(), "Innodb_row_lock_waits") - waits
					value, err := o.exact(modelPost, id, field)
					must(t, err)
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
	}, pool(70))
}
