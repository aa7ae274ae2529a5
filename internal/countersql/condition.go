package countersql

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"unicode"
	"unicode/utf8"
)

// A count's where= condition is SQL over the child's bare column names.
// Statements that read the child table (recounts, the hooks' reads,
// PostgreSQL's transition tables) use it as written. A row trigger of
// MySQL, MariaDB or SQLite has no table to read, only the row's OLD and
// NEW values, so the condition is rewritten there with each column it
// names qualified: status = 'open' becomes NEW.status = 'open'.
//
// The triggers used to evaluate it over a one-row derived table copied
// from the row instead, (SELECT NEW.a AS a, ...) AS hc_c. MariaDB 10.11
// crashes (signal 11) on that shape in an AFTER UPDATE trigger over OLD
// when the child has a TEXT, JSON or BLOB column, cutting every session on
// the server; the qualified condition reads only the columns it names.

// token is one lexical unit of a condition: text as written, and, for an
// identifier (bare or quoted), its name.
type token struct {
	text  string
	ident string // the name, for an identifier; "" otherwise
	bare  bool   // an unquoted word (a keyword, a function or a column)
}

// lexCondition splits cond into tokens. Strings, quoted identifiers and
// comments are single tokens, so that nothing inside them is rewritten.
// Double quotes delimit a string on MySQL and MariaDB (without ANSI_QUOTES)
// and an identifier elsewhere; a backslash escapes the next character of a
// MySQL string.
func (d Dialect) lexCondition(cond string) []token {
	var out []token
	for i := 0; i < len(cond); {
		c := cond[i]
		switch {
		case c == '\'' || (c == '"' && d.kind == mysql):
			j := d.endOfQuoted(cond, i, c)
			out = append(out, token{text: cond[i:j]})
			i = j
		case c == '"' || c == '`':
			j := d.endOfQuoted(cond, i, c)
			name := strings.ReplaceAll(cond[i+1:max(i+1, j-1)], string(c)+string(c), string(c))
			out = append(out, token{text: cond[i:j], ident: name})
			i = j
		case c == '[' && d.kind == sqlite:
			j := strings.IndexByte(cond[i:], ']')
			if j < 0 {
				j = len(cond) - i - 1
			}
			out = append(out, token{text: cond[i : i+j+1], ident: cond[i+1 : i+j]})
			i += j + 1
		case c == '-' && strings.HasPrefix(cond[i:], "--"), c == '#' && d.kind == mysql:
			j := strings.IndexByte(cond[i:], '\n')
			if j < 0 {
				j = len(cond) - i
			}
			out = append(out, token{text: cond[i : i+j]})
			i += j
		case c == '/' && strings.HasPrefix(cond[i:], "/*"):
			j := strings.Index(cond[i+2:], "*/")
			end := len(cond)
			if j >= 0 {
				end = i + 2 + j + 2
			}
			out = append(out, token{text: cond[i:end]})
			i = end
		case c >= '0' && c <= '9':
			// A number, with any exponent or hex digits: 1e5 holds no column e5.
			j := i
			for j < len(cond) && (isWordByte(cond, j) || cond[j] == '.') {
				j++
			}
			out = append(out, token{text: cond[i:j]})
			i = j
		case isWordByte(cond, i):
			j := i
			for j < len(cond) && isWordByte(cond, j) {
				_, size := utf8.DecodeRuneInString(cond[j:])
				j += size
			}
			out = append(out, token{text: cond[i:j], ident: cond[i:j], bare: true})
			i = j
		default:
			_, size := utf8.DecodeRuneInString(cond[i:])
			out = append(out, token{text: cond[i : i+size]})
			i += size
		}
	}
	return out
}

// endOfQuoted returns the index just past the quoted text that starts at
// cond[i] with quote q (a doubled quote stands for itself), or len(cond).
func (d Dialect) endOfQuoted(cond string, i int, q byte) int {
	for j := i + 1; j < len(cond); j++ {
		switch {
		case cond[j] == '\\' && q != '`' && d.kind == mysql:
			j++
		case cond[j] == q && j+1 < len(cond) && cond[j+1] == q:
			j++
		case cond[j] == q:
			return j + 1
		}
	}
	return len(cond)
}

// isWordByte reports whether the character at cond[i] can be part of an
// unquoted identifier.
func isWordByte(cond string, i int) bool {
	c := cond[i]
	if c < utf8.RuneSelf {
		return c == '_' || c == '$' || (c >= '0' && c <= '9') || (c|0x20 >= 'a' && c|0x20 <= 'z')
	}
	r, _ := utf8.DecodeRuneInString(cond[i:])
	return unicode.IsLetter(r) || unicode.IsDigit(r)
}

// conditionColumns pairs each token of cond with the child column it names,
// or "" where it names none. A word is a column if it matches one of
// columns (case-insensitively, as both MySQL and SQLite compare them) and
// is neither qualified (a.b), a qualifier, nor a function's name.
func (d Dialect) conditionColumns(cond string, columns []string) ([]token, []string) {
	toks := d.lexCondition(cond)
	cols := make([]string, len(toks))
	next := func(i, step int) string {
		for j := i + step; j >= 0 && j < len(toks); j += step {
			if strings.TrimSpace(toks[j].text) != "" {
				return toks[j].text
			}
		}
		return ""
	}
	for i, t := range toks {
		if t.ident == "" || next(i, -1) == "." || next(i, 1) == "." || (t.bare && next(i, 1) == "(") {
			continue
		}
		for _, col := range columns {
			if strings.EqualFold(col, t.ident) {
				cols[i] = col
				break
			}
		}
	}
	return toks, cols
}

// rowCondition writes c's where= condition with every child column it
// names read from row (OLD or NEW, in a row trigger).
func (d Dialect) rowCondition(w Writer, c Count, row string) {
	toks, cols := d.conditionColumns(c.Where, c.Columns)
	for i, t := range toks {
		if cols[i] == "" {
			w.WriteString(t.text)
			continue
		}
		w.WriteString(row + ".")
		w.Ident(cols[i])
	}
}

// CheckCondition returns an error if cond cannot be a count's where=
// condition: one SQL expression over the child row's own columns. A
// subquery reads other rows, whose changes fire none of the child's
// triggers or hooks (and would put a derived table back inside a row
// trigger); a comment would swallow the rest of a trigger's body.
func CheckCondition(cond string) error {
	d := Dialect{kind: mysql} // the widest quoting: '...', "..." and `...` are all opaque
	toks := d.lexCondition(cond)
	for i, t := range toks {
		switch {
		case t.ident != "" && i+1 < len(toks) && toks[i+1].text == ".":
			return fmt.Errorf("name the child's columns bare (%s, not %s.%s): a row trigger reads them from the row, which has no table name",
				toks[min(i+2, len(toks)-1)].text, t.text, toks[min(i+2, len(toks)-1)].text)
		case t.bare && strings.EqualFold(t.ident, "select"):
			return errors.New("a condition reads the child row's own columns: a subquery (SELECT) reads other rows, whose changes no trigger of the child sees")
		case strings.HasPrefix(t.text, "--"), strings.HasPrefix(t.text, "#"), strings.HasPrefix(t.text, "/*"):
			return errors.New("a condition holds no comment: inside a trigger it would hide the rest of its body")
		case t.text == ";":
			return errors.New("a condition is one SQL expression, without ';'")
		}
	}
	return nil
}

// conditionWords are the words of a condition that name no column: SQL's
// operators, literals, CASE, type and interval words, and the niladic
// functions written without parentheses.
var conditionWords = map[string]bool{}

func init() {
	for _, w := range strings.Fields(`and or not is null true false unknown in like ilike glob regexp rlike match
		similar to between symmetric case when then else end escape collate as distinct from div mod xor any all some
		exists array binary date time timestamp interval with without zone at local year month day hour minute second
		week quarter microsecond current_date current_time current_timestamp localtime localtimestamp current_user
		session_user user nocase rtrim asc desc signed unsigned integer int bigint smallint text char varchar
		boolean bool real double precision decimal numeric float json jsonb uuid`) {
		conditionWords[w] = true
	}
}

// UnknownColumns returns the words of cond that stand where a column would
// and name none of columns (case-insensitively): a count's where=
// condition naming a column its child rows do not have, caught where the
// counter is declared instead of when the database first runs it. Words
// that are qualified, call a function, follow a cast (::) or are SQL's own
// are left alone; quoted text is never read as a column.
func UnknownColumns(cond string, columns []string) []string {
	d := Dialect{kind: mysql} // the widest quoting: '...' and "..." are strings, `...` identifiers
	toks := d.lexCondition(cond)
	next := func(i, step int) string {
		for j := i + step; j >= 0 && j < len(toks); j += step {
			if strings.TrimSpace(toks[j].text) != "" {
				return toks[j].text
			}
		}
		return ""
	}
	var out []string
	seen := map[string]bool{}
	for i, t := range toks {
		if t.ident == "" || next(i, -1) == "." || next(i, 1) == "." || next(i, 1) == "(" || next(i, -1) == ":" {
			continue
		}
		if t.bare && i+1 < len(toks) && strings.HasPrefix(toks[i+1].text, "'") {
			continue // a typed literal: DATE '2024-01-01', E'...', X'ff'
		}
		if t.bare && conditionWords[strings.ToLower(t.ident)] {
			continue
		}
		known := false
		for _, col := range columns {
			if strings.EqualFold(col, t.ident) {
				known = true
				break
			}
		}
		if !known && !seen[strings.ToLower(t.ident)] {
			seen[strings.ToLower(t.ident)] = true
			out = append(out, t.ident)
		}
	}
	return out
}

// Piece is a part of SQL text split by [Dialect.ColumnRefs]: text as
// written, holding Binds '?' placeholders, or (Column != "") a reference to
// one of the columns asked for, qualifier and quotes included.
type Piece struct {
	Text   string
	Column string
	Binds  int
}

// ColumnRefs splits sql (a condition, an ORDER BY, a select list an ORM
// was handed) around its references to columns of the table named table:
// a word or quoted name that matches one of columns, bare or qualified by
// the table's name, and is not a function's name, an alias after AS, or
// itself a qualifier, a named parameter (@likes). Strings, comments and
// other names are text.
func (d Dialect) ColumnRefs(sql, table string, columns []string) []Piece {
	return d.columnRefs(sql, table, columns, false)
}

// QualifiedColumnRefs is ColumnRefs for references qualified by
// qualifier alone (a joined table's alias): bare names are text.
func (d Dialect) QualifiedColumnRefs(sql, qualifier string, columns []string) []Piece {
	return d.columnRefs(sql, qualifier, columns, true)
}

// columnRefs is ColumnRefs, taking only qualified references if qualified.
func (d Dialect) columnRefs(sql, table string, columns []string, qualified bool) []Piece {
	toks := d.lexCondition(sql)
	significant := func(i, step int) int {
		for j := i + step; j >= 0 && j < len(toks); j += step {
			if strings.TrimSpace(toks[j].text) != "" {
				return j
			}
		}
		return -1
	}
	text := func(i int) string {
		if i < 0 {
			return ""
		}
		return toks[i].text
	}
	var out []Piece
	var cur strings.Builder
	binds := 0
	flush := func() {
		if cur.Len() > 0 || binds > 0 {
			out = append(out, Piece{Text: cur.String(), Binds: binds})
			cur.Reset()
			binds = 0
		}
	}
	tableName := table
	if i := strings.LastIndexByte(table, '.'); i >= 0 {
		tableName = table[i+1:]
	}
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		col := ""
		named := i > 0 && (toks[i-1].text == "@" || toks[i-1].text == ":") // a named parameter (@likes)
		if t.ident != "" && !named && text(significant(i, 1)) != "." && !(t.bare && text(significant(i, 1)) == "(") &&
			!strings.EqualFold(text(significant(i, -1)), "AS") {
			for _, c := range columns {
				if strings.EqualFold(c, t.ident) {
					col = c
				}
			}
		}
		if col == "" {
			if t.text == "?" {
				binds++
			}
			cur.WriteString(t.text)
			continue
		}
		prev := significant(i, -1)
		if qualified && text(prev) != "." {
			cur.WriteString(t.text)
			continue
		}
		if text(prev) == "." {
			q := significant(prev, -1)
			if q < 0 || !strings.EqualFold(toks[q].ident, tableName) || text(significant(q, -1)) == "." {
				cur.WriteString(t.text) // a column of another table
				continue
			}
			// Take the qualifier back out of the text: the reference replaces it.
			s := cur.String()
			cut := len(s)
			for j := i - 1; j >= q; j-- {
				cut -= len(toks[j].text)
			}
			cur.Reset()
			cur.WriteString(s[:cut])
		}
		flush()
		out = append(out, Piece{Column: col})
	}
	flush()
	return out
}

// SplitList splits a comma-separated list (a select list) into its items,
// at the commas outside parentheses, strings and quoted names.
func (d Dialect) SplitList(sql string) []string {
	var out []string
	depth, start, at := 0, 0, 0
	for _, t := range d.lexCondition(sql) {
		switch t.text {
		case "(":
			depth++
		case ")":
			depth--
		case ",":
			if depth == 0 {
				out = append(out, sql[start:at])
				start = at + 1
			}
		}
		at += len(t.text)
	}
	return append(out, sql[start:])
}

// RewriteRefs returns the query sql (as an ORM rendered it) with every
// reference to one of the columns of the table named table replaced by the
// SQL of its value (values, by column; see [Dialect.ColumnRefs] for what is
// a reference). In the outermost select list, an item that is such a
// reference alone keeps its column's name: `"posts"."likes"` becomes
// `(...) AS "likes"`. Placeholders are left where they are: the values bind
// nothing.
func (d Dialect) RewriteRefs(sql, table string, columns []string, values map[string]string) string {
	toks := d.lexCondition(sql)
	// The outermost select list: from the first SELECT at depth 0 to the
	// FROM at depth 0 after it.
	start, end, depth, at := -1, -1, 0, 0
	for _, t := range toks {
		switch {
		case t.text == "(":
			depth++
		case t.text == ")":
			depth--
		case depth == 0 && t.bare && start < 0 && strings.EqualFold(t.ident, "select"):
			start = at + len(t.text)
		case depth == 0 && t.bare && start >= 0 && end < 0 && strings.EqualFold(t.ident, "from"):
			end = at
		}
		at += len(t.text)
	}
	replace := func(part string) string {
		var b strings.Builder
		for _, p := range d.ColumnRefs(part, table, columns) {
			if p.Column == "" {
				b.WriteString(p.Text)
			} else {
				b.WriteString(values[p.Column])
			}
		}
		return b.String()
	}
	if start < 0 || end < 0 {
		return replace(sql)
	}
	items := d.SplitList(sql[start:end])
	for i, item := range items {
		ps := d.ColumnRefs(item, table, columns)
		lone := ""
		for _, p := range ps {
			switch {
			case p.Column != "" && lone == "":
				lone = p.Column
			case p.Column != "" || strings.TrimSpace(p.Text) != "":
				lone = "-"
			}
		}
		if lone != "" && lone != "-" {
			lead := item[:len(item)-len(strings.TrimLeft(item, " \t\n"))]
			trail := item[len(strings.TrimRight(item, " \t\n")):]
			items[i] = lead + values[lone] + " AS " + d.Quote(lone) + trail
			continue
		}
		items[i] = replace(item)
	}
	return replace(sql[:start]) + strings.Join(items, ",") + replace(sql[end:])
}

// RewriteQualifiedRefs is RewriteRefs for the references qualified by the
// table's name alone (another table's columns in a query of one table).
//
// A reference that stands alone as an item of a select list (ent's order
// by a neighbor's field selects "authors"."followers" in a subquery that
// the outer query reads as t1.followers) keeps its name: its value is
// selected AS the column.
func (d Dialect) RewriteQualifiedRefs(sql, table string, columns []string, values map[string]string) string {
	var b strings.Builder
	pieces := d.columnRefs(sql, table, columns, true)
	for i, p := range pieces {
		if p.Column == "" {
			b.WriteString(p.Text)
			continue
		}
		b.WriteString(values[p.Column])
		var after strings.Builder
		for _, q := range pieces[i+1:] {
			if q.Column != "" {
				after.WriteString(q.Column) // a name: not a comma or FROM
				break
			}
			after.WriteString(q.Text)
		}
		if d.selectItem(b.String(), values[p.Column], after.String()) {
			b.WriteString(" AS ")
			b.WriteString(d.Quote(p.Column))
		}
	}
	return b.String()
}

// selectItem reports whether a value just written at the end of before
// (the value's own text last) stands alone as an item of a select list:
// SELECT, DISTINCT or a comma of that list before it, and a comma or FROM
// after it.
func (d Dialect) selectItem(before, value, after string) bool {
	next := d.lexCondition(after)
	for len(next) > 0 && strings.TrimSpace(next[0].text) == "" {
		next = next[1:]
	}
	if len(next) == 0 || !(next[0].text == "," || next[0].bare && strings.EqualFold(next[0].ident, "from")) {
		return false
	}
	toks := d.lexCondition(strings.TrimSuffix(before, value))
	depth, first := 0, true
	for i := len(toks) - 1; i >= 0; i-- {
		t := toks[i]
		if strings.TrimSpace(t.text) == "" {
			continue
		}
		word := ""
		if t.bare {
			word = strings.ToLower(t.ident)
		}
		if first {
			first = false
			if t.text != "," && word != "select" && word != "distinct" {
				return false
			}
		}
		switch {
		case t.text == ")":
			depth++
		case t.text == "(":
			if depth == 0 {
				return false // a function's arguments, or a list in parentheses
			}
			depth--
		case depth > 0:
		case word == "select":
			return true
		case word == "from", word == "where", word == "by", word == "on", word == "join", word == "having", word == "set", word == "values":
			return false
		}
	}
	return false
}

// Refers reports whether sql holds a reference to one of the columns of
// table (qualified by its name, if qualified), as ColumnRefs finds them.
// Its answers for texts of up to refersText bytes are kept (refersSeen):
// a program sends most of its query texts over and over, their arguments
// bound apart, and lexing them anew took a third of the client's CPU in a
// one-row load through ent. Some texts vary with their arguments (ent
// writes LIMIT and OFFSET as numbers, an IN list has a placeholder per
// value), so the kept answers are dropped, all at once, when refersMax
// are kept, and the hot texts come back at their next use.
func (d Dialect) Refers(sql, table string, columns []string, qualified bool) bool {
	if len(sql) > refersText {
		return d.refers(sql, table, columns, qualified)
	}
	key := refersKey{d, sql, table, strings.Join(columns, "\x00"), qualified}
	if found, ok := refersSeen.Load(key); ok {
		return found.(bool)
	}
	found := d.refers(sql, table, columns, qualified)
	if refersCount.Add(1) > refersMax {
		refersSeen.Clear()
		refersCount.Store(1)
	}
	refersSeen.Store(key, found)
	return found
}

// refersMax and refersText bound the answers of Refers that are kept: at
// most refersMax, of texts of at most refersText bytes (a few MB in all).
const (
	refersMax  = 4096
	refersText = 2048
)

var (
	refersSeen  sync.Map     // refersKey -> bool
	refersCount atomic.Int64 // answers stored since the last Clear
)

// refersKey is what an answer of Refers depends on.
type refersKey struct {
	d                   Dialect
	sql, table, columns string
	qualified           bool
}

func (d Dialect) refers(sql, table string, columns []string, qualified bool) bool {
	for _, p := range d.columnRefs(sql, table, columns, qualified) {
		if p.Column != "" {
			return true
		}
	}
	return false
}
