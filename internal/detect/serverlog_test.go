package detect

import "testing"

// A piece of a PostgreSQL 15 log with log_lock_waits on: two waits of
// backend 101 on a row of posts, one of 102 on a transaction lock without
// a row, and one of 103 that the filter leaves out.
const lockWaitLog = `2026-11-30 23:10:01.101 UTC [101] postgres@test LOG:  process 101 still waiting for ShareLock on transaction 5001 after 10.112 ms
2026-11-30 23:10:01.101 UTC [101] postgres@test DETAIL:  Process holding the lock: 100. Wait queue: 101.
2026-11-30 23:10:01.101 UTC [101] postgres@test CONTEXT:  while updating tuple (0,42) in relation "posts"
2026-11-30 23:10:01.101 UTC [101] postgres@test STATEMENT:  UPDATE posts SET likes = likes + 1 WHERE id = 42
2026-11-30 23:10:01.150 UTC [101] postgres@test LOG:  process 101 acquired ShareLock on transaction 5001 after 59.004 ms
2026-11-30 23:10:01.160 UTC [102] postgres@test LOG:  process 102 still waiting for ShareLock on transaction 5002 after 10.2 ms
2026-11-30 23:10:01.160 UTC [102] postgres@test STATEMENT:  COMMIT
2026-11-30 23:10:01.170 UTC [103] postgres@test LOG:  process 103 still waiting for ExclusiveLock on tuple (0,42) of relation 16384 of database 5 after 10.0 ms
2026-11-30 23:10:01.170 UTC [103] postgres@test CONTEXT:  while updating tuple (0,42) in relation "posts"
2026-11-30 23:10:01.171 UTC [103] postgres@test LOG:  process 103 acquired ExclusiveLock on tuple (0,42) of relation 16384 of database 5 after 900.0 ms
2026-11-30 23:10:01.200 UTC [101] postgres@test LOG:  process 101 still waiting for ShareLock on transaction 5003 after 10.5 ms
2026-11-30 23:10:01.200 UTC [101] postgres@test CONTEXT:  while updating tuple (0,43) in relation "posts"
`

func TestParseLockWaitLogCountsWaitsByRelationAndTheLongest(t *testing.T) {
	w := ParseLockWaitLog(lockWaitLog, func(pid int) bool { return pid != 103 })
	if w.Waits != 3 || w.Relations["posts"] != 2 || len(w.Relations) != 1 || w.LongestMs != 59.004 || len(w.RelationIDs) != 0 {
		t.Fatalf("parsed %+v; want 3 waits, 2 of them on posts, the longest 59.004 ms", w)
	}
	all := ParseLockWaitLog(lockWaitLog, nil)
	if all.Waits != 4 || all.Relations["posts"] != 3 || all.LongestMs != 900 || all.RelationIDs["5/16384"] != 1 {
		t.Fatalf("parsed without a filter %+v; want 4 waits, 3 on posts, the longest 900 ms", all)
	}
}
