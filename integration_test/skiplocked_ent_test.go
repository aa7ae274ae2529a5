package integration_test

import (
	"context"
	"errors"
	"testing"
)

// Skip-locked slots (64, pre-created) lose nothing, in autocommit and in
// transactions, and spread over the slots.
func TestEntSkipLockedLosesNothing(t *testing.T) {
	parallel(t)
	eachEnt(t, func(t *testing.T, e *entEnv) {
		ctx := context.Background()
		c := e.client
		p := c.SkipPost.Create().SaveX(ctx)
		if n := rawInt(t, e.db, "SELECT COUNT(*) FROM skip_post_likes_slots WHERE skip_post_id = ?", p.ID); n != 64 {
			t.Fatalf("%d pre-created slot rows, want 64", n)
		}
		writers, each := writersFor(e.kind)
		done := hammer(t, writers, each, func() error { return c.SkipPost.UpdateOneID(p.ID).AddLikes(1).Exec(ctx) })
		done += hammer(t, 4, 10, func() error {
			tx, err := c.Tx(ctx)
			if err != nil {
				return err
			}
			if err := tx.SkipPost.UpdateOneID(p.ID).AddLikes(1).Exec(ctx); err != nil {
				return errors.Join(err, tx.Rollback())
			}
			return tx.Commit()
		})
		if got := c.SkipPost.GetX(ctx, p.ID); got.Likes != done || done != int64(writers*each+40) {
			t.Fatalf("likes=%d after %d acknowledged increments of %d", got.Likes, done, writers*each+40)
		}
		if used := rawInt(t, e.db, "SELECT COUNT(*) FROM skip_post_likes_slots WHERE skip_post_id = ? AND n > 0", p.ID); e.kind != lite && used < 2 {
			t.Fatalf("increments used %d slot rows, want them spread", used)
		}
	}, pool(writersPool))
}
