package retry

import (
	"context"
	"errors"
	"testing"
)

type pgError struct{ code string }

func (e pgError) Error() string    { return "pg " + e.code }
func (e pgError) SQLState() string { return e.code }

// A serialization failure is retried past the attempts a deadlock gets, as
// long as the context allows; a deadlock stops at the attempts; a context
// that ends stops the retries.
func TestSerializationFailuresAreRetriedAsLongAsTheContextAllows(t *testing.T) {
	ctx := context.Background()
	failing := func(code string, times int, calls *int) func() error {
		return func() error {
			*calls++
			if *calls <= times {
				return pgError{code}
			}
			return nil
		}
	}
	calls := 0
	if err := Do(ctx, 3, failing("40001", 8, &calls)); err != nil || calls != 9 {
		t.Errorf("8 serialization failures with 3 attempts: err %v after %d calls; want nil after 9", err, calls)
	}
	calls = 0
	if err := Do(ctx, 3, failing("40P01", 8, &calls)); err == nil || calls != 3 {
		t.Errorf("8 deadlocks with 3 attempts: err %v after %d calls; want the deadlock after 3", err, calls)
	}
	done, cancel := context.WithCancel(ctx)
	cancel()
	calls = 0
	if err := Do(done, 3, failing("40001", 8, &calls)); !errors.Is(err, context.Canceled) || calls != 1 {
		t.Errorf("a serialization failure under a context that ended: err %v after %d calls; want it with context.Canceled after 1", err, calls)
	}
}
