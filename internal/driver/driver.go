// Package driver gives the ORMs the dialect of their database with its
// driver: an engine.Dialect, a value the front ends hold and hand to the
// engine, as River passes its driver. Each database has a package of its
// own here (postgres, mysql, sqlite) that holds what the engine does that
// database's way, as River keeps a driver package per database; the SQL
// each runs is written in internal/countersql, one type per database. A
// new database plugs in as one more package and one more case of For, its
// dialect in countersql.For and its statements in countersql.
package driver

import (
	"github.com/hotcounter/hotcounter/internal/countersql"
	"github.com/hotcounter/hotcounter/internal/driver/mysql"
	"github.com/hotcounter/hotcounter/internal/driver/postgres"
	"github.com/hotcounter/hotcounter/internal/driver/sqlite"
	"github.com/hotcounter/hotcounter/internal/engine"
)

// For returns the dialect of the database an ORM names ("postgres" or
// "pgx", "mysql", "sqlite" or "sqlite3") with its driver, or an error
// naming the databases there are.
func For(name string) (engine.Dialect, error) {
	d, err := countersql.For(name)
	if err != nil {
		return engine.Dialect{}, err
	}
	switch {
	case isPostgres(d):
		return engine.NewDialect(d, postgres.New), nil
	case isMySQL(d):
		return engine.NewDialect(d, mysql.New), nil
	default:
		return engine.NewDialect(d, sqlite.New), nil
	}
}

func isPostgres(d countersql.Dialect) bool { _, ok := d.OnPostgres(); return ok }

func isMySQL(d countersql.Dialect) bool { _, ok := d.OnMySQL(); return ok }
