package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/hotcounter/hotcounter/internal/countersql"
)

// IncrementFreeSlot adds delta to a slot row of the one parent matching
// cond that no other transaction holds (PostgreSQL); if it has none free
// (or no slot rows yet), it adds to slot `slot` as a plain increment does.
// The first statement changes nothing when it finds no free row, so the two
// never apply half an increment. It returns the number of parents
// incremented.
func IncrementFreeSlot(ctx context.Context, c Conn, d countersql.Dialect, t countersql.Table, slot int, delta int64, cond func(countersql.Writer)) (int64, error) {
	rows, err := c.Query(ctx, func(w countersql.Writer) { d.IncrementFreeSlot(w, t, slot, delta, cond) })
	if err != nil {
		return 0, err
	}
	updated := 0
	for rows.Next() {
		updated++
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return 0, err
	}
	switch {
	case updated > 1:
		return 0, fmt.Errorf("a skip-locked increment of one parent updated %d slot rows", updated)
	case updated == 1:
		return 1, nil
	}
	return c.Exec(ctx, func(w countersql.Writer) { d.IncrementWhere(w, t, slot, delta, cond) })
}
