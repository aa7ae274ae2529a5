package integration_test

import (
	"context"
	"testing"
	"time"

	"gorm.io/gorm"
)

// A rollup pass that fails goes to the loop's onError, and the loop goes
// on: once the fault is gone, a later pass folds what was pending. Both
// ORMs, the same behaviour. The fault is the slot table renamed away.
func TestRollupLoopHandsAFailedPassToOnErrorAndGoesOn(t *testing.T) {
	eachORM(t, func(t *testing.T, o counterORM) {
		id := o.create(t, modelPost)
		must(t, o.increment(modelPost, id, "views", 3))
		loop := func(ctx context.Context, every time.Duration, onError func(error)) error {
			return o.with(t, settings{OnError: onError}).rollupLoop(ctx, modelPost, every)
		}
		loopRecovers(t, o.db(), loop, func() int64 {
			return o.cached(t, modelPost, id, "views") // the column, as folded
		})
	}, everyEntTable())
}

// loopRecovers runs loop with post_views_slots renamed away until onError
// has heard of a failed pass, puts the table back, and waits for views
// (the folded column) to show the 3 pending views.
func loopRecovers(t *testing.T, db *gorm.DB, loop func(context.Context, time.Duration, func(error)) error, views func() int64) {
	t.Helper()
	must(t, db.Exec("ALTER TABLE post_views_slots RENAME TO post_views_slots_away").Error)
	failed := make(chan error, 1)
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- loop(ctx, 5*time.Millisecond, func(err error) {
			select {
			case failed <- err:
			default:
			}
		})
	}()
	select {
	case err := <-failed:
		t.Logf("the failed pass: %v", err)
	case err := <-done:
		t.Fatalf("RollupLoop returned %v while its table was away; want it to go on", err)
	case <-time.After(30 * time.Second):
		t.Fatal("onError heard of no failed pass in 30 s while the slot table was away")
	}
	if got := views(); got != 0 {
		t.Fatalf("views %d folded while the slot table was away", got)
	}
	must(t, db.Exec("ALTER TABLE post_views_slots_away RENAME TO post_views_slots").Error)
	waitFor(t, 30*time.Second, "a pass to fold the 3 views once the table is back", func() bool { return views() == 3 })
	stop()
	if err := <-done; err != nil {
		t.Fatalf("RollupLoop after cancel: %v, want nil", err)
	}
}
