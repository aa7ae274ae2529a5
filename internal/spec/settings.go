package spec

import "time"

// Settings are the run-time settings both ORMs take, from
// gormcounter.Config and entcounter.Config; [Settings.Resolved] fills in
// the defaults, here only.
type Settings struct {
	// BatchSize is how many parents one transaction of a pass (rollup,
	// compaction, move, recount) takes. Zero or less: DefaultBatchSize.
	BatchSize int
	// InFlight is how many increment statements may run at once for one
	// counter of the same rows before increments combine. Zero:
	// DefaultInFlight; negative turns combining off.
	InFlight int
	// AutoCooldown is how long a slots=auto parent's increments must not
	// overlap before its width halves. Zero: the default of
	// engine.NewWidths (5 seconds).
	AutoCooldown time.Duration
	// OnError hears the errors of the work the library does in the
	// background, which no call returns (a rollup loop's failed pass, a
	// write-behind buffer's failed flush, ...). Nil: the front end's
	// logger.
	OnError func(error)
}

// DefaultInFlight is Settings.InFlight unless configured.
const DefaultInFlight = 2

// Resolved returns s with every zero setting at its default.
func (s Settings) Resolved() Settings {
	if s.BatchSize <= 0 {
		s.BatchSize = DefaultBatchSize
	}
	if s.InFlight == 0 {
		s.InFlight = DefaultInFlight
	}
	return s
}
