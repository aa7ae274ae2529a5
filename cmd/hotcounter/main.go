// Command hotcounter finds hot rows in a PostgreSQL or MySQL/MariaDB
// database and reports the counter tables hotcounter keeps.
//
// Install:
//
//	go install github.com/hotcounter/hotcounter/cmd/hotcounter@latest
//
// Usage:
//
//	hotcounter detect -dsn DSN [-for 10s] [-json]   # name the rows sessions queue on
//	hotcounter status -dsn DSN [-json]              # counter tables, widest parents, pending rows
//
// detect exits 0 when it found nothing hot, 1 when it found hot rows and 2
// on error; see docs/finding-hot-rows.md.
package main

import (
	"context"
	"os"
	"os/signal"

	"github.com/hotcounter/hotcounter/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := cli.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
