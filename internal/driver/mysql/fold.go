package mysql

import (
	"context"
	"errors"

	"github.com/hotcounter/hotcounter/internal/countersql"
	"github.com/hotcounter/hotcounter/internal/engine"
)

// foldDeltas folds the delta rows in (after, upTo] of the parents that
// no one holds: it reads their owners without locks, locks those parents
// (SKIP LOCKED), locks their delta rows, adds exactly the values it read to
// the columns and deletes exactly those rows. An increment holding its
// parent's shared lock (its foreign key check) is skipped, never waited
// for, so the two cannot deadlock; what is skipped stays for the next pass.
func foldDeltas(ctx context.Context, tx engine.Conn, d countersql.MySQL, t countersql.Table, after, upTo int64) error {
	owners, err := engine.QueryKeys(ctx, tx, func(w countersql.Writer) { d.DeltaOwners(w, t, after, upTo) })
	if err != nil || len(owners) == 0 {
		return err
	}
	for start := 0; start < len(owners); start += engine.FillChunk {
		chunk := owners[start:min(start+engine.FillChunk, len(owners))]
		locked, err := engine.QueryKeys(ctx, tx, func(w countersql.Writer) { d.LockParents(w, t, chunk) })
		if err != nil {
			return err
		}
		if len(locked) == 0 {
			continue
		}
		rows, err := tx.Query(ctx, func(w countersql.Writer) { d.LockDeltas(w, t, after, upTo, locked) })
		if err != nil {
			return err
		}
		var (
			ids     []any
			keys    []any
			amounts []int64
			index   = map[string]int{}
			kr      = engine.NewKeyReader(rows, 1)
		)
		for rows.Next() {
			var id, n int64
			var owner any
			if err := rows.Scan(&id, &owner, &n); err != nil {
				rows.Close()
				return err
			}
			owner = kr.Key(owner)
			ids = append(ids, id)
			k := engine.KeyText(owner)
			i, seen := index[k]
			if !seen {
				i = len(keys)
				index[k] = i
				keys, amounts = append(keys, owner), append(amounts, 0)
			}
			amounts[i] += n
		}
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			return err
		}
		if len(ids) == 0 {
			continue
		}
		if _, err := tx.Exec(ctx, func(w countersql.Writer) { d.AddToColumns(w, t, keys, amounts) }); err != nil {
			return err
		}
		for s := 0; s < len(ids); s += engine.DeleteChunk {
			part := ids[s:min(s+engine.DeleteChunk, len(ids))]
			if _, err := tx.Exec(ctx, func(w countersql.Writer) { d.DeleteDeltas(w, t, part) }); err != nil {
				return err
			}
		}
	}
	return nil
}

// fold folds the pending slots of owners into their parents' column:
// it locks the parents and then their slot rows that no one else holds
// (SKIP LOCKED, so the fold never waits), adds the slot values to the
// columns, and empties the slot rows it added (n = 0: they stay, see
// countersql.MySQL.ZeroSlot). What it skips stays pending.
func fold(ctx context.Context, tx engine.Conn, d countersql.MySQL, t countersql.Table, owners []any) error {
	parents, err := engine.QueryKeys(ctx, tx, func(w countersql.Writer) { d.LockParents(w, t, owners) })
	if err != nil || len(parents) == 0 {
		return err
	}
	var (
		keys    []any
		amounts []int64
	)
	for _, owner := range parents {
		slots, sum, err := lockSlots(ctx, tx, d, t, owner)
		if err != nil {
			return err
		}
		if len(slots) == 0 {
			continue
		}
		for _, slot := range slots {
			if _, err := tx.Exec(ctx, func(w countersql.Writer) { d.ZeroSlot(w, t, owner, slot) }); err != nil {
				return err
			}
		}
		keys, amounts = append(keys, owner), append(amounts, sum)
	}
	if len(keys) == 0 {
		return nil
	}
	_, err = tx.Exec(ctx, func(w countersql.Writer) { d.AddToColumns(w, t, keys, amounts) })
	return err
}

// lockSlots locks the slot rows of owner that hold a value and no one else
// holds, and returns their slots and the sum of their values.
func lockSlots(ctx context.Context, tx engine.Conn, d countersql.MySQL, t countersql.Table, owner any) (slots []int64, sum int64, err error) {
	rows, err := tx.Query(ctx, func(w countersql.Writer) { d.LockSlots(w, t, owner) })
	if err != nil {
		return nil, 0, err
	}
	for rows.Next() {
		var slot, n int64
		if err := rows.Scan(&slot, &n); err != nil {
			rows.Close()
			return nil, 0, err
		}
		slots, sum = append(slots, slot), sum+n
	}
	return slots, sum, errors.Join(rows.Err(), rows.Close())
}
