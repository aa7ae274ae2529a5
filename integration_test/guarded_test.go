package integration_test

import (
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hotcounter/hotcounter/gormcounter"
	"gorm.io/gorm"
)

// Product's stock is a guarded counter: it never goes below zero.
type Product struct {
	ID    uint
	Name  string
	Stock int64 `gorm:"counter:guarded"`
}

func newProduct(t *testing.T, db *gorm.DB, stock int64) Product {
	t.Helper()
	must(t, db.AutoMigrate(&Product{}))
	p := Product{Name: "flash sale"}
	must(t, db.Create(&p).Error)
	if stock > 0 {
		must(t, gormcounter.Increment(db.Model(&Product{ID: p.ID}), "Stock", stock).Error)
	}
	return p
}

// stockRows returns the product's total stock and its lowest slot row.
func stockRows(t *testing.T, db *gorm.DB, id uint) (total, lowest int64) {
	t.Helper()
	must(t, db.Raw("SELECT COALESCE(SUM(n), 0), COALESCE(MIN(n), 0) FROM product_stock_slots WHERE product_id = ?", id).Row().Scan(&total, &lowest))
	return total, lowest
}

// The flash sale of the issue: 64 buyers take 1 each from 3,000 while a
// restock of 500 arrives (after the first 1,000 sales, so the stock never
// runs out before it). Exactly 3,500 takes succeed, the stock ends at 0,
// no slot row ever holds less than 0, and no buyer is refused while stock
// remained (see flashSale).
func TestGuardedFlashSaleIsExact(t *testing.T) {
	eachDB(t, func(t *testing.T, e *env) {
		db := e.db
		p := newProduct(t, db, 3000)
		buyers := 64
		if e.kind == lite {
			buyers = 8
		}
		sold, refused := flashSale(t, buyers,
			func() error { return gormcounter.Take(db.Model(&Product{ID: p.ID}), "Stock", 1).Error },
			func() error { return gormcounter.Increment(db.Model(&Product{ID: p.ID}), "Stock", 500).Error })
		total, lowest := stockRows(t, db, p.ID)
		var got Product
		must(t, db.First(&got, p.ID).Error)
		if sold != 3500 || total != 0 || got.Stock != 0 || lowest < 0 {
			t.Fatalf("sold %d, stock %d (loaded %d, lowest row %d); want 3500 sold and 0 left, no row below 0", sold, total, got.Stock, lowest)
		}
		t.Logf("%s: %d buyers sold %d of 3,000 + 500 restocked; %d refused once sold out", e.kind, buyers, sold, refused)
	}, pool(writersPool))
}

// flashSale runs buyers that take 1 with take until refused, and restock
// once after the 1,000th sale. It returns how many takes succeeded and how
// many were refused, and fails t on any other error or on a false "sold
// out": a refusal that returned before a take that then succeeded started
// (the stock only goes down after the restock).
func flashSale(t *testing.T, buyers int, take, restock func() error) (sold, refused int64) {
	t.Helper()
	var (
		nsold, nrefused             atomic.Int64
		restocked                   sync.Once
		mu                          sync.Mutex
		firstRefusal, lastSaleStart time.Time
	)
	var wg sync.WaitGroup
	errs := make(chan error, buyers)
	for range buyers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				start := time.Now()
				err := take()
				switch {
				case err == nil:
					mu.Lock()
					if start.After(lastSaleStart) {
						lastSaleStart = start
					}
					mu.Unlock()
					if nsold.Add(1) == 1000 {
						restocked.Do(func() {
							if err := restock(); err != nil {
								errs <- err
							}
						})
					}
				case errors.Is(err, gormcounter.ErrInsufficient):
					nrefused.Add(1)
					mu.Lock()
					if now := time.Now(); firstRefusal.IsZero() || now.Before(firstRefusal) {
						firstRefusal = now
					}
					mu.Unlock()
					return
				default:
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if firstRefusal.Before(lastSaleStart) {
		t.Fatalf("a buyer was refused (at %v) before a sale that then succeeded started (%v): refused while stock remained", firstRefusal, lastSaleStart)
	}
	return nsold.Load(), nrefused.Load()
}

// Takes of random sizes (1 to 5): a buyer refused for k > 1 tries 1, and
// stops when even 1 is refused. Every unit is sold exactly once.
func TestGuardedTakesOfRandomSizesAreExact(t *testing.T) {
	eachDB(t, func(t *testing.T, e *env) {
		db := e.db
		p := newProduct(t, db, 2000)
		var sold atomic.Int64
		buyers := 32
		if e.kind == lite {
			buyers = 8
		}
		hammer(t, buyers, 1, func() error {
			return buyUntilSoldOut(&sold, int64(1+rand.IntN(5)), func(size int64) error {
				return gormcounter.Take(db.Model(&Product{ID: p.ID}), "Stock", size).Error
			})
		})
		total, lowest := stockRows(t, db, p.ID)
		if sold.Load() != 2000 || total != 0 || lowest < 0 {
			t.Fatalf("sold %d, %d left, lowest row %d; want 2000 sold, 0 left, no row below 0", sold.Load(), total, lowest)
		}
	}, pool(writersPool))
}

// A take inside a transaction that rolls back returns the stock; a take of
// more than is left takes nothing; a decrease other than Take is refused
// with an error naming the model and field; so is Take on a counter that
// is not guarded.
func TestGuardedTakeRollsBackRefusesAndNames(t *testing.T) {
	eachDB(t, func(t *testing.T, e *env) {
		db := e.db
		p := newProduct(t, db, 10)
		tx := db.Begin()
		must(t, gormcounter.Take(tx.Model(&Product{ID: p.ID}), "Stock", 7).Error)
		must(t, tx.Rollback().Error)
		if total, _ := stockRows(t, db, p.ID); total != 10 {
			t.Fatalf("stock %d after a rolled-back take of 7; want 10", total)
		}
		err := gormcounter.Take(db.Model(&Product{ID: p.ID}), "Stock", 11).Error
		if !errors.Is(err, gormcounter.ErrInsufficient) || !strings.Contains(err.Error(), "Product.Stock") {
			t.Fatalf("take of 11 from 10: %v; want ErrInsufficient naming Product.Stock", err)
		}
		if short := (*gormcounter.Shortage)(nil); !errors.As(err, &short) || short.Left != 10 || short.Asked != 11 {
			t.Fatalf("take of 11 from 10: %v; want a Shortage of 10 left, 11 asked", err)
		}
		// Spread over 16 rows, 10 units sit in 10 rows of 1: a take of 4
		// gathers from several.
		must(t, gormcounter.Take(db.Model(&Product{ID: p.ID}), "Stock", 4).Error)
		for _, write := range []func() error{
			func() error { return gormcounter.Increment(db.Model(&Product{ID: p.ID}), "Stock", -1).Error },
			func() error {
				return db.Model(&Product{ID: p.ID}).UpdateColumn("stock", gorm.Expr("stock - ?", 1)).Error
			},
		} {
			if err := write(); !errors.Is(err, gormcounter.ErrNegativeGuarded) || !strings.Contains(err.Error(), "Product.Stock") {
				t.Fatalf("a decrease of a guarded counter: %v; want ErrNegativeGuarded naming Product.Stock", err)
			}
		}
		must(t, db.AutoMigrate(&Post{}))
		post := Post{Title: "x"}
		must(t, db.Create(&post).Error)
		if err := gormcounter.Take(db.Model(&Post{ID: post.ID}), "Likes", 1).Error; !errors.Is(err, gormcounter.ErrNotGuarded) || !strings.Contains(err.Error(), "Post.Likes") {
			t.Fatalf("Take of Post.Likes: %v; want ErrNotGuarded naming Post.Likes", err)
		}
		total, lowest := stockRows(t, db, p.ID)
		if total != 6 || lowest < 0 {
			t.Fatalf("stock %d (lowest row %d) after taking 4 of 10; want 6", total, lowest)
		}
	})
}

// Takes inside transactions, 16 buyers each taking 1 to 3 in a
// transaction of its own until refused: no deadlock, every unit of 500
// sold once. (A try that read a row holding too little keeps it locked
// under MySQL's REPEATABLE READ: tries go in slot order there.)
func TestGuardedTakesInTransactionsAreExact(t *testing.T) {
	eachDB(t, func(t *testing.T, e *env) {
		db := e.db
		p := newProduct(t, db, 500)
		var sold atomic.Int64
		buyers := 16
		if e.kind == lite {
			buyers = 4
		}
		hammer(t, buyers, 1, func() error {
			return buyUntilSoldOut(&sold, int64(1+rand.IntN(3)), func(size int64) error {
				return db.Transaction(func(tx *gorm.DB) error {
					return gormcounter.Take(tx.Model(&Product{ID: p.ID}), "Stock", size).Error
				})
			})
		})
		total, lowest := stockRows(t, db, p.ID)
		if sold.Load() != 500 || total != 0 || lowest < 0 {
			t.Fatalf("sold %d, %d left, lowest row %d; want 500 sold, 0 left", sold.Load(), total, lowest)
		}
	}, pool(writersPool))
}

// buyUntilSoldOut takes size units with take, adding what it got to sold,
// until refused; refused for more than 1, it goes on with 1, and stops
// when even 1 is refused. Any other error is returned.
func buyUntilSoldOut(sold *atomic.Int64, size int64, take func(size int64) error) error {
	for {
		err := take(size)
		switch {
		case err == nil:
			sold.Add(size)
		case errors.Is(err, gormcounter.ErrInsufficient) && size > 1:
			size = 1
		case errors.Is(err, gormcounter.ErrInsufficient):
			return nil
		default:
			return err
		}
	}
}

// The endgame: a take gathered from several rows moves what remains into
// as few rows as each hold a take of its size, so that the last units are
// not spread thin: 10 units in 10 rows of 1, a take of 4 leaves one row of
// 6, from which the next take of 4 is served alone. With much left, it
// keeps as many rows as hold such a take: 1,600 in 16 rows of 100, a take
// of 150 leaves 1,450 in 9 rows of 161 or 162.
func TestGuardedEndgameGathersTheRestIntoFewRows(t *testing.T) {
	eachDB(t, func(t *testing.T, e *env) {
		db := e.db
		rows := func(id uint) (nonEmpty, lowest int64) {
			must(t, db.Raw("SELECT COUNT(*), COALESCE(MIN(n), 0) FROM product_stock_slots WHERE product_id = ? AND n > 0", id).Row().Scan(&nonEmpty, &lowest))
			return nonEmpty, lowest
		}
		p := newProduct(t, db, 10)
		if n, _ := rows(p.ID); n != 10 {
			t.Fatalf("a restock of 10 sits in %d rows, want 10", n)
		}
		must(t, gormcounter.Take(db.Model(&Product{ID: p.ID}), "Stock", 4).Error)
		if n, low := rows(p.ID); n != 1 || low != 6 {
			t.Fatalf("after taking 4 of 10 rows of 1: %d rows hold stock, the lowest %d; want one row of 6", n, low)
		}
		must(t, gormcounter.Take(db.Model(&Product{ID: p.ID}), "Stock", 4).Error)
		if total, lowest := stockRows(t, db, p.ID); total != 2 || lowest < 0 {
			t.Fatalf("stock %d (lowest row %d) after taking 8 of 10", total, lowest)
		}

		big := newProduct(t, db, 1600)
		must(t, gormcounter.Take(db.Model(&Product{ID: big.ID}), "Stock", 150).Error)
		if n, low := rows(big.ID); n != 9 || low != 161 {
			t.Fatalf("after taking 150 of 16 rows of 100: %d rows hold stock, the lowest %d; want 9 rows of 161 or 162", n, low)
		}
		if total, _ := stockRows(t, db, big.ID); total != 1450 {
			t.Fatalf("stock %d after taking 150 of 1,600", total)
		}
	})
}
