package integration_test

import "testing"

// MariaDB's count triggers never make a writer wait either: the storm of
// countStorm, on sessions where any lock wait fails at once. Each trigger
// adds to its session's own slot row, which no other session writes.
func TestCountTriggersNeverWaitMySQL(t *testing.T) {
	parallel(t)
	countStorm(t, open(t, my, pool(writersPool)))
}

// Twenty open MariaDB transactions add objects to two categories in
// crossing orders (see crossingTransactions): none waits, counts exact.
func TestCountTriggersCrossingTransactionsNeverWaitMySQL(t *testing.T) {
	parallel(t)
	crossingTransactions(t, open(t, my, pool(writersPool)), countKinds[0], 20)
}

// The same with the counts kept by GORM hooks on MariaDB.
func TestCountHooksCrossingTransactionsNeverWaitMySQL(t *testing.T) {
	parallel(t)
	crossingTransactions(t, open(t, my, pool(writersPool)), countKinds[1], 20)
}
