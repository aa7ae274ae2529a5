// Command metrics wires gormcounter's OpenTelemetry metrics to the
// Prometheus exporter, runs a few writes, and prints what a Prometheus
// scrape of /metrics returns, then the hottest rows the library counted.
//
//	go run ./examples/metrics                      # embedded SQLite, no server
//	go run ./examples/metrics -dsn "host=127.0.0.1 user=postgres dbname=test sslmode=disable"
//	go run ./examples/metrics -serve 127.0.0.1:9464  # then keep serving /metrics for Prometheus
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/glebarez/sqlite"
	promclient "github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"gorm.io/driver/mysql"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/hotcounter/hotcounter/gormcounter"
)

// Post has a counter (Likes) and a plain column (Shares) that is hot but
// not a counter yet: the hot keys show both.
type Post struct {
	ID     uint
	Title  string
	Likes  int64 `gorm:"counter:slots=16,rollup"`
	Shares int64
}

// TableName keeps the example to tables of its own.
func (Post) TableName() string { return "metrics_posts" }

func main() {
	dsn := flag.String("dsn", "", `PostgreSQL DSN, or MySQL/MariaDB as user@tcp(host:port)/db (default: an SQLite file in a temporary directory)`)
	serve := flag.String("serve", "", "after the writes, keep serving /metrics on this address (e.g. 127.0.0.1:9464) until interrupted")
	flag.Parse()
	if err := run(*dsn, *serve); err != nil {
		log.Fatal(err)
	}
}

func run(dsn, serve string) error {
	ctx := context.Background()
	// The exporter is an OpenTelemetry reader that a Prometheus registry
	// collects from; the meter provider is what gormcounter is given.
	reg := promclient.NewRegistry()
	exporter, err := prometheus.New(prometheus.WithRegisterer(reg))
	if err != nil {
		return err
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter))
	defer mp.Shutdown(ctx)

	db, err := open(dsn)
	if err != nil {
		return err
	}
	if err := db.Use(gormcounter.New(gormcounter.Config{MeterProvider: mp})); err != nil {
		return err
	}
	if err := db.Migrator().DropTable(&Post{}); err != nil {
		return err
	}
	if err := db.AutoMigrate(&Post{}); err != nil {
		return err
	}
	posts := []Post{{Title: "viral"}, {Title: "quiet"}}
	if err := db.Create(&posts).Error; err != nil {
		return err
	}

	// 8 writers like the viral post (and now and then the quiet one) and
	// share both through a plain column.
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				p := posts[0]
				if i%10 == 0 {
					p = posts[1]
				}
				if err := gormcounter.Increment(db.Model(&p), "Likes", 1).Error; err != nil {
					errs <- err
					return
				}
				if err := db.Model(&p).UpdateColumn("shares", gorm.Expr("shares + ?", 1)).Error; err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		return err
	}
	if err := gormcounter.RollupPass(db, &Post{}); err != nil {
		return err
	}

	// Serve /metrics as a Prometheus server would scrape it, and scrape it.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if serve != "" {
		ln, err = net.Listen("tcp", serve)
	}
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: promhttp.HandlerFor(reg, promhttp.HandlerOpts{}), ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	defer srv.Close()
	url := "http://" + ln.Addr().String() + "/metrics"
	res, err := http.Get(url)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	fmt.Printf("GET %s (hotcounter's series):\n\n", url)
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 0, 1<<20), 1<<20)
	series := 0
	for sc.Scan() {
		line := sc.Text()
		if strings.Contains(line, "hotcounter_") && !strings.Contains(line, "_bucket{") {
			fmt.Println(line)
			series++
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	if series == 0 {
		return fmt.Errorf("the scrape returned no hotcounter series")
	}

	fmt.Println("\nhottest rows (gormcounter.HotKeys):")
	hot, err := gormcounter.HotKeys(db, 3)
	if err != nil {
		return err
	}
	for _, k := range hot {
		kind := "counter"
		if !k.Counter {
			kind = "plain column: declare it a counter"
		}
		fmt.Printf("  %s.%s id %s: %d increments, %.0f/s (%s)\n", k.Table, k.Column, k.Key, k.Count, k.Rate, kind)
	}
	if serve != "" {
		fmt.Printf("\nserving %s until interrupted\n", url)
		select {}
	}
	return nil
}

func open(dsn string) (*gorm.DB, error) {
	cfg := &gorm.Config{Logger: logger.Default.LogMode(logger.Silent)}
	switch {
	case dsn == "":
		dir, err := os.MkdirTemp("", "hotcounter-metrics")
		if err != nil {
			return nil, err
		}
		// As in the quickstart: foreign keys on, WAL, a busy timeout and
		// immediate transactions (SQLite has one writer at a time).
		return gorm.Open(sqlite.Open("file:"+filepath.Join(dir, "metrics.db")+
			"?_pragma=foreign_keys(1)&_pragma=journal_mode(WAL)&_pragma=busy_timeout(10000)&_txlock=immediate"), cfg)
	case strings.Contains(dsn, "@tcp(") || strings.Contains(dsn, "@unix("):
		return gorm.Open(mysql.Open(dsn), cfg)
	}
	return gorm.Open(postgres.Open(dsn), cfg)
}
