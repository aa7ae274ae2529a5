// Package cli is the hotcounter command (cmd/hotcounter): its subcommands,
// flags, output and exit codes. It lives here so that tests run it in
// process, exactly as the binary does.
package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	_ "github.com/glebarez/go-sqlite"  // registers the "sqlite" driver
	_ "github.com/go-sql-driver/mysql" // registers the "mysql" driver
	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" driver

	"github.com/hotcounter/hotcounter/internal/detect"
)

// Exit codes, as diff(1) has them: scripts can tell "found" from "failed".
const (
	ExitOK    = 0 // ran; detect found no hot row
	ExitFound = 1 // detect found hot rows
	ExitError = 2 // bad usage, or the database could not be read
)

const usage = `hotcounter finds hot rows and reports hotcounter's counter tables.

Usage:

	hotcounter <command> [flags]

The commands are:

	detect   sample the database's lock waits and name the rows sessions queue on
	status   report the counter tables: rows, parents, widest parents, pending rows

Use "hotcounter <command> -h" for the flags of a command.

Exit codes: 0 ran (detect: nothing hot), 1 detect found hot rows, 2 error.
`

// Main runs the command with args (without the program name) and returns
// its exit code. Output goes to stdout, progress and errors to stderr.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return ExitError
	}
	switch args[0] {
	case "detect":
		return detectCmd(ctx, args[1:], stdout, stderr)
	case "status":
		return statusCmd(ctx, args[1:], stdout, stderr)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return ExitOK
	}
	fmt.Fprintf(stderr, "hotcounter: unknown command %q\n\n%s", args[0], usage)
	return ExitError
}

// newFlags returns a flag set whose -h prints the command's usage.
func newFlags(name, synopsis string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: hotcounter %s\n\n", synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// parse parses the flags; it returns an exit code when the command should
// stop (help asked for, or bad flags).
func parse(fs *flag.FlagSet, args []string) (int, bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return ExitOK, true
		}
		return ExitError, true
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "hotcounter %s: unexpected arguments %q\n", fs.Name(), fs.Args())
		fs.Usage()
		return ExitError, true
	}
	return 0, false
}

const dsnHelp = "database to read: PostgreSQL (URL or key=value), MySQL/MariaDB (user@tcp(host:port)/db) or an SQLite file; default $HOTCOUNTER_DSN"

func openDSN(ctx context.Context, name, dsn string, stderr io.Writer) (*detect.DB, bool) {
	if dsn == "" {
		dsn = os.Getenv("HOTCOUNTER_DSN")
	}
	if dsn == "" {
		fmt.Fprintf(stderr, "hotcounter %s: no database: give -dsn or set HOTCOUNTER_DSN\n", name)
		return nil, false
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	db, err := detect.Open(ctx, dsn)
	if err != nil {
		fmt.Fprintf(stderr, "hotcounter %s: %v\n", name, err)
		return nil, false
	}
	return db, true
}

func detectCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("detect", "detect -dsn DSN [-for 10s] [-every 50ms] [-schema name] [-top 10] [-json]", stderr)
	dsn := fs.String("dsn", "", dsnHelp)
	dur := fs.Duration("for", 10*time.Second, "how long to sample")
	every := fs.Duration("every", 50*time.Millisecond, "time between samples (at least 150ms on MySQL/MariaDB, whose lock views refresh only after 100ms unread)")
	schema := fs.String("schema", "", "report only this schema (PostgreSQL) or database (MySQL/MariaDB; default the DSN's)")
	top := fs.Int("top", 10, "report at most this many rows")
	asJSON := fs.Bool("json", false, "print a JSON array of the hot rows, hottest first ([] when none), and no progress")
	if code, stop := parse(fs, args); stop {
		return code
	}
	db, ok := openDSN(ctx, "detect", *dsn, stderr)
	if !ok {
		return ExitError
	}
	defer db.Close()
	o := detect.Options{For: *dur, Every: *every, Schema: *schema}
	live := !*asJSON && isTerminal(stderr)
	if live {
		o.Progress = func(p detect.Progress) {
			fmt.Fprintf(stderr, "\rsampling %s: %4.1fs of %s, %d samples, %d waits on %d rows ",
				db.System, p.Elapsed.Seconds(), p.Total, p.Samples, p.Waits, p.Rows)
		}
	}
	rep, err := detect.Detect(ctx, db, o)
	if live {
		fmt.Fprint(stderr, "\r\033[K")
	}
	if err != nil {
		fmt.Fprintf(stderr, "hotcounter detect: %v\n", err)
		return ExitError
	}
	if *top > 0 && len(rep.Rows) > *top {
		rep.Rows = rep.Rows[:*top]
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep.Rows); err != nil {
			fmt.Fprintf(stderr, "hotcounter detect: %v\n", err)
			return ExitError
		}
	} else {
		printReport(stdout, rep)
	}
	if len(rep.Rows) > 0 {
		return ExitFound
	}
	return ExitOK
}

func printReport(w io.Writer, rep detect.Report) {
	fmt.Fprintf(w, "sampled %s for %.1fs (%d samples)\n\n", rep.System, rep.Duration.Seconds(), rep.Samples)
	if len(rep.Rows) == 0 {
		fmt.Fprintln(w, "no hot rows: no row was waited on in two samples, or by two sessions at once")
	}
	for i, r := range rep.Rows {
		key := r.Key
		if r.Index != "" {
			key += " (index " + r.Index + ")"
		}
		fmt.Fprintf(w, "%d. %s  key %s\n", i+1, r.Table, key)
		fmt.Fprintf(w, "   waiting:   %.1fs in all by %d sessions, up to %d at once; %d waits caught, the longest %.0f ms\n",
			r.WaitSeconds, r.Sessions, r.PeakWaiting, r.Waits, r.LongestWaitSeconds*1000)
		if r.LoggedWaits > 0 {
			fmt.Fprintf(w, "   logged:    %d waits on this table in the server log (longer than deadlock_timeout)\n", r.LoggedWaits)
		}
		if r.TableWritesPerSecond > 0 {
			fmt.Fprintf(w, "   writes:    %.0f rows/s in the table (%.2f ms each if all were this row's)\n", r.TableWritesPerSecond, 1000/r.TableWritesPerSecond)
		}
		fmt.Fprintf(w, "   statement: %s\n", r.Statement)
		fmt.Fprintf(w, "   slots:     %d (writes/s x lock hold time = %.1f writers on the row at once, x 2 margin, to a power of two)\n", r.Slots, r.MeanWriters)
		if r.GORM != "" {
			fmt.Fprintf(w, "   GORM:      %s\n", r.GORM)
			fmt.Fprintf(w, "   ent:       %s\n", r.Ent)
		} else {
			fmt.Fprintln(w, "   the statement is not an increment of one column (SET c = c + n): see docs/finding-hot-rows.md for what else fixes a hot row")
		}
		fmt.Fprintln(w)
	}
	tables := make([]string, 0, len(rep.Unresolved))
	for table := range rep.Unresolved {
		tables = append(tables, table)
	}
	sort.Strings(tables)
	for _, table := range tables {
		n := rep.Unresolved[table]
		fmt.Fprintf(w, "not named: %d waits on %s (the key was gone before it could be read: a PostgreSQL row moves on every update; InnoDB's view may lack the key)\n", n, table)
	}
	for _, n := range rep.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
}

func statusCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("status", "status -dsn DSN [-schema name] [-widest 5] [-json]", stderr)
	dsn := fs.String("dsn", "", dsnHelp)
	schema := fs.String("schema", "", "only this schema (PostgreSQL; default every schema) or database (MySQL/MariaDB; default the DSN's)")
	widest := fs.Int("widest", 5, "list this many of each table's widest parents")
	asJSON := fs.Bool("json", false, "print a JSON array of the counter tables")
	if code, stop := parse(fs, args); stop {
		return code
	}
	db, ok := openDSN(ctx, "status", *dsn, stderr)
	if !ok {
		return ExitError
	}
	defer db.Close()
	tables, err := detect.Status(ctx, db, *schema, *widest)
	if err != nil {
		fmt.Fprintf(stderr, "hotcounter status: %v\n", err)
		return ExitError
	}
	// A table whose figures could not be read is listed with why, after
	// the others, and the exit code says so.
	failed := ExitOK
	for _, t := range tables {
		if t.Error != "" {
			fmt.Fprintf(stderr, "hotcounter status: %s: %s\n", t.Table, t.Error)
			failed = ExitError
		}
	}
	if *asJSON {
		if tables == nil {
			tables = []detect.Table{}
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(tables); err != nil {
			fmt.Fprintf(stderr, "hotcounter status: %v\n", err)
			return ExitError
		}
		return failed
	}
	if len(tables) == 0 {
		fmt.Fprintln(stdout, "no counter tables (slot, delta or ledger tables) in this database")
		return ExitOK
	}
	for _, t := range tables {
		switch {
		case t.Error != "":
			fmt.Fprintf(stdout, "%s  could not be read: %s\n", t.Table, t.Error)
			continue
		case t.Kind == "ledger":
			newest := "never"
			if t.NewestBatch != nil {
				newest = t.NewestBatch.Format(time.RFC3339)
			}
			fmt.Fprintf(stdout, "%s  ledger: %d batches, newest %s\n", t.Table, t.Rows, newest)
			continue
		case t.Kind == "deltas":
			fmt.Fprintf(stdout, "%s  deltas of %s: %d rows pending over %d parents, up to %d rows per parent\n", t.Table, t.Owner, t.Rows, t.Parents, t.MaxRows)
		default:
			fmt.Fprintf(stdout, "%s  slots of %s: %d rows over %d parents, %d holding a value (pending, if a rollup counter), up to %d rows per parent\n",
				t.Table, t.Owner, t.Rows, t.Parents, t.Nonzero, t.MaxRows)
		}
		if len(t.Widest) > 0 {
			parts := make([]string, len(t.Widest))
			for i, p := range t.Widest {
				parts[i] = fmt.Sprintf("%s (%d rows, %d)", p.Key, p.Rows, p.Sum)
			}
			fmt.Fprintf(stdout, "    widest: %s\n", strings.Join(parts, ", "))
		}
	}
	return failed
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
