package lab

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"strconv"
	"sync"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	gmysql "gorm.io/driver/mysql"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/hotcounter/hotcounter/gormcounter"
)

// target is the database under test: PostgreSQL, or MySQL/MariaDB.
type target struct {
	pg  *pgx.ConnConfig
	my  *mysql.Config
	app string // PostgreSQL application_name of the lab's connections
}

// newTarget parses the DSN of the driver ("postgres" or "mysql").
func newTarget(driverName, dsn string) (target, error) {
	switch driverName {
	case "", "postgres":
		cc, err := pgx.ParseConfig(dsn)
		if err != nil {
			return target{}, fmt.Errorf("parse DSN: %w", err)
		}
		app := cc.RuntimeParams["application_name"]
		if app == "" {
			app = "viralpost"
			cc.RuntimeParams["application_name"] = app
		}
		return target{pg: cc, app: app}, nil
	case "mysql":
		cfg, err := mysql.ParseDSN(dsn)
		if err != nil {
			return target{}, fmt.Errorf("parse DSN: %w", err)
		}
		cfg.ParseTime = true
		return target{my: cfg}, nil
	}
	return target{}, fmt.Errorf("unknown driver %q: use postgres or mysql", driverName)
}

// isMySQL reports a MySQL/MariaDB target.
func (tg target) isMySQL() bool { return tg.my != nil }

// sqlDB opens a database/sql pool on the target; onConnect, if set, gets the
// server's id of each new connection (PostgreSQL backend pid, MySQL
// connection id). params are PostgreSQL session settings.
func (tg target) sqlDB(onConnect func(id int), params map[string]string) (*sql.DB, error) {
	if tg.isMySQL() {
		c, err := mysql.NewConnector(tg.my)
		if err != nil {
			return nil, err
		}
		return sql.OpenDB(idConnector{Connector: c, onConnect: onConnect}), nil
	}
	cc := tg.pg.Copy()
	for k, v := range params {
		cc.RuntimeParams[k] = v
	}
	return stdlib.OpenDB(*cc, stdlib.OptionAfterConnect(func(_ context.Context, c *pgx.Conn) error {
		if onConnect != nil {
			onConnect(int(c.PgConn().PID()))
		}
		return nil
	})), nil
}

// idConnector tells onConnect the MySQL connection id of each connection it
// opens (go-sql-driver has no after-connect hook).
type idConnector struct {
	driver.Connector
	onConnect func(id int)
}

func (c idConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil || c.onConnect == nil {
		return conn, err
	}
	q, ok := conn.(driver.QueryerContext)
	if !ok {
		return conn, nil
	}
	rows, err := q.QueryContext(ctx, "SELECT CONNECTION_ID()", nil)
	if err != nil {
		conn.Close()
		return nil, err
	}
	defer rows.Close()
	v := make([]driver.Value, 1)
	if err := rows.Next(v); err == nil {
		switch id := v[0].(type) {
		case int64:
			c.onConnect(int(id))
		case uint64:
			c.onConnect(int(id))
		case []byte:
			n, _ := strconv.Atoi(string(id))
			c.onConnect(n)
		}
	}
	return conn, nil
}

// pool is the application's connection pool for one strategy, with the
// server's ids of its connections, so that what the server reports can be
// attributed.
type pool struct {
	db   *gorm.DB
	sql  *sql.DB
	mu   sync.Mutex
	pids map[int]bool
}

// openPool opens a GORM pool of cfg.Pool connections with gormcounter. On
// PostgreSQL, as a superuser, it asks the server to log this pool's lock
// waits that last the threshold (log_lock_waits and deadlock_timeout are
// per-session settings).
func (tg target) openPool(cfg Config, logWaits bool) (*pool, error) {
	p := &pool{pids: map[int]bool{}}
	var params map[string]string
	if logWaits && !tg.isMySQL() {
		params = map[string]string{"log_lock_waits": "on", "deadlock_timeout": strconv.FormatInt(cfg.Threshold.Milliseconds(), 10)}
	}
	var err error
	p.sql, err = tg.sqlDB(func(id int) {
		p.mu.Lock()
		p.pids[id] = true
		p.mu.Unlock()
	}, params)
	if err != nil {
		return nil, err
	}
	p.sql.SetMaxOpenConns(cfg.Pool)
	p.sql.SetMaxIdleConns(cfg.Pool)
	var dialector gorm.Dialector = postgres.New(postgres.Config{Conn: p.sql})
	if tg.isMySQL() {
		dialector = gmysql.New(gmysql.Config{Conn: p.sql})
	}
	db, err := gorm.Open(dialector, &gorm.Config{Logger: logger.Discard})
	if err == nil {
		err = db.Use(gormcounter.New(gormcounter.Config{}))
	}
	if err != nil {
		p.sql.Close()
		return nil, err
	}
	p.db = db
	return p, nil
}
