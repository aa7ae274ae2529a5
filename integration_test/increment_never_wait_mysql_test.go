package integration_test

import (
	"testing"

	"github.com/hotcounter/hotcounter/gormcounter"
	"gorm.io/gorm"
)

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

// An increment in a MariaDB transaction reads its session's own slot row
// from the transaction's snapshot. If the row was deleted since (a Set of
// the counter, a rebuild), the UPDATE finds nothing: the increment then
// reads the rows as they are now and inserts the row again, so it is not
// lost.
func TestIncrementInATransactionCountsWhenItsSlotRowWasDeletedMySQL(t *testing.T) {
	parallel(t)
	e := open(t, my, pool(1))
	db := e.db
	must(t, db.AutoMigrate(&Post{}))
	post := Post{Title: "x"}
	must(t, db.Create(&post).Error)
	// The session's own row of the post, holding 1.
	must(t, db.Transaction(func(tx *gorm.DB) error {
		return gormcounter.Increment(tx.Model(&Post{ID: post.ID}), "Likes", 1).Error
	}))
	other := withPlugin(t, e, gormcounter.Config{})
	tx := db.Begin()
	must(t, tx.Error)
	defer tx.Rollback()
	var n int64
	must(t, tx.Raw("SELECT COUNT(*) FROM post_likes_slots WHERE post_id = ?", post.ID).Row().Scan(&n)) // the snapshot
	must(t, other.Exec("DELETE FROM post_likes_slots WHERE post_id = ?", post.ID).Error)
	must(t, gormcounter.Increment(tx.Model(&Post{ID: post.ID}), "Likes", 1).Error)
	must(t, tx.Commit().Error)
	var got Post
	must(t, other.First(&got, post.ID).Error)
	if got.Likes != 1 {
		t.Fatalf("likes = %d after its slot rows were deleted and one increment; want 1", got.Likes)
	}
}
