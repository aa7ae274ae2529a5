// Package hotcounter holds what gormcounter and entcounter share: the
// errors they wrap, the results of their passes, the hot keys they report
// and a write-behind buffer's configuration. Both packages use these types
// as they are (as River's front ends use rivertype), so that a program
// that uses either ORM, or both, tests errors and reads results with one
// set of names:
//
//	if errors.Is(err, hotcounter.ErrInsufficient) { ... }
//	var s *hotcounter.Shortage
//	if errors.As(err, &s) { log.Printf("%d left", s.Left) }
//
// The counters themselves are declared and used through gormcounter (a
// GORM plugin) or entcounter (an ent mixin and extension).
package hotcounter

import "strings"

// Moved is what a move of a column's values onto slot rows did
// (gormcounter.MoveToSlots, entcounter.MoveToSlots).
type Moved struct {
	// Parents is how many parents had a value other than 0 in the column
	// and now have 0 there, their value moved onto a slot row.
	Parents int64
	// Amount is the total moved.
	Amount int64
	// Nulls is how many of those parents held NULL, counted as 0.
	Nulls int64
	// Busy is how many parents another transaction held at that moment
	// (old code writing the column): they were skipped, and a later run
	// moves them.
	Busy int64
}

// Add adds b's figures to m's.
func (m *Moved) Add(b Moved) {
	m.Parents += b.Parents
	m.Amount += b.Amount
	m.Nulls += b.Nulls
	m.Busy += b.Busy
}

// Compacted is what a compaction pass did (gormcounter.CompactPass,
// entcounter.CompactPass).
type Compacted struct {
	// Parents is how many parents had their slot values gathered into one
	// row.
	Parents int64
	// Removed is how many slot rows the pass deleted: a load reads that
	// many rows fewer.
	Removed int64
	// Left names each counter the pass left alone, and why: one whose slot
	// rows are pre-created (its rows stay whatever they hold, so a
	// compaction would remove none) and guarded stock (spread over its rows
	// so that takes do not meet).
	Left []string
	// Postponed, when not empty, says why the pass stopped before the end:
	// another session's transaction, open since before the pass's last
	// transaction committed, kept the rows it removed from being reused
	// for a second. Run the pass again later: it goes on where rows are
	// still spread.
	Postponed string
	// BytesBefore and BytesAfter are the size of the slot tables the pass
	// compacted and their indexes (their data files), before and after it
	// (PostgreSQL; 0 elsewhere). The space of the rows it removes is the
	// table's again once VACUUM (autovacuum) has recorded it; the files
	// keep their size.
	BytesBefore, BytesAfter int64
}

// Add adds b's figures to c's.
func (c *Compacted) Add(b Compacted) {
	c.Parents += b.Parents
	c.Removed += b.Removed
	c.Left = append(c.Left, b.Left...)
	c.Postponed += b.Postponed
	c.BytesBefore += b.BytesBefore
	c.BytesAfter += b.BytesAfter
}

// Script is a schema as a migration file holds it (gormcounter.SchemaSQL,
// entcounter.SchemaSQL and their BufferSchemaSQL): the statements that
// make it (Up) and those that take it away (Down), each in the order to
// run them. Every Up statement can run again on a database that has the
// schema already, changing nothing: tables are created IF NOT EXISTS,
// triggers are dropped and created afresh, slot rows are inserted where
// missing, and the count of existing children adds only a difference.
type Script struct {
	Up, Down []string
	// Tables holds the statements of Up that make tables and their
	// indexes (slot and delta tables), in Up's order: what a tool that
	// keeps tables and nothing else (Atlas's free edition, through
	// atlas-provider-gorm) takes from the models. The rest of Up (storage
	// options, slot rows, triggers, functions, counts of existing rows)
	// must come from a file of Up beside that tool's.
	Tables []string
}

// UpSQL returns the Up statements as one file's text, each ending with a
// semicolon on its own line: what golang-migrate's up file, psql, sqlite3
// or a driver that runs several statements at once (MySQL's
// multiStatements=true) takes as it is.
func (s Script) UpSQL() string { return joinStatements(s.Up) }

// DownSQL returns the Down statements as UpSQL does.
func (s Script) DownSQL() string { return joinStatements(s.Down) }

// Goose returns the script as a goose migration file: an Up and a Down
// section, each statement between StatementBegin and StatementEnd, since
// function and trigger bodies hold semicolons of their own.
func (s Script) Goose() string {
	var b strings.Builder
	section := func(name string, stmts []string) {
		b.WriteString("-- +goose " + name + "\n")
		for _, st := range stmts {
			b.WriteString("-- +goose StatementBegin\n" + st + ";\n-- +goose StatementEnd\n")
		}
	}
	section("Up", s.Up)
	section("Down", s.Down)
	return b.String()
}

func joinStatements(stmts []string) string {
	var b strings.Builder
	for _, st := range stmts {
		b.WriteString(st + ";\n")
	}
	return b.String()
}
