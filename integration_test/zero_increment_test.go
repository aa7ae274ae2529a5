package integration_test

import (
	"testing"

	"github.com/hotcounter/hotcounter/gormcounter"
)

// An increment by 0 of a post that does not exist affects no row.
func TestZeroIncrementOfAMissingPost(t *testing.T) {
	eachDB(t, func(t *testing.T, e *env) {
		must(t, migrateAll(e.db))
		for _, f := range []string{"Likes", "Views"} {
			res := gormcounter.Increment(e.db.Model(&Post{ID: 987654}), f, 0)
			if res.Error != nil || res.RowsAffected != 0 {
				t.Errorf("%s +0 of a missing post: err %v, RowsAffected %d, want 0", f, res.Error, res.RowsAffected)
			}
		}
	})
}
