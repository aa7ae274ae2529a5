package integration_test

import (
	"context"
	stdsql "database/sql"
	"database/sql/driver"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"entgo.io/ent/dialect"
	entsql "entgo.io/ent/dialect/sql"
	mysqldriver "github.com/go-sql-driver/mysql"
	"gorm.io/driver/mysql"
	"gorm.io/gorm"

	"github.com/hotcounter/hotcounter/gormcounter"
	"github.com/hotcounter/hotcounter/integration_test/ent"
)

// recycleEvery is the connections' lifetime in TestCountsStayExactOnRecycledConnections:
// far shorter than the test, so that every writer's session ends many times.
const recycleEvery = 100 * time.Millisecond

// On MySQL/MariaDB the library keeps a session's claim of its own slot row
// (a named lock, GET_LOCK, and the user variable @hc_slot) across that
// session's transactions. Connections recycled every 100 ms
// (SetConnMaxLifetime) while 16 writers increment two posts in
// transactions and outside them lose or double nothing: a claim is checked
// before each use and taken again by a new session. GORM and ent.
func TestCountsStayExactOnRecycledConnections(t *testing.T) {
	parallel(t)
	pooledConnectionsKeepCountsExact(t, func(t *testing.T, dsn string) *stdsql.DB {
		db, err := stdsql.Open("mysql", dsn)
		must(t, err)
		db.SetConnMaxLifetime(recycleEvery)
		return db
	})
}

// The same when the pool resets every connection between two uses, as
// ProxySQL and MaxScale do with COM_RESET_CONNECTION: what it does to the
// state the library keeps (user variables cleared, every GET_LOCK lock
// released) is done before each reuse (go-sql-driver sends no
// COM_RESET_CONNECTION itself: its ResetSession checks the connection
// only). Each transaction then claims a number again.
func TestCountsStayExactOnConnectionsResetBetweenUses(t *testing.T) {
	skipUnselected(t, my) // before the check of the resets, which needs the subtests
	parallel(t)
	var resets atomic.Int64
	pooledConnectionsKeepCountsExact(t, func(t *testing.T, dsn string) *stdsql.DB {
		cfg, err := mysqldriver.ParseDSN(dsn)
		must(t, err)
		inner, err := mysqldriver.NewConnector(cfg)
		must(t, err)
		return stdsql.OpenDB(resettingConnector{inner, &resets})
	})
	t.Cleanup(func() { // after the subtests, which run in parallel
		if n := resets.Load(); n < 100 {
			t.Errorf("the pools reset %d connections; the test needs them reset between most uses", n)
		}
	})
}

// pooledConnectionsKeepCountsExact runs 16 writers incrementing two posts
// in transactions and outside them, GORM and ent, each on a pool that
// pooled opens; every acknowledged increment is counted once.
func pooledConnectionsKeepCountsExact(t *testing.T, pooled func(t *testing.T, dsn string) *stdsql.DB) {
	run := func(t *testing.T, inTx func(id int) error, outside func(id int) error, ids []int, total func(id int) int64) {
		var acked [2]atomic.Int64
		deadline := time.Now().Add(1500 * time.Millisecond)
		hammer(t, 16, 1<<30, func() error {
			if time.Now().After(deadline) {
				return errStop
			}
			i := rand.IntN(2)
			var err error
			if rand.IntN(2) == 0 {
				err, _ = attempt(func() error { return inTx(ids[i]) })
			} else {
				err = outside(ids[i])
			}
			if err == nil {
				acked[i].Add(1)
			}
			return err
		})
		for i, id := range ids {
			if got := total(id); got != acked[i].Load() {
				t.Errorf("post %d: likes %d after %d acknowledged increments", id, got, acked[i].Load())
			}
		}
	}
	t.Run("gorm", func(t *testing.T) {
		e := open(t, my, pool(writersPool))
		sqlDB := pooled(t, e.dsn)
		t.Cleanup(func() { sqlDB.Close() })
		sqlDB.SetMaxOpenConns(e.pool)
		sqlDB.SetMaxIdleConns(4)
		db, err := gorm.Open(mysql.New(mysql.Config{Conn: sqlDB}), &gorm.Config{Logger: e.log})
		must(t, err)
		must(t, db.Use(gormcounter.New(gormcounter.Config{})))
		must(t, db.AutoMigrate(&Post{}))
		posts := []Post{{Title: "a"}, {Title: "b"}}
		must(t, db.Create(&posts).Error)
		run(t,
			func(id int) error {
				return db.Transaction(func(tx *gorm.DB) error {
					return gormcounter.Increment(tx.Model(&Post{ID: uint(id)}), "Likes", 1).Error
				})
			},
			func(id int) error { return gormcounter.Increment(db.Model(&Post{ID: uint(id)}), "Likes", 1).Error },
			[]int{int(posts[0].ID), int(posts[1].ID)},
			func(id int) int64 {
				var p Post
				must(t, db.First(&p, id).Error)
				return p.Likes
			})
	})
	t.Run("ent", func(t *testing.T) {
		e := openEnt(t, my, true, pool(writersPool))
		db := pooled(t, e.dsn)
		t.Cleanup(func() { db.Close() })
		db.SetMaxOpenConns(e.pool)
		db.SetMaxIdleConns(4)
		ctx := context.Background()
		c := ent.NewClient(ent.Driver(entsql.OpenDB(dialect.MySQL, db)))
		a, b := c.Post.Create().SetTitle("a").SaveX(ctx), c.Post.Create().SetTitle("b").SaveX(ctx)
		run(t,
			func(id int) error {
				return inTxRollingBack(ctx, c, false, func(tx *ent.Tx) error { return tx.Post.UpdateOneID(id).AddLikes(1).Exec(ctx) })
			},
			func(id int) error { return c.Post.UpdateOneID(id).AddLikes(1).Exec(ctx) },
			[]int{a.ID, b.ID},
			func(id int) int64 { return c.Post.GetX(ctx, id).Likes })
	})
}

// resettingConnector opens connections that, before each reuse, clear the
// session's user variables and release its named locks, as a
// COM_RESET_CONNECTION does.
type resettingConnector struct {
	driver.Connector
	resets *atomic.Int64
}

func (c resettingConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return resettingConn{conn.(mysqlConn), c.resets}, nil
}

// mysqlConn is what database/sql uses of go-sql-driver's connection.
type mysqlConn interface {
	driver.Conn
	driver.ConnBeginTx
	driver.ExecerContext
	driver.QueryerContext
	driver.ConnPrepareContext
	driver.NamedValueChecker
	driver.Pinger
	driver.SessionResetter
	driver.Validator
}

type resettingConn struct {
	mysqlConn
	resets *atomic.Int64
}

// ResetSession runs before database/sql hands the connection out again.
func (c resettingConn) ResetSession(ctx context.Context) error {
	if err := c.mysqlConn.ResetSession(ctx); err != nil {
		return err
	}
	for _, stmt := range []string{"SET @hc_slot = NULL", "DO RELEASE_ALL_LOCKS()"} {
		if _, err := c.ExecContext(ctx, stmt, nil); err != nil {
			return driver.ErrBadConn
		}
	}
	c.resets.Add(1)
	return nil
}
