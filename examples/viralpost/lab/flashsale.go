package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"reflect"
	"runtime"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"gorm.io/gorm"

	"github.com/hotcounter/hotcounter"
	"github.com/hotcounter/hotcounter/gormcounter"
)

// The flash sale: one product's stock sold at a fixed rate of buyers, each
// taking 1, while a restock arrives; it sells out part-way through the
// load, and the buyers after that are refused. Each sale strategy takes the
// load in turn: the single guarded row against gormcounter's guarded
// counter.

// NaiveItem keeps its stock in one column, taken with the guarded update
// UPDATE items SET stock = stock - 1 WHERE id = ? AND stock >= 1.
type NaiveItem struct {
	ID    uint
	Name  string
	Stock int64
}

// TableName keeps the lab's tables apart from an application's.
func (NaiveItem) TableName() string { return "viral_naive_items" }

// Take16Item's stock is a guarded counter over 16 slot rows.
type Take16Item struct {
	ID    uint
	Name  string
	Stock int64 `gorm:"counter:guarded"`
}

// TableName keeps the lab's tables apart from an application's.
func (Take16Item) TableName() string { return "viral_t16_items" }

// Take64Item's stock is a guarded counter over 64 slot rows.
type Take64Item struct {
	ID    uint
	Name  string
	Stock int64 `gorm:"counter:guarded,slots=64"`
}

// TableName keeps the lab's tables apart from an application's.
func (Take64Item) TableName() string { return "viral_t64_items" }

// errSoldOut is a buyer's refusal: less than 1 was left.
var errSoldOut = errors.New("sold out")

// SaleStrategy is one way of keeping stock that the flash sale puts under
// load.
type SaleStrategy struct {
	Name, What string
	model      any
	// take takes 1 from the item or returns an error wrapping errSoldOut.
	take func(db *gorm.DB, id uint) error
	// restock adds n.
	restock func(db *gorm.DB, id uint, n int64) error
	// stock reads the item's total and its lowest row (the column itself
	// for the naive row).
	stock func(db *gorm.DB, id uint) (total, lowest int64, err error)
}

// guarded is a gormcounter guarded-counter strategy on model I.
// base names its slot table, <base>_stock_slots, and owner column,
// <base>_id (the singular of the item table).
func guarded[I any](name, what, base string) SaleStrategy {
	item := func(id uint) *I {
		p := new(I)
		reflect.ValueOf(p).Elem().FieldByName("ID").SetUint(uint64(id))
		return p
	}
	return SaleStrategy{
		Name: name, What: what, model: new(I),
		take: func(db *gorm.DB, id uint) error {
			err := gormcounter.Take(db.Model(item(id)), "Stock", 1).Error
			if errors.Is(err, hotcounter.ErrInsufficient) {
				return fmt.Errorf("%w: %w", errSoldOut, err)
			}
			return err
		},
		restock: func(db *gorm.DB, id uint, n int64) error {
			return gormcounter.Increment(db.Model(item(id)), "Stock", n).Error
		},
		stock: func(db *gorm.DB, id uint) (total, lowest int64, err error) {
			err = db.Table(base+"_stock_slots").Select("COALESCE(SUM(n), 0), COALESCE(MIN(n), 0)").Where(base+"_id = ?", id).Row().Scan(&total, &lowest)
			return total, lowest, err
		},
	}
}

// SaleStrategies returns the flash sale's strategies, in the order it runs
// them.
func SaleStrategies() []SaleStrategy {
	return []SaleStrategy{
		{
			Name: "naive", What: "UPDATE items SET stock = stock - 1 WHERE id = ? AND stock >= 1 (one guarded row)",
			model: &NaiveItem{},
			take: func(db *gorm.DB, id uint) error {
				tx := db.Model(&NaiveItem{ID: id}).Where("stock >= ?", 1).UpdateColumn("stock", gorm.Expr("stock - ?", 1))
				if tx.Error == nil && tx.RowsAffected == 0 {
					return errSoldOut
				}
				return tx.Error
			},
			restock: func(db *gorm.DB, id uint, n int64) error {
				return db.Model(&NaiveItem{ID: id}).UpdateColumn("stock", gorm.Expr("stock + ?", n)).Error
			},
			stock: func(db *gorm.DB, id uint) (total, lowest int64, err error) {
				var it NaiveItem
				err = db.First(&it, id).Error
				return it.Stock, it.Stock, err
			},
		},
		guarded[Take16Item]("take16", "gormcounter.Take, guarded counter over 16 slots", "viral_t16_item"),
		guarded[Take64Item]("take64", "gormcounter.Take, guarded counter over 64 slots", "viral_t64_item"),
	}
}

// FlashSaleConfig is one run of the flash sale. Zero fields take defaults.
type FlashSaleConfig struct {
	Config // DSN, Driver, Rate (2000), Duration (10s), Pool, Timeout, Strategies, Progress
	// Stock is the item's stock at the start (default: what the offered
	// rate buys in half the run); Restock arrives once a third of Stock is
	// sold (default: a sixth of Stock). The sale sells out about two
	// thirds of the way through the run.
	Stock, Restock int64
}

// FlashSaleResult is everything one flash sale measured; it is also the
// JSON file.
type FlashSaleResult struct {
	Started    time.Time    `json:"started"`
	Machine    string       `json:"machine"`
	Server     Server       `json:"server"`
	Rate       float64      `json:"offered_per_s"`
	Duration   string       `json:"duration"`
	Pool       int          `json:"pool"`
	Timeout    string       `json:"timeout"`
	Stock      int64        `json:"stock"`
	Restock    int64        `json:"restock"`
	Strategies []SaleResult `json:"strategies"`
}

// SaleResult is what one strategy did under the flash sale.
type SaleResult struct {
	Name string `json:"name"`
	What string `json:"what"`
	// Sold is how many takes were acknowledged, Refused how many were
	// told "sold out"; FalseRefusals counts refusals that returned before
	// a buyer who then bought had arrived: refused while stock remained,
	// which must be 0.
	Sent          int      `json:"sent"`
	Sold          int      `json:"sold"`
	Refused       int      `json:"refused"`
	FalseRefusals int      `json:"refused_while_stock_remained"`
	TimedOut      int      `json:"timed_out"`
	Deadlocked    int      `json:"deadlocked"`
	Failed        int      `json:"failed"`
	Errors        []string `json:"errors,omitempty"`
	// SoldPerS is sales per second until the last sale's arrival;
	// SoldOutAt is that arrival, seconds into the load.
	SoldPerS  float64 `json:"sold_per_s"`
	SoldOutAt float64 `json:"sold_out_at_s"`
	// Restocked says the restock arrived (a third of the stock was sold).
	// Taken is what left the stock by the database's rows (stock +
	// restock - left): Sold exactly when no take timed out, and at most
	// Sold + TimedOut. Left and LowestRow are read after the load
	// (LowestRow, the emptiest slot row: never below 0).
	Restocked bool     `json:"restocked"`
	Taken     int64    `json:"taken"`
	Left      int64    `json:"left"`
	LowestRow int64    `json:"lowest_row"`
	Takes     Latency  `json:"takes"` // every request, sales and refusals
	Sales     Latency  `json:"sales"` // the requests that bought
	Timeline  []Bucket `json:"timeline"`
}

// FlashSale runs the flash sale: each selected sale strategy in turn.
func FlashSale(ctx context.Context, cfg FlashSaleConfig) (*FlashSaleResult, error) {
	if cfg.Duration == 0 {
		cfg.Duration = 10 * time.Second
	}
	cfg.Config.defaults()
	if cfg.Stock == 0 {
		cfg.Stock = int64(cfg.Rate * cfg.Duration.Seconds() / 2)
	}
	if cfg.Restock == 0 {
		cfg.Restock = cfg.Stock / 6
	}
	strategies, err := selectSale(cfg.Strategies)
	if err != nil {
		return nil, err
	}
	tg, obs, closeObserver, err := watch(ctx, cfg.Driver, cfg.DSN, "off")
	if err != nil {
		return nil, err
	}
	defer closeObserver()
	res := &FlashSaleResult{
		Started: time.Now().UTC(), Server: obs.server,
		Machine: fmt.Sprintf("%d CPUs, %s/%s, %s", runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version()),
		Rate:    cfg.Rate, Duration: cfg.Duration.String(), Pool: cfg.Pool, Timeout: cfg.Timeout.String(),
		Stock: cfg.Stock, Restock: cfg.Restock,
	}
	for _, s := range strategies {
		r, err := runSale(ctx, cfg, tg, s)
		if err != nil {
			return res, err
		}
		res.Strategies = append(res.Strategies, *r)
	}
	return res, nil
}

// selectSale returns the named sale strategies in the lab's order.
func selectSale(names []string) ([]SaleStrategy, error) {
	all := SaleStrategies()
	if len(names) == 0 {
		return all, nil
	}
	var out []SaleStrategy
	for _, n := range names {
		found := false
		for _, s := range all {
			if s.Name == n {
				out, found = append(out, s), true
			}
		}
		if !found {
			return nil, fmt.Errorf("unknown sale strategy %q", n)
		}
	}
	return out, nil
}

// runSale puts one sale strategy under the load.
func runSale(ctx context.Context, cfg FlashSaleConfig, tg target, s SaleStrategy) (*SaleResult, error) {
	p, err := tg.openPool(cfg.Config, false)
	if err != nil {
		return nil, err
	}
	defer p.sql.Close()
	db := p.db.WithContext(ctx)
	if err := db.Migrator().DropTable(s.model); err != nil {
		return nil, fmt.Errorf("%s: drop tables: %w", s.Name, err)
	}
	if err := db.AutoMigrate(s.model); err != nil {
		return nil, fmt.Errorf("%s: migrate: %w", s.Name, err)
	}
	item := reflect.New(reflect.TypeOf(s.model).Elem())
	item.Elem().FieldByName("Name").SetString("the flash sale's product")
	if err := db.Create(item.Interface()).Error; err != nil {
		return nil, fmt.Errorf("%s: create the item: %w", s.Name, err)
	}
	id := uint(item.Elem().FieldByName("ID").Uint())
	if err := s.restock(db, id, cfg.Stock); err != nil {
		return nil, fmt.Errorf("%s: stock the item: %w", s.Name, err)
	}
	// Warm up: open every connection of the pool.
	var wg sync.WaitGroup
	for range cfg.Pool {
		wg.Go(func() { _, _, _ = s.stock(db, id) })
	}
	wg.Wait()

	var (
		live                     counters
		sold                     atomic.Int64
		restocked                sync.Once
		restockErr               error
		restockFrom, restockTill time.Time
	)
	stop := make(chan struct{})
	go progress(cfg.Progress, s.Name, cfg.Duration, &live, stop)
	l := openLoop(ctx, cfg.Rate, cfg.Duration, cfg.Timeout, &live, func(rctx context.Context) error {
		err := s.take(p.db.WithContext(rctx), id)
		if err == nil && sold.Add(1) == cfg.Stock/3 {
			// The supplier's delivery, not a buyer's request: no deadline.
			restocked.Do(func() {
				restockFrom = time.Now()
				restockErr = s.restock(db, id, cfg.Restock)
				restockTill = time.Now()
			})
		}
		return err
	})
	close(stop)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if restockErr != nil {
		return nil, fmt.Errorf("%s: restock: %w", s.Name, restockErr)
	}
	r := &SaleResult{Name: s.Name, What: s.What, Sent: len(l.requests), Sold: l.count(ok), Refused: l.count(refused),
		TimedOut: l.count(timedOut), Deadlocked: l.count(deadlock), Failed: l.count(failed), Errors: l.errs}
	// A refusal was false if a buyer who arrived after it returned then
	// bought from stock that was there when it read: a refusal that began
	// after the restock's commit returned (the stock only goes down from
	// then), or one that returned before a sale over before the restock
	// began. (A restock delayed past the sell-out, queued behind the takes,
	// makes refusals meanwhile true; a refusal that read before the
	// restock committed may return after it.)
	var lastSale, lastBefore time.Duration
	from, till := restockFrom.Sub(l.start), restockTill.Sub(l.start)
	for _, q := range l.requests {
		if q.outcome != ok {
			continue
		}
		lastSale = max(lastSale, q.due)
		if q.due+q.latency < from {
			lastBefore = max(lastBefore, q.due)
		}
	}
	for _, q := range l.requests {
		if end := q.due + q.latency; q.outcome == refused && (end < lastBefore || q.due > till && end < lastSale) {
			r.FalseRefusals++
		}
	}
	r.SoldOutAt = lastSale.Seconds()
	if lastSale > 0 {
		r.SoldPerS = float64(r.Sold) / lastSale.Seconds()
	}
	if r.Left, r.LowestRow, err = s.stock(db, id); err != nil {
		return nil, fmt.Errorf("%s: read the stock: %w", s.Name, err)
	}
	r.Restocked = !restockTill.IsZero()
	r.Taken = cfg.Stock - r.Left
	if r.Restocked {
		r.Taken += cfg.Restock
	}
	r.Takes = l.summarise(0, l.duration)
	r.Sales = l.summariseOutcome(ok)
	r.Timeline = l.timeline()
	return r, nil
}

// WriteTable prints the flash sale as a table.
func (r *FlashSaleResult) WriteTable(w io.Writer) {
	fmt.Fprintf(w, "%s %s (%s), %s\n", r.Server.Product, r.Server.Version, r.Server.Durability, r.Machine)
	fmt.Fprintf(w, "flash sale: %.0f buyers/s for %s per strategy, each taking 1 of %d (+ %d restocked after a third sold), pool %d, request timeout %s\n\n",
		r.Rate, r.Duration, r.Stock, r.Restock, r.Pool, r.Timeout)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "strategy\tsold/s\tsold out at s\tp50 ms\tp99 ms\tmax ms\tsales p99 ms\ttimed out\tsold\trefused\trefused while stock remained\ttaken\tleft\tlowest row\tdeadlocked\tfailed\t")
	for _, s := range r.Strategies {
		fmt.Fprintf(tw, "%s\t%.0f\t%.1f\t%.1f\t%.1f\t%.0f\t%.1f\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t\n",
			s.Name, s.SoldPerS, s.SoldOutAt, s.Takes.P50, s.Takes.P99, s.Takes.Max, s.Sales.P99, s.TimedOut,
			s.Sold, s.Refused, s.FalseRefusals, s.Taken, s.Left, s.LowestRow, s.Deadlocked, s.Failed)
	}
	tw.Flush()
	for _, s := range r.Strategies {
		if len(s.Errors) > 0 {
			fmt.Fprintf(w, "%s: %d failed: %v\n", s.Name, s.Failed, s.Errors)
		}
	}
	fmt.Fprintln(w)
	for _, s := range r.Strategies {
		fmt.Fprintf(w, "%-7s %s\n", s.Name, s.What)
	}
}
