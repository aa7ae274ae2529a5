package engine

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/hotcounter/hotcounter"
	"github.com/hotcounter/hotcounter/internal/combine"
	"github.com/hotcounter/hotcounter/internal/countersql"
)

// ErrNotFound is Take's error when the parent row does not exist: it holds
// nothing, and not for want of stock.
var ErrNotFound = errors.New("no such row")

// SplitTakes is the Split of a combine.Group of takes: it answers the
// buyers of a combined take refused for want of stock (it took nothing): a
// buyer asking more than was left is refused at once, as a take of its own
// would have been then; the others take alone. Any other error is every
// buyer's: the take may have committed.
func SplitTakes(err error) func(amount int64) (bool, error) {
	var short *hotcounter.Shortage
	if !errors.As(err, &short) {
		return nil
	}
	return func(amount int64) (bool, error) {
		if amount > short.Left {
			return false, &hotcounter.Shortage{Left: short.Left, Asked: amount}
		}
		return true, nil
	}
}

// Take subtracts amount (> 0) from the guarded counter of the parent key:
// in full, or not at all with hotcounter.ErrInsufficient when its total is below
// amount. First from one slot row that holds enough: on PostgreSQL one no
// other transaction holds (never waiting); then, and elsewhere at once, the
// rows holding enough tried one by one from a random one (each try waits
// for that row only; MySQL/MariaDB and SQLite try a random slot first).
// Outside a transaction, when that read shows less than amount in all rows
// together, it refuses at once (what was committed when the read began was
// short). When none will do, it locks
// every slot row of the parent in slot order (waiting for takes under
// way), and either refuses, the total being short at that moment, or takes
// from the fullest rows first; when little remains it moves it into as few
// rows as each hold a take of this size (the endgame: the last units are
// not spread thin). Inside the
// caller's transaction (a rollback returns the stock), else in one of its
// own, retried on deadlock.
func Take(ctx context.Context, s Session, d Dialect, t countersql.Table, slots int, key any, amount int64) error {
	err := take(ctx, s, d, t, slots, key, amount)
	var short *hotcounter.Shortage
	if errors.As(err, &short) && short.Left == 0 {
		// Nothing at all: a parent without stock, or no parent. Only a
		// refusal pays for the read that tells them apart.
		if keys, e := QueryKeys(ctx, s, func(w countersql.Writer) { d.SelectKeys(w, t, d.KeyIn(t, []any{key})) }); e == nil && len(keys) == 0 {
			return fmt.Errorf("%w: %s has no row %v", ErrNotFound, t.Parent, key)
		}
	}
	return err
}

// take is Take, a refusal not yet told apart from a missing parent.
func take(ctx context.Context, s Session, d Dialect, t countersql.Table, slots int, key any, amount int64) error {
	if amount <= 0 {
		return fmt.Errorf("a take of %d: take a positive amount (Increment restocks)", amount)
	}
	if !s.InTx() {
		// Outside a transaction each statement of the first try takes in
		// full or changes nothing: autocommit, no BEGIN and COMMIT. If it
		// finds no row, a transaction of its own gathers (takeAcross).
		var ok bool
		err := OwnStatement(ctx, s, func() (err error) {
			ok, err = TakeOne(ctx, s, d, t, slots, key, amount, false)
			return err
		})
		if err != nil || ok {
			return err
		}
		return OwnTransaction(ctx, s, func(tx Session) error { return takeAcross(ctx, tx, d, t, key, amount) })
	}
	// Inside the caller's transaction a row that a try read stays locked
	// until the caller commits (MySQL's REPEATABLE READ keeps the lock of a
	// row an UPDATE read but did not change; PostgreSQL's UPDATE keeps the
	// lock it took to recheck a row that changed), and tries over some rows
	// followed by takeAcross over all would lock them out of order and
	// deadlock. So the first try is the database's (its Driver's
	// FirstTake: one that never waits and keeps no stray lock, or none).
	ok, err := d.Driver.FirstTake(ctx, s, t, slots, key, amount)
	if err != nil || ok {
		return err
	}
	// Several statements in the caller's transaction: all or none.
	return InSavepoint(ctx, s, "hc_take", func() error { return takeAcross(ctx, s, d, t, key, amount) })
}

// TakeTogether is Take for either ORM's take of one item: outside a
// transaction, takes of the item that arrive while others run go together
// through g as one take of their sum (refused, each buyer asking no more
// than was left takes alone: g splits with SplitTakes). key names the item
// in g; "" takes alone, as does a take inside the caller's transaction,
// which must roll back alone.
func TakeTogether(ctx context.Context, s Session, d Dialect, g *combine.Group, key string, t countersql.Table, slots int, item any, amount int64) error {
	take := func(ctx context.Context, amount int64) (int64, error) {
		return 1, Take(ctx, s, d, t, slots, item, amount)
	}
	var err error
	if s.InTx() || amount <= 0 || key == "" {
		_, err = take(ctx, amount)
	} else {
		_, err = g.Do(ctx, key, amount, take)
	}
	return err
}

// TakeOne takes amount from one slot row that holds enough, if it finds
// one. ordered tries the rows in slot order, from the lowest, and never a
// random one first.
func TakeOne(ctx context.Context, c Conn, d Dialect, t countersql.Table, slots int, key any, amount int64, ordered bool) (bool, error) {
	if ok, tried, err := d.Driver.TakeFree(ctx, c, t, key, amount); tried {
		if err != nil || ok {
			return ok, err
		}
		// Every row holding enough is held (more buyers than slots): wait
		// for one of them, not for all.
	} else if !ordered {
		// One round trip while the stock is spread: a random slot first.
		n, err := c.Exec(ctx, func(w countersql.Writer) { d.TakeFromSlot(w, t, key, rand.IntN(max(slots, 1)), amount) })
		if err != nil || n == 1 {
			return n == 1, err
		}
	}
	var holding []int64 // slots of rows holding enough
	var total int64
	rows, err := c.Query(ctx, func(w countersql.Writer) { d.SlotsHolding(w, t, key) })
	if err != nil {
		return false, err
	}
	for rows.Next() {
		var slot, n int64
		if err := rows.Scan(&slot, &n); err != nil {
			rows.Close()
			return false, err
		}
		if total += n; n >= amount {
			holding = append(holding, slot)
		}
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return false, err
	}
	if total < amount && !ordered {
		// Outside a transaction the read saw what was committed when it
		// began: less than amount, in every row together (a take under way
		// elsewhere shows what it has not yet taken). Refused without
		// locking every row, so that buyers after the sell-out do not queue
		// on them all, one after another.
		return false, &hotcounter.Shortage{Left: total, Asked: amount}
	}
	start := 0
	if ordered {
		slices.Sort(holding)
	} else if len(holding) > 0 {
		start = rand.IntN(len(holding))
	}
	for i := range holding {
		slot := holding[(start+i)%len(holding)]
		n, err := c.Exec(ctx, func(w countersql.Writer) { d.TakeFromSlot(w, t, key, int(slot), amount) })
		if err != nil || n == 1 {
			return n == 1, err
		}
	}
	return false, nil
}

// takeAcross locks every slot row of the parent and takes amount from the
// fullest first, moving what remains into fewer rows in the endgame, in one
// statement; or refuses with a hotcounter.Shortage.
func takeAcross(ctx context.Context, c Conn, d Dialect, t countersql.Table, key any, amount int64) error {
	parts, total, err := lockAll(ctx, c, d, t, key)
	if err != nil {
		return err
	}
	if total < amount {
		return &hotcounter.Shortage{Left: total, Asked: amount}
	}
	// Fullest first: the take touches as few rows as it can.
	slices.SortStableFunc(parts, func(a, b part) int { return int(b.n - a.n) })
	after := make([]int64, len(parts))
	left := amount
	for i, p := range parts {
		if p.n <= 0 {
			// A row below zero (an unsigned counter's, written before its
			// decreases were takes) keeps what it holds: it is in total.
			after[i] = p.n
			continue
		}
		x := min(p.n, left)
		after[i], left = p.n-x, left-x
	}
	// The endgame: when what remains cannot give every row a take of this
	// size, it goes into as few rows as each hold at least one (the
	// fullest), so that the last units are not spread thin and the next
	// take like this one finds a row of its own.
	if rest := total - amount; rest < amount*int64(len(parts)) {
		k := int64(max(1, min(int64(len(parts)), rest/amount)))
		for i := range after {
			after[i] = 0
			if int64(i) < k {
				after[i] = rest / k
				if int64(i) < rest%k {
					after[i]++
				}
			}
		}
	}
	var slots []any
	var changes []int64
	for i, p := range parts {
		if after[i] != p.n {
			slots, changes = append(slots, p.slot), append(changes, after[i]-p.n)
		}
	}
	n, err := c.Exec(ctx, func(w countersql.Writer) { d.ReshapeSlots(w, t, key, slots, changes) })
	if err != nil {
		return err
	}
	if n != int64(len(slots)) {
		return fmt.Errorf("%d of %d slot rows of a locked parent written: they changed under its lock", n, len(slots))
	}
	return nil
}

// part is one slot row that takeAcross locked.
type part struct{ slot, n int64 }

// lockAll locks every slot row of the parent in slot order and returns
// them with their total. On MySQL/MariaDB a slot table with a surrogate
// key (ent's) is locked one row at a time by its unique key, so that every
// take locks the unique index, then the row, as single-row takes do: a
// statement over all rows of a small table may scan it and lock rows then
// index, and two takes locking in those two orders deadlock.
func lockAll(ctx context.Context, c Conn, d Dialect, t countersql.Table, key any) ([]part, int64, error) {
	var parts []part
	var total int64
	read := func(stmt func(w countersql.Writer)) error {
		rows, err := c.Query(ctx, stmt)
		if err != nil {
			return err
		}
		for rows.Next() {
			var p part
			if err := rows.Scan(&p.slot, &p.n); err != nil {
				rows.Close()
				return err
			}
			parts, total = append(parts, p), total+p.n
		}
		return errors.Join(rows.Err(), rows.Close())
	}
	if err := d.Driver.LockAllSlots(ctx, c, t, key, read); err != nil {
		return nil, 0, err
	}
	return parts, total, nil
}

// Restock adds amount to the guarded counter of the parent key, spread
// over its slots (the first amount % slots get one more), so that takes
// find stock in every row.
func Restock(ctx context.Context, s Session, d Dialect, t countersql.Table, slots int, key any, amount int64) error {
	n := int64(max(slots, 1))
	amounts := make([]int64, 0, n)
	for i := range n {
		a := amount / n
		if i < amount%n {
			a++
		}
		if a > 0 {
			amounts = append(amounts, a)
		}
	}
	return OwnStatement(ctx, s, func() error {
		_, err := s.Exec(ctx, func(w countersql.Writer) { d.SpreadOver(w, t, key, amounts) })
		return err
	})
}
