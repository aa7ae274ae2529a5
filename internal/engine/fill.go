package engine

import (
	"context"

	"github.com/hotcounter/hotcounter/internal/countersql"
)

// Limits of one fill query: keys per IN list, and bound arguments in all
// (PostgreSQL and MySQL take 65,535, SQLite 32,766).
const (
	FillChunk = 1000
	FillArgs  = 20000
)

// FillGroup asks for one counter's values for some parents.
type FillGroup struct {
	Table countersql.Table
	// Read is what adds up to the value (see [Sources]).
	Read countersql.Sources
	// Keys are distinct parent keys.
	Keys []any
}

// Fill queries the values of every group's keys, as few queries as the
// argument limits allow (one for any ordinary load), and calls set for
// every (group index, key text, value) returned. A group that reads no
// column returns no row for a parent without slot rows: its value is zero,
// which the caller sets beforehand.
func Fill(ctx context.Context, conn Conn, d Dialect, groups []FillGroup, set func(group int, key string, value int64) error) error {
	var (
		parts []countersql.FillPart
		refs  []int // refs[i] is the group of parts[i]
		nargs int
	)
	flush := func() error {
		if len(parts) == 0 {
			return nil
		}
		defer func() { parts, refs, nargs = nil, nil, 0 }()
		rows, err := conn.Query(ctx, func(w countersql.Writer) { d.Fill(w, parts) })
		if err != nil {
			return err
		}
		defer rows.Close()
		var (
			idx, val int64
			key      string
		)
		for rows.Next() {
			if err := rows.Scan(&idx, &key, &val); err != nil {
				return err
			}
			if err := set(refs[idx], key, val); err != nil {
				return err
			}
		}
		return rows.Err()
	}
	for gi, g := range groups {
		for start := 0; start < len(g.Keys); start += FillChunk {
			keys := g.Keys[start:min(start+FillChunk, len(g.Keys))]
			n := g.Read.Args(len(keys))
			if nargs+n > FillArgs {
				if err := flush(); err != nil {
					return err
				}
			}
			parts = append(parts, countersql.FillPart{Table: g.Table, Read: g.Read, Keys: keys})
			refs = append(refs, gi)
			nargs += n
		}
	}
	return flush()
}
