package hotcounter

import "time"

// BufferConfig tunes a write-behind buffer (gormcounter.NewBuffer,
// entcounter.NewBuffer). The zero value is usable: the buffer flushes
// every second (sooner past 10,000 pending parents), holds at most 100,000
// entries in memory and then blocks, and records its batches in
// hotcounter_ledger. What goes wrong in its goroutine (a failed flush,
// which is retried; with a Store, increments of counters no model of the
// process declares, and a backlog past MaxBacklog under BufferKeep) goes to
// the OnError of the plugin's or client's Config, as every background
// error of the library does.
type BufferConfig struct {
	// Interval between flushes; default 1s.
	Interval time.Duration
	// FlushAt starts a flush early when this many (counter, parent) entries
	// are pending; default 10,000.
	FlushAt int
	// MaxPending bounds the entries held (pending plus the batch being
	// written); default 100,000.
	MaxPending int
	// OnFull: BufferBlock (default) or BufferFail, when MaxPending entries
	// are held in memory, or with a Store, when the store's backlog
	// reaches MaxBacklog. BufferKeep (with a Store only) accepts
	// increments past MaxBacklog and reports the backlog, at most once an
	// interval.
	OnFull OnFull
	// Ledger is the table that records applied batches; default
	// hotcounter_ledger.
	Ledger string
	// LedgerKeep is how long batch ids are kept; default 1h.
	LedgerKeep time.Duration
	// Store, when set, keeps the increments instead of this process's
	// memory: Redis, shared by every app instance (redisstore.New, for
	// either ORM). FlushAt and MaxPending do not apply; MaxBacklog does.
	Store BufferStore
	// MaxBacklog, with a Store, bounds the increments the store holds
	// acknowledged and not yet written, of the counters this process
	// declares (every process's increments, as this buffer's last flush
	// read them, plus its own since): at the bound, OnFull says what an
	// increment does. It is what a Redis crash can lose while the
	// database is away and flushes fail. Zero: no bound.
	MaxBacklog int64
}

// OnFull says what a buffer's Increment does when the buffer is full
// (BufferConfig.OnFull).
type OnFull int

const (
	// BufferBlock waits for a flush to make room, or for the context to
	// end (the default).
	BufferBlock OnFull = iota
	// BufferFail returns ErrBufferFull.
	BufferFail
	// BufferKeep, with a Store past MaxBacklog: go on accepting, and
	// report the backlog to the Config's OnError (at most once an
	// interval).
	BufferKeep
)

// BufferStore keeps a buffer's increments outside the process, shared by
// every instance of the application, until a flush writes them:
// redisstore.New returns one. The buffer calls the store through methods
// of this module's own (those of redisstore.Store); a BufferConfig takes
// only such a store.
type BufferStore interface {
	// StoreName names the store in errors: "redis".
	StoreName() string
}
