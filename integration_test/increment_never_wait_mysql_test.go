package integration_test

import (
	"fmt"
	"testing"
)

// Plainly declared counters never wait inside open MariaDB transactions,
// GORM and ent: 24 transactions add a like to one post each and stay open,
// on sessions where any lock wait fails at once.
func TestIncrementsInTransactionsNeverWaitMySQL(t *testing.T) {
	parallel(t)
	heldTransactions(t, my)
}

// An increment in a MariaDB transaction reads its session's own slot row
// from the transaction's snapshot. If the row was deleted since (a Set of
// the counter, a rebuild), the UPDATE finds nothing: the increment then
// reads the rows as they are now and inserts the row again, so it is not
// lost. GORM and ent (whose slot tables have a surrogate key, by which the
// row is updated), each on a pool of one connection, so that both
// transactions are the same session.
func TestIncrementInATransactionCountsWhenItsSlotRowWasDeletedMySQL(t *testing.T) {
	eachORM(t, func(t *testing.T, o counterORM) {
		post := o.create(t, modelPost)
		// The session's own row of the post, holding 1.
		must(t, o.inTx(func(tx counterORM) error { return tx.increment(modelPost, post, "likes", 1) }))
		other := openPool(t, o.onEnv(), 1)
		must(t, o.inTx(func(tx counterORM) error {
			if _, err := tx.exact(modelPost, post, "likes"); err != nil { // the snapshot
				return err
			}
			res, err := other.Exec("DELETE FROM post_likes_slots WHERE post_id = ?", post)
			if err != nil {
				return err
			}
			if n, err := res.RowsAffected(); err != nil || n == 0 {
				return fmt.Errorf("deleted %d slot rows (%v); want the session's own row", n, err)
			}
			return tx.increment(modelPost, post, "likes", 1)
		}))
		if got := exactly(t, o, modelPost, post, "likes"); got != 1 {
			t.Fatalf("likes = %d after its slot rows were deleted and one increment; want 1", got)
		}
	}, on(my), pool(1))
}
