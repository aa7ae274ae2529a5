package hotcounter

import "time"

// HotKeysConfig tunes the counting of increments per row, which tells
// which rows of which counter, or of which plain column not declared a
// counter yet, take the most increments (gormcounter.Config.HotKeys,
// entcounter.Config.HotKeys).
type HotKeysConfig struct {
	// Keys is how many rows are counted per counter or column and window:
	// exactly while no more rows than that are incremented in a window,
	// within a known bound (HotKey.Error) after that. Zero means 64.
	Keys int
	// Window is the length of the time windows; a report covers the last
	// complete window and the current one. Zero means one minute.
	Window time.Duration
	// Off turns the counting off.
	Off bool
}

// HotKey is how often one row of one counter or plain column was
// incremented lately (gormcounter.HotKeys, entcounter.HotKeys).
type HotKey struct {
	// Table and Column name the counter, or the plain column (Counter
	// false) incremented with gorm.Expr("col + ?", n) or ent's AddX.
	Table, Column string
	Counter       bool
	// Key is the row's primary key as text (columns joined by ", ").
	Key string
	// Count is how many increments (of any size) the row took over Span, an
	// upper bound: the true number is at least Count-Error. Rate is Count
	// per second.
	Count, Error int64
	Rate         float64
	Span         time.Duration
}
