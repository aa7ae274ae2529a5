package integration_test

import "testing"

// MariaDB's count triggers never make a writer wait either: the storm of
// countStorm, on sessions where any lock wait fails at once. Each trigger
// adds to its session's own slot row, which no other session writes.
func TestCountTriggersNeverWaitMySQL(t *testing.T) {
	parallel(t)
	countStorm(t, open(t, my, pool(writersPool)))
}
