// Command viralpost is the viral-post lab: a celebrity's post gets likes at a
// fixed rate (2,000 per second by default) through a pool of 20 connections,
// and each strategy of counting them takes the load in turn, from the naive
// single-row UPDATE to gormcounter's slots. It prints a table, writes a JSON
// file and a PNG chart of latency over time, and then measures loads of 1
// and 100 posts.
//
//	go run ./examples/viralpost                       # local PostgreSQL, database test
//	go run ./examples/viralpost -dsn 'postgres://...' -rate 3000 -duration 30s
//	go run ./examples/viralpost -driver mysql         # local MariaDB, database test
//	go run ./examples/viralpost -scenario flashsale   # the flash sale instead
//
// The flash sale (-scenario flashsale) sells one product's stock at -rate
// buyers per second, each taking 1, with a restock after a third is sold;
// it sells out part-way, and the buyers after that are refused. It runs the
// single guarded row (UPDATE ... SET stock = stock - 1 WHERE ... AND stock
// >= 1) against gormcounter.Take on 16 and 64 slots, and reports sales per
// second, latency, sold, refused, and refusals while stock remained (which
// must be 0).
//
// The whole day (-scenario day) gives one post its likes for -duration
// (default 20m) through one strategy (-strategies, default slots16) on a
// table of -posts other posts that take -background likes/s, and prints
// a line every -every: likes/s, latency, lock waits, the slot table's and
// its indexes' size, dead tuples, HOT updates, autovacuum runs and the
// latency of a load of the hot post. PostgreSQL only.
//
// It needs PostgreSQL or MySQL/MariaDB. On PostgreSQL, as a superuser, it
// counts lock waits from the server's own log (log_lock_waits with
// deadlock_timeout = -threshold, set for its connections only), and from
// samples of pg_locks; on MySQL/MariaDB from samples of INNODB_TRX and the
// server's Innodb_row_lock_waits. It creates tables named viral_* in the
// DSN's schema or database, dropping them first.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/hotcounter/hotcounter/examples/viralpost/lab"
)

func main() {
	var cfg lab.Config
	var strategies, jsonPath, pngPath, scenario string
	var stock int64
	var quiet bool
	var day lab.DayConfig
	flag.DurationVar(&day.Every, "every", time.Minute, "day: one report line per period")
	flag.IntVar(&day.Posts, "posts", 100_000, "day: other posts in the table, each liked once or twice before the load")
	flag.Float64Var(&day.Background, "background", 100, "day: likes per second of random other posts")
	flag.Float64Var(&day.HotReads, "hotreads", 10, "day: loads per second of the hot post")
	flag.BoolVar(&day.Covering, "covering", false, "day: add the covering index (owner) INCLUDE (n) to the slot table first")
	flag.StringVar(&scenario, "scenario", "viralpost", `"viralpost" (likes of one post), "flashsale" (one product's stock) or "day" (one strategy for 20 minutes)`)
	flag.Int64Var(&stock, "stock", 0, "flashsale: the stock at the start (default: what -rate buys in half of -duration)")
	flag.StringVar(&cfg.Driver, "driver", "postgres", `"postgres", or "mysql" for MySQL/MariaDB`)
	flag.StringVar(&cfg.DSN, "dsn", "", `DSN (default "host=127.0.0.1 port=5432 user=postgres dbname=test sslmode=disable", or "root@tcp(127.0.0.1:3306)/test" with -driver mysql)`)
	flag.Float64Var(&cfg.Rate, "rate", 2000, "likes per second offered (open loop: arrivals do not wait for answers)")
	flag.DurationVar(&cfg.Duration, "duration", 20*time.Second, "load per strategy (flashsale: 10s unless set)")
	flag.IntVar(&cfg.Pool, "pool", 20, "the application's connection pool size")
	flag.DurationVar(&cfg.Timeout, "timeout", 2*time.Second, "a request's deadline from its arrival")
	flag.DurationVar(&cfg.Threshold, "threshold", 100*time.Millisecond, "lock waits at least this long are counted")
	flag.Float64Var(&cfg.Unrelated, "unrelated", 50, "reads per second of an unrelated endpoint through the same pool")
	flag.StringVar(&cfg.Redis, "redis", "127.0.0.1:6379", "Redis for the redis strategy (skipped when unreachable)")
	flag.StringVar(&strategies, "strategies", "", "comma-separated strategies to run (default all: "+names()+"; flashsale: "+saleNames()+")")
	flag.StringVar(&cfg.ServerLog, "pglog", "auto", `server log to count logged lock waits in: "auto", "off" or a path on the server`)
	flag.BoolVar(&cfg.Reads, "reads", true, "also measure loads of 1 and 100 posts")
	flag.StringVar(&jsonPath, "json", "viralpost.json", "JSON result file (empty: none)")
	flag.StringVar(&pngPath, "png", "viralpost.png", "PNG chart of latency over time (empty: none)")
	flag.BoolVar(&quiet, "quiet", false, "no progress display (on a terminal a live line; otherwise a line every few seconds)")
	flag.BoolVar(&quiet, "q", false, "short for -quiet")
	flag.Parse()
	if cfg.DSN == "" {
		cfg.DSN = "host=127.0.0.1 port=5432 user=postgres dbname=test sslmode=disable"
		if cfg.Driver == "mysql" {
			cfg.DSN = "root@tcp(127.0.0.1:3306)/test"
		}
	}
	if strategies != "" {
		cfg.Strategies = strings.Split(strategies, ",")
	}
	var prog *progress
	if !quiet {
		prog = newProgress(os.Stderr)
		cfg.Progress = prog.show
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	switch scenario {
	case "viralpost":
	case "flashsale":
		os.Exit(flashSale(ctx, cfg, stock, jsonPath, prog))
	case "day":
		day.Config = cfg
		os.Exit(wholeDay(ctx, day, jsonPath, prog))
	default:
		fmt.Fprintf(os.Stderr, "viralpost: unknown scenario %q (viralpost, flashsale, day)\n", scenario)
		os.Exit(2)
	}
	res, err := lab.Run(ctx, cfg)
	prog.done()
	if err != nil {
		fmt.Fprintln(os.Stderr, "viralpost:", err)
		os.Exit(1)
	}
	res.WriteTable(os.Stdout)
	if jsonPath != "" {
		if err := res.WriteJSON(jsonPath); err != nil {
			fmt.Fprintln(os.Stderr, "viralpost:", err)
			os.Exit(1)
		}
		fmt.Println("\nwrote", jsonPath)
	}
	if pngPath != "" {
		if err := res.WriteChart(pngPath); err != nil {
			fmt.Fprintln(os.Stderr, "viralpost:", err)
			os.Exit(1)
		}
		fmt.Println("wrote", pngPath)
	}
	for _, s := range res.Strategies {
		if s.Lost != 0 {
			fmt.Fprintf(os.Stderr, "viralpost: %s lost %d acknowledged likes\n", s.Name, s.Lost)
			os.Exit(1)
		}
	}
}

// flashSale runs the flash sale and returns the exit code: 1 on an error,
// an item below zero, or a refusal while stock remained.
func flashSale(ctx context.Context, cfg lab.Config, stock int64, jsonPath string, prog *progress) int {
	if !flagSet("duration") {
		cfg.Duration = 0 // the flash sale's default
	}
	res, err := lab.FlashSale(ctx, lab.FlashSaleConfig{Config: cfg, Stock: stock})
	if !reported(res, err, jsonPath, "flashsale.json", prog) {
		return 1
	}
	code := 0
	for _, s := range res.Strategies {
		if s.FalseRefusals != 0 || s.LowestRow < 0 {
			fmt.Fprintf(os.Stderr, "viralpost: %s refused %d buyers while stock remained; lowest row %d\n", s.Name, s.FalseRefusals, s.LowestRow)
			code = 1
		}
	}
	return code
}

// wholeDay runs the day scenario and returns the exit code: 1 on an error
// or a lost like.
func wholeDay(ctx context.Context, cfg lab.DayConfig, jsonPath string, prog *progress) int {
	if !flagSet("duration") {
		cfg.Duration = 0 // the day's default, 20m
	}
	res, err := lab.Day(ctx, cfg)
	if !reported(res, err, jsonPath, "day.json", prog) {
		return 1
	}
	if res.Lost != 0 {
		fmt.Fprintf(os.Stderr, "viralpost: %s lost %d acknowledged likes\n", res.Strategy, res.Lost)
		return 1
	}
	return 0
}

// reported prints a scenario's result and writes its JSON file (to
// jsonPath, or to def when -json was not given), or prints err; it says
// whether all went well.
func reported(res interface {
	WriteTable(io.Writer)
	WriteJSON(string) error
}, err error, jsonPath, def string, prog *progress) bool {
	prog.done()
	if err == nil {
		if !flagSet("json") {
			jsonPath = def
		}
		res.WriteTable(os.Stdout)
		if jsonPath != "" {
			if err = res.WriteJSON(jsonPath); err == nil {
				fmt.Println("\nwrote", jsonPath)
			}
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "viralpost:", err)
		return false
	}
	return true
}

// flagSet reports whether the command line set the flag name.
func flagSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// saleNames lists the flash sale's strategies.
func saleNames() string {
	var n []string
	for _, s := range lab.SaleStrategies() {
		n = append(n, s.Name)
	}
	return strings.Join(n, ",")
}

// names lists the lab's strategies.
func names() string {
	var n []string
	for _, s := range lab.Strategies() {
		n = append(n, s.Name)
	}
	return strings.Join(n, ",")
}

// progress shows the lab's status lines: redrawn in place on a terminal,
// and otherwise (a pipe, a log file) as a plain line every few seconds and
// whenever the lab moves to the next strategy, so that a log holds a
// readable trace instead of hundreds of carriage-return frames.
type progress struct {
	w        io.Writer
	terminal bool
	every    time.Duration
	last     time.Time
	lastKey  string
}

func newProgress(f *os.File) *progress {
	p := &progress{w: f, every: 5 * time.Second}
	if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
		p.terminal = true
	}
	return p
}

func (p *progress) show(line string) {
	if p.terminal {
		fmt.Fprintf(p.w, "\r%-100s", line)
		return
	}
	key, _, _ := strings.Cut(line, " ") // the strategy's name
	if key == p.lastKey && time.Since(p.last) < p.every {
		return
	}
	p.last, p.lastKey = time.Now(), key
	fmt.Fprintln(p.w, line)
}

// done clears a terminal's status line.
func (p *progress) done() {
	if p != nil && p.terminal {
		fmt.Fprintf(p.w, "\r%-100s\r", "")
	}
}
