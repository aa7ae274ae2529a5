package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hotcounter/hotcounter/internal/countersql"
	"github.com/hotcounter/hotcounter/internal/spec"
)

// Storage is where one counter's values live in the database right now,
// besides its own slot (or delta) table: a column of the counter's name on
// the parent table, and the table of the other kind that a change of mode
// left behind.
type Storage struct {
	// Column: the parent table has a column of the counter's name. A rollup
	// or append counter keeps its folded total there; for a sum counter it
	// is a column the counter was adopted over, part of the value until
	// MoveColumns empties it and the user drops it.
	Column bool
	// Type, Nullable and Default describe the column as the database does.
	Type     string
	Nullable bool
	Default  string
	// Tables says which of the counter's tables exist, by name: its own
	// (created by migration) and the other kind's (a slot counter's delta
	// table, an append counter's slot table), which a change of mode left.
	Tables map[string]bool
}

// Other reports whether t's table of the other kind exists.
func (s Storage) Other(t countersql.Table) bool { return t.Other != "" && s.Tables[t.Other] }

// Integer reports whether the column, if any, holds integers.
func (s Storage) Integer() bool { return !s.Column || countersql.IntegerType(s.Type) }

// Probe reads where t's values live.
func Probe(ctx context.Context, c Conn, d Dialect, t countersql.Table) (Storage, error) {
	rows, err := c.Query(ctx, func(w countersql.Writer) { d.ProbeStorage(w, t) })
	if err != nil {
		return Storage{}, err
	}
	defer rows.Close()
	var (
		s                            Storage
		column, nullable, own, other any
	)
	for rows.Next() {
		if err := rows.Scan(&column, &s.Type, &nullable, &s.Default, &own, &other); err != nil {
			return Storage{}, err
		}
	}
	if err := rows.Err(); err != nil {
		return Storage{}, err
	}
	s.Column, s.Nullable = truth(column), truth(nullable)
	s.Tables = map[string]bool{t.Slots: truth(own)}
	if t.Other != "" {
		s.Tables[t.Other] = truth(other)
	}
	return s, nil
}

// truth reads a boolean as the drivers return it: bool, an integer, or
// the text of one (MySQL's text protocol).
func truth(v any) bool {
	switch x := v.(type) {
	case bool:
		return x
	case int64:
		return x != 0
	case []byte:
		return len(x) > 0 && string(x) != "0"
	case string:
		return x != "" && x != "0"
	}
	return false
}

// AbsentRecheck is how long a probe that found no column (or no table of
// the other kind) is trusted: a process then looks again, so it notices a
// column that a newer version's migration added (a switch from sum to
// rollup) without a restart. What a probe found is trusted until a
// statement that relied on it fails ([Storages.Forget]).
const AbsentRecheck = time.Minute

// Storages remembers the probed storage of counters for one process (one
// registered plugin, one ent client), so that a load costs no catalog
// query. Counters of one column share what is known of it, whatever their
// mode (two models of one table). The zero value is ready to use.
type Storages struct {
	mu sync.Mutex
	m  map[string]storageEntry
}

type storageEntry struct {
	s  Storage
	at time.Time
}

// knows reports whether the entry was probed for t's tables (another mode
// of the same column names the same two tables).
func (e storageEntry) knows(t countersql.Table) bool {
	_, own := e.s.Tables[t.Slots]
	_, other := e.s.Tables[t.Other]
	return own && (t.Other == "" || other)
}

func storageKey(t countersql.Table) string { return t.Parent + "\x00" + t.Column }

// complete reports whether s knows of everything t can read, so that there
// is nothing that could appear.
func (s Storage) complete(t countersql.Table) bool {
	known, ok := s.Tables[t.Slots]
	if !ok || !s.Column || !known {
		return false
	}
	if t.Other == "" {
		return true
	}
	return s.Tables[t.Other]
}

// Get returns t's storage, probing the database the first time (and again
// after AbsentRecheck where something was absent).
func (c *Storages) Get(ctx context.Context, conn Conn, d Dialect, t countersql.Table) (Storage, error) {
	k := storageKey(t)
	c.mu.Lock()
	e, ok := c.m[k]
	c.mu.Unlock()
	if ok && e.knows(t) && (e.s.complete(t) || time.Since(e.at) < AbsentRecheck) {
		return e.s, nil
	}
	s, err := Probe(ctx, conn, d, t)
	if err != nil {
		return Storage{}, err
	}
	c.Set(t, s)
	return s, nil
}

// Known returns what was last found of t's storage, however long ago.
func (c *Storages) Known(t countersql.Table) (Storage, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[storageKey(t)]
	return e.s, ok && e.knows(t)
}

// Set records t's storage, as a migration that just made it knows it.
func (c *Storages) Set(t countersql.Table, s Storage) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]storageEntry{}
	}
	c.m[storageKey(t)] = storageEntry{s: s, at: time.Now()}
}

// Forget drops what is known of t's storage: the next Get probes again.
func (c *Storages) Forget(t countersql.Table) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, storageKey(t))
}

// Sources returns what an exact read of t adds up, given its storage: the
// counter's own table, the other kind's table if it exists, and the parent
// column where it holds part of the value: always for a rollup or append
// counter (its folded total), and for a sum counter when the column exists
// (a column the counter was adopted over). A count of child rows never
// reads a column it was declared over: it is recounted from the children
// instead. An adopted column that does not hold integers is an error
// naming it.
func Sources(t countersql.Table, s Storage, mode spec.Mode, count bool) (countersql.Sources, error) {
	out := countersql.Sources{Tables: []string{t.Slots}}
	if s.Other(t) {
		out.Tables = append(out.Tables, t.Other)
	}
	switch {
	case mode.HasColumn():
		out.Column = true
	case count || !s.Column:
	case !s.Integer():
		return out, fmt.Errorf("%w: %s.%s is %s; a counter adds it to its slots: convert it to an integer column, or rename it",
			ErrColumnType, t.Parent, t.Column, s.Type)
	default:
		out.Column = true
	}
	return out, nil
}

// ErrColumnType is wrapped by the error for a column of a counter's name
// that does not hold integers.
var ErrColumnType = errors.New("the column of a counter's name does not hold integers")

// ReadySlotTable sets the storage of a slot table the library has just
// created (countersql.Dialect.SlotStorage): on PostgreSQL room on every
// page for rows rewritten in place. Both ORMs call it after they create a
// slot table; a table that existed before is left as it is.
func ReadySlotTable(ctx context.Context, c Conn, d Dialect, t countersql.Table) error {
	build := d.SlotStorage(t)
	if build == nil {
		return nil
	}
	_, err := c.Exec(ctx, build)
	return err
}
