// Package spec holds what a counter declaration means, independent of the ORM
// that declared it: the storage mode, the number of slots, and the parsing and
// validation of the options a user writes.
//
// gormcounter reads options from a struct tag (`gorm:"counter:slots=64,rollup"`);
// entcounter from functional options. Both end in an [Options] value checked by
// [Options.Validate], so both reject the same mistakes with the same words.
package spec

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/hotcounter/hotcounter"
	"github.com/hotcounter/hotcounter/internal/countersql"
)

// Mode says where a counter's value lives.
type Mode int

const (
	// Sum keeps the value only in the slot rows; every load sums them.
	Sum Mode = iota
	// Rollup keeps a cached total in a parent column that a rollup pass folds
	// the slot rows into; plain loads read the column.
	Rollup
	// Append keeps a cached total in a parent column, as Rollup does, but an
	// increment inserts a delta row instead of upserting a slot: no shared
	// row at all. A rollup pass folds the delta rows into the column.
	Append
)

// HasColumn reports whether the mode keeps a total in a parent column.
func (m Mode) HasColumn() bool { return m == Rollup || m == Append }

const (
	// DefaultSlots is the number of slot rows per parent when a declaration
	// names none.
	DefaultSlots = 16
	// MaxSlots bounds the slot count: the slot column is a SMALLINT, and past a
	// few hundred slots the sum on read costs more than contention saves.
	MaxSlots = 1024
)

// Toggle is an option that is on, off, or left to the database's default.
type Toggle int

const (
	// Auto leaves the choice to the database's default.
	Auto Toggle = iota
	// On turns the option on.
	On
	// Off turns the option off.
	Off
)

// Options is a validated counter declaration.
type Options struct {
	// Slots is the number of slot rows per parent, or with Auto the most a
	// parent may widen to.
	Slots int
	// Auto (slots=auto) starts each parent at one slot row and widens it
	// while its increments contend, up to Slots (engine.Widths).
	Auto bool
	Mode Mode
	// Precreate inserts every slot row (n = 0) when a parent is created, and
	// for existing parents when the slot table is created, so that an
	// increment only ever updates an existing row. On PostgreSQL that keeps
	// increments from waiting behind a transaction that holds the parent
	// FOR UPDATE: inserting a slot row runs the foreign key check, which takes
	// FOR KEY SHARE on the parent. Sum counters only: a rollup pass removes the
	// slot rows it folds.
	Precreate Toggle
	// SkipLocked makes an increment take the lowest slot row of its parent
	// that no other transaction holds (FOR UPDATE SKIP LOCKED) instead of a
	// random one, falling back to a random slot when all are held, so that
	// it waits for a slot lock only when more transactions write the parent
	// at once than it has slots. Where the database has no SKIP LOCKED
	// (SQLite, which has one writer at a time anyway), it changes nothing.
	SkipLocked bool
	// Counts makes the counter a count of child rows: the name of the
	// relation that holds them (GORM: a has-many field of the parent).
	// Empty for a counter that only increments change.
	Counts string
	// Total makes a count a running total: each counted child row adds
	// the value of this child column (NULL adds 0) instead of 1, e.g. a
	// folder's bytes, the total of its files' size (counter_culture's
	// delta column).
	Total string
	// Where limits a count to the child rows that match it: a boolean SQL
	// expression over the child table's columns, as in status = 'active'.
	Where string
	// Hooks keeps a count with the ORM's callbacks instead of database
	// triggers (which also see raw SQL, imports and bulk statements).
	Hooks bool
	// Guarded makes the counter stock that never goes below zero: it is
	// decreased only by a take that succeeds in full or fails (taking
	// nothing) when less is left, never by a negative increment. Its slot
	// rows each hold a part of the stock, never below zero (the escrow
	// method). Sum counters only.
	Guarded bool
	// KeepColumn declares a sum counter over an existing column that still
	// holds counts: the column stays in the ORM's schema, so that no
	// migration drops it (ent; GORM never drops columns).
	KeepColumn bool
	// Given lists the options a declaration gave, by name, in order,
	// comma-separated: entcounter's functional options record themselves
	// here, so that one given twice, or two that contradict each other, is
	// an error instead of the last one silently winning. (ParseList checks
	// its own words.)
	Given string
}

// Give records that the option name was given (see Given).
func (o *Options) Give(name string) {
	if o.Given != "" {
		o.Given += ","
	}
	o.Given += name
}

// contradictions are the options that cannot be given together.
var contradictions = [][2]string{
	{"Slots", "AutoSlots"}, {"Precreate", "NoPrecreate"}, {"Rollup", "Append"},
}

// checkGiven refuses an option given twice and options that contradict
// each other.
func (o Options) checkGiven() error {
	if o.Given == "" {
		return nil
	}
	seen := map[string]bool{}
	for _, name := range strings.Split(o.Given, ",") {
		if seen[name] {
			return fmt.Errorf("%w: %s given twice: give it once", hotcounter.ErrInvalidCounter, name)
		}
		seen[name] = true
	}
	for _, c := range contradictions {
		if seen[c[0]] && seen[c[1]] {
			return fmt.Errorf("%w: %s and %s both given: they contradict each other, give one", hotcounter.ErrInvalidCounter, c[0], c[1])
		}
	}
	return nil
}

// Words are the option names a counter declaration's list (ParseList)
// knows, lower case.
var Words = []string{"slots", "max", "sum", "rollup", "append", "precreate", "skiplocked", "guarded", "counts", "total", "where", "hooks"}

// Written is how many slots a writer that sends one statement per interval
// (a write-behind flush) spreads over: 1 for slots=auto, whose parents
// start at one row.
func (o Options) Written() int {
	if o.Auto {
		return 1
	}
	return o.Slots
}

// PrecreateOn resolves Precreate for a database whose default is def.
func (o Options) PrecreateOn(def bool) bool {
	switch {
	case o.Mode != Sum || o.Auto:
		return false
	case o.Precreate == Auto:
		return def
	}
	return o.Precreate == On
}

// Names are the words a declaration's options go by in one ORM, which its
// errors use: GORM's tag (TagNames) or entcounter's options (EntNames).
// Formats take one value.
type Names struct {
	Slots, AutoSlots, Where, Total                string // formats
	Auto, AnySlots, Counts, AddCounts, CountOpts  string
	Precreate, SkipLocked, Hooks, Guarded, Append string
}

var (
	// TagNames are gormcounter's tag words.
	TagNames = Names{Slots: "slots=%d", AutoSlots: "slots=auto,max=%d", Where: "where=%s", Total: "total=%s",
		Auto: "slots=auto", AnySlots: "slots=N", Counts: "counts=", AddCounts: "counts=<relation>", CountOpts: "where=, total= and hooks",
		Precreate: "precreate", SkipLocked: "skiplocked", Hooks: "hooks", Guarded: "guarded", Append: "append"}
	// EntNames are entcounter's option names.
	EntNames = Names{Slots: "Slots(%d)", AutoSlots: "AutoSlots(%d)", Where: "Where(%q)", Total: "Total(%q)",
		Auto: "AutoSlots", AnySlots: "Slots(n)", Counts: "Counts", AddCounts: "Counts(<edge>)", CountOpts: "Where, Total and ByHooks",
		Precreate: "Precreate()", SkipLocked: "SkipLocked()", Hooks: "ByHooks()", Guarded: "Guarded()", Append: "Append()"}
)

// Validate reports a declaration that cannot work, in GORM's tag words.
func (o Options) Validate() error { return o.ValidateAs(TagNames) }

// ValidateAs reports a declaration that cannot work, naming its options
// with n.
func (o Options) ValidateAs(n Names) error {
	if err := o.checkGiven(); err != nil {
		return err
	}
	if o.Auto && (o.Slots < 1 || o.Slots > MaxSlots) {
		return fmt.Errorf("%w: "+n.AutoSlots+" is out of range: use 1 to %d", hotcounter.ErrInvalidCounter, o.Slots, MaxSlots)
	}
	if o.Slots < 1 || o.Slots > MaxSlots {
		return fmt.Errorf("%w: "+n.Slots+" is out of range: use 1 to %d", hotcounter.ErrInvalidCounter, o.Slots, MaxSlots)
	}
	if o.Mode != Sum && o.Mode != Rollup && o.Mode != Append {
		return fmt.Errorf("%w: unknown mode %d", hotcounter.ErrInvalidCounter, o.Mode)
	}
	if o.Auto {
		if err := o.validateAuto(n); err != nil {
			return err
		}
	}
	if o.Mode != Sum && o.Precreate == On {
		return fmt.Errorf("%w: %s applies to sum counters; a rollup pass removes the rows it folds", hotcounter.ErrInvalidCounter, n.Precreate)
	}
	if o.Mode == Append && o.SkipLocked {
		return fmt.Errorf("%w: %s applies to slots; an append counter shares no row", hotcounter.ErrInvalidCounter, n.SkipLocked)
	}
	if o.Counts == "" && (o.Where != "" || o.Hooks || o.Total != "") {
		return fmt.Errorf("%w: %s apply to a count of child rows: add %s", hotcounter.ErrInvalidCounter, n.CountOpts, n.AddCounts)
	}
	if o.Total != "" && o.Hooks {
		return fmt.Errorf("%w: "+n.Total+" is kept by triggers: remove %s", hotcounter.ErrInvalidCounter, o.Total, n.Hooks)
	}
	if o.Counts != "" && o.Mode == Append {
		return fmt.Errorf("%w: %s keeps its count in slots: use sum or rollup, not %s", hotcounter.ErrInvalidCounter, n.Counts, n.Append)
	}
	if o.Counts != "" && o.SkipLocked {
		return fmt.Errorf("%w: %s picks the slot of the writer's session, not a free one: remove %s", hotcounter.ErrInvalidCounter, n.Counts, n.SkipLocked)
	}
	if o.Guarded && (o.Mode != Sum || o.Counts != "") {
		return fmt.Errorf("%w: %s applies to sum counters: its slot rows hold the stock (no rollup column, no count of children)", hotcounter.ErrInvalidCounter, n.Guarded)
	}
	if o.KeepColumn && (o.Mode != Sum || o.Counts != "") {
		return fmt.Errorf("%w: keeping the column applies to sum counters; a rollup or append counter has its column anyway, and a count is recounted from its children", hotcounter.ErrInvalidCounter)
	}
	if o.Where != "" {
		if err := countersql.CheckCondition(o.Where); err != nil {
			return fmt.Errorf("%w: "+n.Where+": %v", hotcounter.ErrInvalidCounter, o.Where, err)
		}
	}
	return nil
}

// validateAuto rejects what slots=auto cannot be combined with.
func (o Options) validateAuto(n Names) error {
	var why string
	switch {
	case o.Mode == Append:
		why = "an append counter has no slot rows"
	case o.Precreate == On:
		why = n.Precreate + " makes every slot row up front; " + n.Auto + " makes them as a parent's writers contend"
	case o.SkipLocked:
		why = n.SkipLocked + " already adds a row when every row is held: use one or the other"
	case o.Guarded:
		why = "a guarded counter spreads its stock over a fixed number of rows: give " + n.AnySlots
	case o.Counts != "":
		why = "a count writes the slot of the writer's session: give " + n.AnySlots
	default:
		return nil
	}
	return fmt.Errorf("%w: %s: %s", hotcounter.ErrInvalidCounter, n.Auto, why)
}

// ParseList parses a comma-separated option list such as "slots=64,rollup",
// starting from def. The empty string is a bare declaration.
//
// Words: slots=N (1..MaxSlots), slots=auto, max=N (with slots=auto: the
// widest a parent grows, default def.Slots), sum, rollup, append, precreate,
// precreate=true|false, skiplocked, guarded, counts=<relation>, total=<column>, hooks, and
// where=<SQL>, which must come last: its condition runs to the end of the
// list, commas included.
// Anything else is an error.
func ParseList(list string, def Options) (Options, error) {
	o := def
	modeSet, maxSet := false, false
	seen := map[string]bool{}
	for rest := list; rest != ""; {
		raw, after, _ := strings.Cut(rest, ",")
		rest = after
		if k, _, _ := strings.Cut(raw, "="); strings.TrimSpace(k) != "" {
			k = strings.ToLower(strings.TrimSpace(k))
			if seen[k] {
				return o, fmt.Errorf("%w: %s given twice: give it once", hotcounter.ErrInvalidCounter, k)
			}
			seen[k] = true
		}
		if k, v, ok := strings.Cut(raw, "="); ok && strings.EqualFold(strings.TrimSpace(k), "where") {
			if after != "" {
				v += "," + after
			}
			o.Where, rest = strings.TrimSpace(v), ""
			if o.Where == "" {
				return o, fmt.Errorf("%w: where= needs a condition, as in where=status = 'active'", hotcounter.ErrInvalidCounter)
			}
			continue
		}
		word := strings.TrimSpace(raw)
		if word == "" {
			continue
		}
		key, value, hasValue := strings.Cut(word, "=")
		key = strings.ToLower(strings.TrimSpace(key))
		value = strings.TrimSpace(value)
		switch key {
		case "slots", "max":
			if !hasValue || value == "" {
				return o, fmt.Errorf("%w: %s needs a number, as in %s=16", hotcounter.ErrInvalidCounter, key, key)
			}
			if key == "slots" && strings.EqualFold(value, "auto") {
				o.Auto = true
				if !maxSet {
					o.Slots = def.Slots
				}
				continue
			}
			n, err := strconv.Atoi(value)
			if err != nil {
				return o, fmt.Errorf("%w: %s=%s is not a number", hotcounter.ErrInvalidCounter, key, value)
			}
			o.Slots = n
			if key == "max" {
				maxSet = true
			} else {
				o.Auto = false
			}
		case "sum", "rollup", "append":
			if hasValue {
				return o, fmt.Errorf("%w: %q takes no value", hotcounter.ErrInvalidCounter, key)
			}
			m := map[string]Mode{"sum": Sum, "rollup": Rollup, "append": Append}[key]
			if modeSet && o.Mode != m {
				return o, fmt.Errorf("%w: more than one of sum, rollup and append given", hotcounter.ErrInvalidCounter)
			}
			o.Mode, modeSet = m, true
		case "precreate":
			switch strings.ToLower(value) {
			case "", "true":
				if hasValue && value == "" {
					return o, fmt.Errorf("%w: precreate= needs true or false", hotcounter.ErrInvalidCounter)
				}
				o.Precreate = On
			case "false":
				o.Precreate = Off
			default:
				return o, fmt.Errorf("%w: precreate=%s: use precreate, precreate=true or precreate=false", hotcounter.ErrInvalidCounter, value)
			}
		case "skiplocked", "hooks", "guarded":
			if hasValue {
				return o, fmt.Errorf("%w: %q takes no value", hotcounter.ErrInvalidCounter, key)
			}
			switch key {
			case "hooks":
				o.Hooks = true
			case "guarded":
				o.Guarded = true
			default:
				o.SkipLocked = true
			}
		case "counts":
			if value == "" {
				return o, fmt.Errorf("%w: counts needs the relation it counts, as in counts=Objects", hotcounter.ErrInvalidCounter)
			}
			o.Counts = value
		case "total":
			if value == "" {
				return o, fmt.Errorf("%w: total needs the child column it adds up, as in total=size", hotcounter.ErrInvalidCounter)
			}
			o.Total = value
		default:
			return o, fmt.Errorf("%w: unknown option %q (known: slots=N, slots=auto, max=N, sum, rollup, append, precreate, skiplocked, guarded, counts=, total=, where=, hooks)", hotcounter.ErrInvalidCounter, word)
		}
	}
	if maxSet && !o.Auto {
		return o, fmt.Errorf("%w: max= bounds slots=auto: give slots=auto,max=%d, or slots=%d for a fixed width", hotcounter.ErrInvalidCounter, o.Slots, o.Slots)
	}
	return o, o.Validate()
}
