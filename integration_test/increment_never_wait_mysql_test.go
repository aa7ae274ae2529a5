package integration_test

import "testing"

// On MariaDB too, transactions that increment two posts in opposite orders
// (32 writers, 16 random slots declared) never deadlock and lose nothing:
// inside a transaction an increment writes its session's own slot row.
func TestIncrementsInTransactionsInOppositeOrdersNeverDeadlockMySQL(t *testing.T) {
	parallel(t)
	oppositeOrders(t, my)
}

// Plainly declared counters never wait inside open MariaDB transactions,
// GORM and ent: 24 transactions add a like to one post each and stay open,
// on sessions where any lock wait fails at once.
func TestIncrementsInTransactionsNeverWaitMySQL(t *testing.T) {
	parallel(t)
	heldTransactions(t, my)
}
