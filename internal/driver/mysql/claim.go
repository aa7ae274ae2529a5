package mysql

import (
	"context"
	"database/sql"
	"errors"
	"math/rand/v2"

	"github.com/hotcounter/hotcounter/internal/countersql"
	"github.com/hotcounter/hotcounter/internal/dberr"
	"github.com/hotcounter/hotcounter/internal/engine"
)

// claimNumber claims the lowest number no live MySQL/MariaDB session
// holds for this session (see countersql's claim.go), which holds none. It
// never waits: a named lock another session holds is passed over. ok is
// false when every number is taken.
func claimNumber(ctx context.Context, c engine.Conn, d countersql.MySQL) (n int, ok bool, err error) {
	for i := range countersql.MaxClaims {
		rows, err := c.Query(ctx, func(w countersql.Writer) { d.TryClaim(w, i) })
		if err != nil {
			return 0, false, err
		}
		var got sql.NullInt64
		for rows.Next() {
			if err := rows.Scan(&got); err != nil {
				rows.Close()
				return 0, false, err
			}
		}
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			return 0, false, err
		}
		if got.Valid && got.Int64 >= 0 {
			return int(got.Int64), true, nil
		}
	}
	return 0, false, nil
}

// addToOwnSlots adds amounts[i] to the session's own slot row of parent
// keys[i] (distinct) on MySQL/MariaDB: a row no other session writes (see
// countersql's claim.go). One query reads, without locks, the number the
// session holds and which of its rows exist; those are updated by primary
// key, which locks them alone and checks no foreign key. A missing row is
// inserted, and its foreign key check takes a shared lock on the parent:
// with guard set, that insert fails instead of waiting for a transaction
// that holds the parent, and the keys it could not write are returned
// (their indexes in keys) for the caller to write another way. slots is
// the counter's slot count; a session that can claim no number writes a
// random slot below it, and may wait. A parent deleted meanwhile is passed
// over. It returns how many parents it wrote.
func addToOwnSlots(ctx context.Context, c engine.Conn, d countersql.MySQL, t countersql.Table, slots int, keys []any, amounts []int64, guard bool) (n int64, missed []int, err error) {
	for start := 0; start < len(keys); start += engine.FillChunk {
		end := min(start+engine.FillChunk, len(keys))
		done, left, err := addToOwnSlot(ctx, c, d, t, slots, keys[start:end], amounts[start:end], guard)
		n += done
		for _, i := range left {
			missed = append(missed, start+i)
		}
		if err != nil {
			return n, missed, err
		}
	}
	return n, missed, nil
}

// ownRows is what OwnSlotRows read.
type ownRows struct {
	claimed           int // -1: none
	rollbackOnTimeout bool
	found             map[string]any // key text -> row id (or slot)
}

// readOwnRows runs OwnSlotRows, and ClaimedSlot when it found no row.
func readOwnRows(ctx context.Context, c engine.Conn, d countersql.MySQL, t countersql.Table, slots int, keys []any, lock bool) (ownRows, error) {
	out := ownRows{claimed: -1, found: map[string]any{}}
	scan := func(q func(countersql.Writer), withRows bool) (int, error) {
		rows, err := c.Query(ctx, q)
		if err != nil {
			return 0, err
		}
		defer rows.Close()
		kr := engine.NewKeyReader(rows, 2)
		n := 0
		for rows.Next() {
			var claimed sql.NullInt64
			var rot sql.NullBool
			var owner, id any
			dest := []any{&claimed, &rot}
			if withRows {
				dest = append(dest, &owner, &id)
			}
			if err := rows.Scan(dest...); err != nil {
				return 0, err
			}
			n++
			out.claimed = -1
			if claimed.Valid {
				out.claimed = int(claimed.Int64)
			}
			out.rollbackOnTimeout = rot.Bool
			if owner != nil {
				out.found[engine.KeyText(kr.Key(owner))] = id
			}
		}
		return n, rows.Err()
	}
	n, err := scan(func(w countersql.Writer) { d.OwnSlotRows(w, t, slots, keys, lock) }, true)
	if err != nil || n > 0 && out.claimed >= 0 {
		return out, err
	}
	// No row, or rows of a number this session no longer holds.
	clear(out.found)
	_, err = scan(d.ClaimedSlot, false)
	return out, err
}

func addToOwnSlot(ctx context.Context, c engine.Conn, d countersql.MySQL, t countersql.Table, slots int, keys []any, amounts []int64, guard bool) (int64, []int, error) {
	own, err := readOwnRows(ctx, c, d, t, slots, keys, false)
	if err != nil {
		return 0, nil, err
	}
	if own.claimed < 0 {
		claimed, ok, err := claimNumber(ctx, c, d)
		if err != nil {
			return 0, nil, err
		}
		if !ok {
			// Every number is held: a random slot, as before claims.
			_, err := insertSlots(ctx, c, d, t, rand.IntN(max(slots, 1)), keys, amounts)
			return int64(len(keys)), nil, err
		}
		if own, err = readOwnRows(ctx, c, d, t, slots, keys, false); err != nil {
			return 0, nil, err
		}
		own.claimed = claimed
	}
	slot := countersql.OwnSlot(slots, own.claimed)
	var (
		ids, found, missing []any
		foundAmounts, rest  []int64
		missingAt           []int
	)
	for i, k := range keys {
		if id, ok := own.found[engine.KeyText(k)]; ok {
			ids, found, foundAmounts = append(ids, id), append(found, k), append(foundAmounts, amounts[i])
		} else {
			missing, rest, missingAt = append(missing, k), append(rest, amounts[i]), append(missingAt, i)
		}
	}
	var n int64
	if len(found) > 0 {
		done, err := c.Exec(ctx, func(w countersql.Writer) {
			if t.RowID != "" {
				d.AddByRowID(w, t, ids, foundAmounts)
			} else {
				d.AddBySlot(w, t, slot, found, foundAmounts)
			}
		})
		if err != nil {
			return 0, nil, err
		}
		n = done
		if done < int64(len(found)) {
			// Rows the snapshot showed were deleted since: a Set of the
			// counter (or the parent) went. Read the rows as they are now
			// (the UPDATE holds those it wrote) and write the others as
			// missing ones; a gone parent fails its foreign key check and
			// is passed over.
			now, err := readOwnRows(ctx, c, d, t, slots, found, true)
			if err != nil {
				return n, nil, err
			}
			for i, k := range found {
				if _, ok := now.found[engine.KeyText(k)]; !ok {
					missing, rest = append(missing, k), append(rest, foundAmounts[i])
					missingAt = append(missingAt, indexOf(keys, k))
				}
			}
		}
	}
	if len(missing) == 0 {
		return n, nil, nil
	}
	if !guard || own.rollbackOnTimeout {
		// (Where a lock wait timeout rolls back the whole transaction, the
		// guard would cost the caller's transaction: no guard there.)
		done, err := insertSlots(ctx, c, d, t, slot, missing, rest)
		return n + done, nil, err
	}
	if _, err := c.Exec(ctx, d.NoLockWait); err != nil {
		return n, nil, err
	}
	done, err := insertSlots(ctx, c, d, t, slot, missing, rest)
	if _, rerr := c.Exec(ctx, d.RestoreLockWait); rerr != nil {
		return n, nil, errors.Join(err, rerr)
	}
	if err != nil && dberr.LockWait(err) {
		return n, missingAt, nil
	}
	return n + done, nil, err
}

// insertSlots upserts amounts into slot `slot` of keys, one statement; a
// parent deleted since its key was read fails the foreign key check, and
// the keys are then upserted one by one and the gone ones passed over. It
// returns how many parents it wrote.
func insertSlots(ctx context.Context, c engine.Conn, d countersql.MySQL, t countersql.Table, slot int, keys []any, amounts []int64) (int64, error) {
	return skippingGone(c, len(keys), func(from, to int) error {
		_, err := c.Exec(ctx, func(w countersql.Writer) { d.AddToOwnSlot(w, t, slot, keys[from:to], amounts[from:to]) })
		return err
	})
}

// indexOf is the index of key k in keys (by KeyText).
func indexOf(keys []any, k any) int {
	t := engine.KeyText(k)
	for i, x := range keys {
		if engine.KeyText(x) == t {
			return i
		}
	}
	return -1
}
