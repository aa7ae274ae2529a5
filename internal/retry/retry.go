// Package retry re-runs work whose transaction hotcounter owns when the
// database aborted it for a reason that a second attempt can clear: a
// deadlock, a serialization failure, a lock timeout, SQLite being busy.
// Inside a caller's transaction nothing is retried: the caller owns it.
package retry

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/hotcounter/hotcounter/internal/dberr"
)

// Transient reports whether err is worth another attempt of the whole
// transaction (see dberr.Transient).
func Transient(err error) bool { return dberr.Transient(err) }

// Do runs fn up to attempts times while it fails with a transient error,
// sleeping a little longer, with jitter, before each new attempt. A
// serialization failure (PostgreSQL's 40001) is retried for as long as ctx
// allows, whatever attempts says: under SERIALIZABLE, writers of one hot
// row abort one another's statements without end, and each new attempt,
// on a fresh snapshot, is the one that goes through once the others have.
func Do(ctx context.Context, attempts int, fn func() error) error {
	var err error
	for i := 0; ; i++ {
		if err = fn(); !Transient(err) {
			return err
		}
		if i+1 >= attempts && !dberr.SerializationFailure(err) {
			return err
		}
		// Exponential from 5 ms, capped at 200 ms, half of it jitter, so that
		// the victims of one deadlock do not all come back at once.
		ceiling := min(200*time.Millisecond, time.Duration(1<<min(i, 10))*5*time.Millisecond)
		backoff := ceiling/2 + rand.N(ceiling/2+1)
		select {
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		case <-time.After(backoff):
		}
	}
}
