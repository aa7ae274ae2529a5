package integration_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/hotcounter/hotcounter"
)

// Product's stock is a guarded counter: it never goes below zero.
type Product struct {
	ID    uint
	Name  string
	Stock int64 `gorm:"counter:guarded"`
}

// stockRows returns the product's total stock and its lowest slot row.
func stockRows(t *testing.T, db *gorm.DB, id int64) (total, lowest int64) {
	t.Helper()
	must(t, db.Raw("SELECT COALESCE(SUM(n), 0), COALESCE(MIN(n), 0) FROM product_stock_slots WHERE product_id = ?", id).Row().Scan(&total, &lowest))
	return total, lowest
}

// restocked creates a product and restocks it with stock (an increment).
func restocked(t *testing.T, o counterORM, stock int64) int64 {
	t.Helper()
	id := o.create(t, modelProduct)
	if stock > 0 {
		must(t, o.increment(modelProduct, id, "stock", stock))
	}
	return id
}

// The flash sale of the issue: 64 buyers take 1 each from 3,000, created
// with the product, while a restock of 500 arrives (sent after the first
// 1,000 sales). Exactly 3,500 takes succeed, the stock ends at 0, no slot
// row ever holds less than 0, and no buyer is refused while stock remained
// (see flashSale). Both ORMs.
func TestGuardedFlashSaleIsExact(t *testing.T) {
	eachORM(t, func(t *testing.T, o counterORM) {
		db := o.db()
		id, err := o.createWith(modelProduct, "stock", 3000)
		must(t, err)
		if total, lowest := stockRows(t, db, id); total != 3000 || lowest < 187 {
			t.Fatalf("created with 3,000: %d in the slot rows, the lowest holding %d; want 3,000 spread over the 16 rows", total, lowest)
		}
		buyers := 64
		if o.kind() == lite {
			buyers = 8
		}
		sold, refused := flashSale(t, buyers, 3000,
			func() error { return o.take(modelProduct, id, "stock", 1) },
			func() error { return o.increment(modelProduct, id, "stock", 500) })
		total, lowest := stockRows(t, db, id)
		if loaded := o.cached(t, modelProduct, id, "stock"); sold != 3500 || total != 0 || loaded != 0 || lowest < 0 {
			t.Fatalf("sold %d, stock %d (loaded %d, lowest row %d); want 3500 sold and 0 left, no row below 0", sold, total, loaded, lowest)
		}
		t.Logf("%s: %d buyers sold %d of 3,000 + 500 restocked; %d refused once sold out", o.kind(), buyers, sold, refused)
	}, pool(writersPool))
}

// flashSale runs buyers that take 1 with take until refused, from a
// stock of initial, and restock once after the 1,000th sale. It returns
// how many takes succeeded and how many were refused, and fails t on any
// other error or on a false "sold out":
//   - before the restock has returned, a refusal while more than buyers
//     units of the initial stock were unsold (at most buyers takes are
//     under way at once). The restock may land late: every take and the
//     restock meet on the same 16 rows, and 64 buyers sell 2,000 units in
//     under 100 ms on PostgreSQL.
//   - after it, a refusal that returned before a take that then succeeded
//     started (the stock only goes down after the restock).
func flashSale(t *testing.T, buyers int, initial int64, take, restock func() error) (sold, refused int64) {
	t.Helper()
	var (
		nsold, nrefused             atomic.Int64
		restocked                   sync.Once
		restockDone                 atomic.Bool
		mu                          sync.Mutex
		firstRefusal, lastSaleStart time.Time
	)
	var wg sync.WaitGroup
	errs := make(chan error, buyers+1)
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
							restockDone.Store(true)
						})
					}
				case errors.Is(err, hotcounter.ErrInsufficient):
					nrefused.Add(1)
					if !restockDone.Load() {
						if sold := nsold.Load(); sold < initial-int64(buyers) {
							errs <- fmt.Errorf("refused (%w) with %d of %d sold, before the restock returned: stock remained", err, sold, initial)
						}
						return
					}
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
	if !firstRefusal.IsZero() && firstRefusal.Before(lastSaleStart) {
		t.Fatalf("a buyer was refused (at %v) after the restock, before a sale that then succeeded started (%v): refused while stock remained", firstRefusal, lastSaleStart)
	}
	return nsold.Load(), nrefused.Load()
}

// Takes of random sizes (1 to 5): a buyer refused for k > 1 tries 1, and
// stops when even 1 is refused. Every unit is sold exactly once. Both ORMs.
func TestGuardedTakesOfRandomSizesAreExact(t *testing.T) {
	eachORM(t, func(t *testing.T, o counterORM) {
		id := restocked(t, o, 2000)
		var sold atomic.Int64
		buyers := 32
		if o.kind() == lite {
			buyers = 8
		}
		hammer(t, buyers, 1, func() error {
			return buyUntilSoldOut(&sold, int64(1+rand.IntN(5)), func(size int64) error {
				return o.take(modelProduct, id, "stock", size)
			})
		})
		total, lowest := stockRows(t, o.db(), id)
		if sold.Load() != 2000 || total != 0 || lowest < 0 {
			t.Fatalf("sold %d, %d left, lowest row %d; want 2000 sold, 0 left, no row below 0", sold.Load(), total, lowest)
		}
	}, pool(writersPool))
}

// errTakeRolledBack makes inTx roll its transaction back.
var errTakeRolledBack = errors.New("rolled back")

// A take inside a transaction that rolls back returns the stock; a take of
// more than is left takes nothing and says what was left and asked; a
// decrease other than Take (a negative increment, the ORM's own
// subtraction, one of several rows, an assignment or a creation below
// zero) is refused with an error naming the model and field; so is Take
// on a counter that is not guarded. The errors are the same values in
// both packages. Both ORMs.
func TestGuardedTakeRollsBackRefusesAndNames(t *testing.T) {
	eachORM(t, func(t *testing.T, o counterORM) {
		db := o.db()
		id := restocked(t, o, 10)
		if n := rawInt(t, db, "SELECT COUNT(*) FROM product_stock_slots WHERE product_id = ? AND n > 0", id); n != 10 {
			t.Fatalf("a restock of 10 sits in %d slot rows; want 10 rows of 1 (spread over 16 slots)", n)
		}
		err := o.inTx(func(tx counterORM) error {
			must(t, tx.take(modelProduct, id, "stock", 7))
			return errTakeRolledBack
		})
		if !errors.Is(err, errTakeRolledBack) {
			t.Fatalf("the transaction of a take of 7: %v", err)
		}
		if total, _ := stockRows(t, db, id); total != 10 {
			t.Fatalf("stock %d after a rolled-back take of 7; want 10", total)
		}
		stock := o.name(modelProduct, "stock")
		err = o.take(modelProduct, id, "stock", 11)
		if !errors.Is(err, hotcounter.ErrInsufficient) || !errors.Is(err, hotcounter.ErrInsufficient) || !strings.Contains(err.Error(), stock) {
			t.Fatalf("take of 11 from 10: %v; want ErrInsufficient naming %s", err, stock)
		}
		if short := (*hotcounter.Shortage)(nil); !errors.As(err, &short) || short.Left != 10 || short.Asked != 11 {
			t.Fatalf("take of 11 from 10: %v; want a Shortage of 10 left, 11 asked", err)
		}
		// Spread over 16 rows, 10 units sit in 10 rows of 1: a take of 4
		// gathers from several.
		must(t, o.take(modelProduct, id, "stock", 4))
		for what, write := range map[string]func() error{
			"a negative increment":       func() error { return o.increment(modelProduct, id, "stock", -1) },
			"the ORM's own subtraction":  func() error { return o.add(modelProduct, id, "stock", -1) },
			"a decrease of several rows": func() error { return errOf(o.incrementMany(modelProduct, []int64{id}, "stock", -1)) },
			"an assignment below zero":   func() error { return o.set(modelProduct, id, "stock", -1) },
			"a creation below zero":      func() error { return errOf(o.createWith(modelProduct, "stock", -5)) },
		} {
			if err := write(); !errors.Is(err, hotcounter.ErrNegativeGuarded) || !errors.Is(err, hotcounter.ErrNegativeGuarded) || !strings.Contains(err.Error(), stock) {
				t.Fatalf("%s of a guarded counter: %v; want ErrNegativeGuarded naming %s", what, err, stock)
			}
		}
		post := o.create(t, modelPost)
		if err := o.take(modelPost, post, "likes", 1); !errors.Is(err, hotcounter.ErrNotGuarded) || !strings.Contains(err.Error(), o.name(modelPost, "likes")) {
			t.Fatalf("Take of %s: %v; want ErrNotGuarded naming it", o.name(modelPost, "likes"), err)
		}
		total, lowest := stockRows(t, db, id)
		if loaded := o.cached(t, modelProduct, id, "stock"); total != 6 || loaded != 6 || lowest < 0 {
			t.Fatalf("stock %d (loaded %d, lowest row %d) after taking 4 of 10; want 6", total, loaded, lowest)
		}
	})
}

// A take from a row that does not exist is the ORM's NotFound
// (gorm.ErrRecordNotFound, ent's NotFoundError), naming the counter, alone
// and inside a transaction; a take from a row that exists with no stock is
// still a Shortage of 0 left. Both ORMs.
func TestGuardedTakeOfAMissingRowIsNotFound(t *testing.T) {
	eachORM(t, func(t *testing.T, o counterORM) {
		empty := o.create(t, modelProduct)
		stock := o.name(modelProduct, "stock")
		missing := empty + 1000
		if err := o.take(modelProduct, missing, "stock", 1); !errors.Is(err, errNoRow) || !strings.Contains(err.Error(), stock) {
			t.Errorf("a take from a missing row: %v; want NotFound naming %s", err, stock)
		}
		err := o.inTx(func(tx counterORM) error { return tx.take(modelProduct, missing, "stock", 2) })
		if !errors.Is(err, errNoRow) {
			t.Errorf("a take from a missing row in a transaction: %v; want NotFound", err)
		}
		var short *hotcounter.Shortage
		if err := o.take(modelProduct, empty, "stock", 1); !errors.As(err, &short) || short.Left != 0 || errors.Is(err, errNoRow) {
			t.Errorf("a take from a row without stock: %v; want a Shortage of 0 left, not NotFound", err)
		}
	})
}

// Takes inside transactions, 16 buyers each taking 1 to 3 in a
// transaction of its own until refused: no deadlock, every unit of 500
// sold once. (A try that read a row holding too little keeps it locked
// under MySQL's REPEATABLE READ: tries go in slot order there.) Both ORMs.
func TestGuardedTakesInTransactionsAreExact(t *testing.T) {
	eachORM(t, func(t *testing.T, o counterORM) {
		id := restocked(t, o, 500)
		var sold atomic.Int64
		buyers := 16
		if o.kind() == lite {
			buyers = 4
		}
		hammer(t, buyers, 1, func() error {
			return buyUntilSoldOut(&sold, int64(1+rand.IntN(3)), func(size int64) error {
				return o.inTx(func(tx counterORM) error { return tx.take(modelProduct, id, "stock", size) })
			})
		})
		total, lowest := stockRows(t, o.db(), id)
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
		case errors.Is(err, hotcounter.ErrInsufficient) && size > 1:
			size = 1
		case errors.Is(err, hotcounter.ErrInsufficient):
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
// of 150 leaves 1,450 in 9 rows of 161 or 162. Both ORMs.
func TestGuardedEndgameGathersTheRestIntoFewRows(t *testing.T) {
	eachORM(t, func(t *testing.T, o counterORM) {
		db := o.db()
		rows := func(id int64) (nonEmpty, lowest int64) {
			must(t, db.Raw("SELECT COUNT(*), COALESCE(MIN(n), 0) FROM product_stock_slots WHERE product_id = ? AND n > 0", id).Row().Scan(&nonEmpty, &lowest))
			return nonEmpty, lowest
		}
		id := restocked(t, o, 10)
		if n, _ := rows(id); n != 10 {
			t.Fatalf("a restock of 10 sits in %d rows, want 10", n)
		}
		must(t, o.take(modelProduct, id, "stock", 4))
		if n, low := rows(id); n != 1 || low != 6 {
			t.Fatalf("after taking 4 of 10 rows of 1: %d rows hold stock, the lowest %d; want one row of 6", n, low)
		}
		must(t, o.take(modelProduct, id, "stock", 4))
		if total, lowest := stockRows(t, db, id); total != 2 || lowest < 0 {
			t.Fatalf("stock %d (lowest row %d) after taking 8 of 10", total, lowest)
		}

		big := restocked(t, o, 1600)
		must(t, o.take(modelProduct, big, "stock", 150))
		if n, low := rows(big); n != 9 || low != 161 {
			t.Fatalf("after taking 150 of 16 rows of 100: %d rows hold stock, the lowest %d; want 9 rows of 161 or 162", n, low)
		}
		if total, _ := stockRows(t, db, big); total != 1450 {
			t.Fatalf("stock %d after taking 150 of 1,600", total)
		}
	})
}
