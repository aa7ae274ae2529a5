package countersql

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// Marking the triggers of a count with what made them, so that a migration
// that would create them exactly as they are sends nothing: every trigger
// (and PostgreSQL function) body starts with a comment holding a digest of
// all the statements that create the count's triggers. A change of the
// count's declaration, of the library's SQL or of the tables it reads
// changes the digest; a migration then finds a trigger without it and
// installs them afresh.

// markPrefix starts the comment a trigger body holds.
const markPrefix = "hotcounter:"

// MarkTriggers returns steps, the statements that create a count's
// triggers, with the digest of their text written at the start of each
// body, the digest, and how many triggers they create. A statement that
// takes an argument is an error: none of them does.
func (d Dialect) MarkTriggers(steps []func(Writer)) (marked []func(Writer), mark string, triggers int, err error) {
	h := sha256.New()
	for _, step := range steps {
		text, err := d.Render(step)
		if err != nil {
			return nil, "", 0, err
		}
		if strings.HasPrefix(text, "CREATE TRIGGER") {
			triggers++
		}
		h.Write([]byte(text))
		h.Write([]byte{0})
	}
	mark = markPrefix + hex.EncodeToString(h.Sum(nil))[:16]
	marked = make([]func(Writer), len(steps))
	for i, step := range steps {
		marked[i] = func(w Writer) { step(&markingWriter{Writer: w, mark: mark}) }
	}
	return marked, mark, triggers, nil
}

// markingWriter writes the mark as a comment after the first BEGIN of a
// trigger or function body.
type markingWriter struct {
	Writer
	mark string
	done bool
}

func (w *markingWriter) WriteString(s string) {
	if !w.done {
		if i := strings.Index(s, " BEGIN "); i >= 0 {
			w.done = true
			s = s[:i] + " BEGIN /* " + w.mark + " */ " + s[i+len(" BEGIN "):]
		}
	}
	w.Writer.WriteString(s)
}

// CountTriggersMarked writes the query of the names of c's triggers (on
// the child, the middle table of a count over two levels, the other side
// of a join) whose body holds mark: all of them when the count's triggers
// are as a migration would make them.
func (d Dialect) CountTriggersMarked(w Writer, c Count, mark string) {
	ops := []string{"ins", "upd", "del", "mupd", "mdel", "cas"}
	tables := []string{c.Child}
	if c.Via != nil {
		tables = append(tables, c.Via.Table)
	}
	if c.Across != nil {
		tables = append(tables, c.Across.Table)
	}
	names := func() {
		w.WriteString(" IN (")
		for i, op := range ops {
			if i > 0 {
				w.WriteString(", ")
			}
			literal(w, c.triggerName(op))
		}
		w.WriteString(")")
	}
	switch d.kind {
	case postgres:
		w.WriteString("SELECT t.tgname FROM pg_trigger AS t JOIN pg_proc AS p ON p.oid = t.tgfoid WHERE t.tgrelid IN (")
		for i, table := range tables {
			if i > 0 {
				w.WriteString(", ")
			}
			w.WriteString("to_regclass(")
			literal(w, pgRegclass(table))
			w.WriteString(")")
		}
		w.WriteString(") AND t.tgname")
		names()
		w.WriteString(" AND strpos(p.prosrc, ")
		literal(w, mark)
		w.WriteString(") > 0")
	case mysql:
		schema, _ := splitQualified(c.Child)
		w.WriteString("SELECT TRIGGER_NAME FROM information_schema.TRIGGERS WHERE EVENT_OBJECT_SCHEMA = ")
		mysqlSchema(w, schema, literal)
		w.WriteString(" AND TRIGGER_NAME")
		names()
		w.WriteString(" AND INSTR(ACTION_STATEMENT, ")
		literal(w, mark)
		w.WriteString(") > 0")
	default:
		w.WriteString("SELECT name FROM sqlite_master WHERE type = 'trigger' AND name")
		names()
		w.WriteString(" AND instr(sql, ")
		literal(w, mark)
		w.WriteString(") > 0")
	}
}

// OrReplace returns steps, statements that drop triggers and create them,
// as MariaDB can run them while writes go on: each CREATE TRIGGER becomes
// CREATE OR REPLACE TRIGGER, which swaps the trigger at once, and the DROP
// of a trigger that a later step creates goes. Dropped and created one
// statement at a time (each commits on its own), a trigger is missing in
// between, and the writes of that moment go uncounted. MySQL has no CREATE
// OR REPLACE TRIGGER.
func (d MySQL) OrReplace(steps []func(Writer)) ([]func(Writer), error) {
	texts := make([]string, len(steps))
	created := map[string]bool{}
	for i, step := range steps {
		text, err := d.Render(step)
		if err != nil {
			return nil, err
		}
		texts[i] = text
		if rest, ok := strings.CutPrefix(text, "CREATE TRIGGER "); ok {
			created[strings.Fields(rest)[0]] = true
		}
	}
	var out []func(Writer)
	for _, text := range texts {
		if name, ok := strings.CutPrefix(text, "DROP TRIGGER IF EXISTS "); ok && created[name] {
			continue
		}
		if rest, ok := strings.CutPrefix(text, "CREATE TRIGGER "); ok {
			text = "CREATE OR REPLACE TRIGGER " + rest
		}
		out = append(out, func(w Writer) { w.WriteString(text) })
	}
	return out, nil
}
