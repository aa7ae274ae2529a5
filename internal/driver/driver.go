// Package driver gives the ORMs the dialect of their database with its
// engine.Driver registered. Each database has a package of its own here
// (postgres, mysql, sqlite) that holds what the engine does that
// database's way, as River keeps a driver package per database; the SQL
// each runs is written in internal/countersql, one type per database.
// A new database plugs in as one more package imported here, its dialect
// in countersql.For and its statements in countersql.
package driver

import (
	"github.com/hotcounter/hotcounter/internal/countersql"
	_ "github.com/hotcounter/hotcounter/internal/driver/mysql"    // registers the MySQL/MariaDB driver
	_ "github.com/hotcounter/hotcounter/internal/driver/postgres" // registers the PostgreSQL driver
	_ "github.com/hotcounter/hotcounter/internal/driver/sqlite"   // registers the SQLite driver
)

// For returns the dialect of the database an ORM names ("postgres" or
// "pgx", "mysql", "sqlite" or "sqlite3"), whose driver is registered with
// the engine.
func For(name string) (countersql.Dialect, error) { return countersql.For(name) }
