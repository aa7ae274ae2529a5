package countersql

import "strconv"

// Sources names what a counter's value is made of in the database right
// now: the parent column, if it is read (a rollup or append counter's
// folded total, or the column a sum counter was adopted over), plus the n
// of every row of the listed tables that belongs to the parent (the slot
// table, and the delta or slot table a mode change left behind).
type Sources struct {
	Column bool
	Tables []string
}

// FillPart asks for the values of one counter for some parents.
type FillPart struct {
	Table Table
	// Read is what adds up to the value.
	Read Sources
	// Keys are the parent keys, at least one.
	Keys []any
}

// Args is how many arguments a part with n keys binds at most.
func (s Sources) Args(n int) int {
	k := len(s.Tables)
	if s.Column {
		k++
	}
	return n * max(k, 1)
}

// Fill writes one query that returns the value of every part's counter for
// every part's keys, as rows (part index, key as text, value). A part that
// reads only tables returns a row only for parents that have rows with a
// value (absent means zero); a part that reads the parent column returns a
// row for every parent that exists, column and tables read in the same
// statement, so a concurrent fold or move is seen either wholly or not at
// all. A NULL column counts as 0.
func (d Dialect) Fill(w Writer, parts []FillPart) {
	for i, p := range parts {
		if i > 0 {
			w.WriteString(" UNION ALL ")
		}
		w.WriteString("SELECT " + strconv.Itoa(i) + ", CAST(")
		t := p.Table
		if p.Read.Column {
			// SELECT key, COALESCE(col, 0) + COALESCE(pending.n, 0) FROM parent LEFT JOIN
			//   (SELECT owner, SUM(n) AS n FROM slots WHERE owner IN keys GROUP BY owner) pending
			//   ON pending.owner = parent.key WHERE parent.key IN keys
			// The pending sums are computed before the join: cheaper than grouping the join.
			const pending = "hc_pending"
			q(w, "%.% AS "+d.textType()+"), CAST(COALESCE(%.%, 0)", t.Parent, t.ParentKey, t.Parent, t.Column)
			if len(p.Read.Tables) == 0 {
				q(w, " AS "+d.intType()+") FROM % WHERE %.%", t.Parent, t.Parent, t.ParentKey)
				d.keyIn(w, p.Keys)
				continue
			}
			q(w, " + COALESCE(%.%, 0) AS "+d.intType()+") FROM % LEFT JOIN (", pending, ValueColumn, t.Parent)
			d.sumByOwner(w, t, p.Read.Tables, p.Keys, false)
			q(w, ") % ON %.% = %.% WHERE %.%", pending, pending, t.Owner, t.Parent, t.ParentKey, t.Parent, t.ParentKey)
			d.keyIn(w, p.Keys)
			continue
		}
		// SELECT owner, SUM(n) FROM slots WHERE owner IN keys AND n <> 0 GROUP BY owner
		const u = "hc_u"
		if len(p.Read.Tables) == 1 {
			q(w, "%.% AS "+d.textType()+"), CAST(SUM(%.%) AS "+d.intType()+") FROM % WHERE %.%",
				p.Read.Tables[0], t.Owner, p.Read.Tables[0], ValueColumn, p.Read.Tables[0], p.Read.Tables[0], t.Owner)
			d.keyIn(w, p.Keys)
			// Pre-created and untouched slots hold 0: reading past them is cheap,
			// aggregating them is not.
			q(w, " AND %.% <> 0 GROUP BY %.%", p.Read.Tables[0], ValueColumn, p.Read.Tables[0], t.Owner)
			continue
		}
		q(w, "%.% AS "+d.textType()+"), CAST(%.% AS "+d.intType()+") FROM (", u, t.Owner, u, ValueColumn)
		d.sumByOwner(w, t, p.Read.Tables, p.Keys, true)
		q(w, ") %", u)
	}
}

// sumByOwner writes a query of (owner, SUM(n) AS n) over the rows of the
// given tables that belong to keys; nonZero leaves out rows holding 0.
// With several tables each one is filtered by the keys on its own, so
// every database reads them through the owner index.
func (d Dialect) sumByOwner(w Writer, t Table, tables []string, keys []any, nonZero bool) {
	d.sumByOwnerAs(w, t, tables, keys, nonZero, "", ValueColumn)
}

// sumByOwnerAs is sumByOwner whose owner column is named ownerAs (if not
// empty) and whose sum is named sumAs.
func (d Dialect) sumByOwnerAs(w Writer, t Table, tables []string, keys []any, nonZero bool, ownerAs, sumAs string) {
	const all = "hc_all"
	where := func(table string) {
		q(w, " WHERE %.%", table, t.Owner)
		d.keyIn(w, keys)
		if nonZero {
			q(w, " AND %.% <> 0", table, ValueColumn)
		}
	}
	head := func() {
		q(w, "SELECT %.%", all, t.Owner)
		if ownerAs != "" {
			q(w, " AS %", ownerAs)
		}
		q(w, ", SUM(%.%) AS %", all, ValueColumn, sumAs)
	}
	head()
	if len(tables) == 1 {
		q(w, " FROM % AS %", tables[0], all)
		where(all)
		q(w, " GROUP BY %.%", all, t.Owner)
		return
	}
	w.WriteString(" FROM (")
	for i, tb := range tables {
		if i > 0 {
			w.WriteString(" UNION ALL ")
		}
		q(w, "SELECT %.%, %.% FROM %", tb, t.Owner, tb, ValueColumn, tb)
		where(tb)
	}
	q(w, ") % GROUP BY %.%", all, all, t.Owner)
}

// Inline asks for one counter's total in the select list of a load of its
// parent rows (see SelectWithTotals).
type Inline struct {
	Table Table
	Read  Sources // slot tables only: a column the counter was adopted over is left to the fill
	As    string  // the name the load scans into the counter's field
	// Keys are the keys the load names its rows by, where it names them
	// (nil otherwise). On Citus each subquery names them too: Citus then
	// sends the load to the nodes of those parents alone, where without
	// them it sent it to every shard.
	Keys []any
}

// SelectWithTotals writes the select list of a load of parent rows from
// the table named parent (as the outer query names it) that also returns
// each counter's total, so that a load of one row needs no second
// statement:
//
//	"posts".*, (COALESCE((SELECT SUM(s.n) FROM post_likes_slots AS s WHERE s.post_id = "posts"."id"), 0)) AS "likes"
func (d Dialect) SelectWithTotals(w Writer, parent string, totals []Inline) {
	w.Ident(parent)
	w.WriteString(".*")
	for _, in := range totals {
		w.WriteString(", ")
		d.TotalOf(w, in, func(w Writer) { q(w, "%.%", parent, in.Table.ParentKey) })
		q(w, " AS %", in.As)
	}
}

// JoinedFrom is how many keys a load of parent rows by key names, at
// least, for its totals to be read by JoinTotals rather than by a
// correlated subquery per row (SelectWithTotals), on PostgreSQL. Measured
// (BenchmarkLoadFloor, 2,000 posts of 1 to 8 slot rows): at 1,000 keys
// one grouped SUM joined to the rows took 2.2x less time than a subquery
// per row; at 100 the two were even, and at 1 the join cost more.
const JoinedFrom = 250

// SelectJoinedTotals writes the select list of a load of parent rows
// from the table named parent whose totals JoinTotals joins: the rows'
// columns and each counter's total (0 for a parent without slot rows).
func (d Dialect) SelectJoinedTotals(w Writer, parent string, totals []Inline) {
	w.Ident(parent)
	w.WriteString(".*")
	for i, in := range totals {
		if len(in.Read.Tables) == 0 {
			q(w, ", 0 AS %", in.As)
			continue
		}
		q(w, ", COALESCE(%.%, 0) AS %", joinedAlias(i), joinedSum, in.As)
	}
}

// JoinTotals writes the joins of a load of the rows of the table named
// parent, every one of whose keys is among keys, that SelectJoinedTotals
// selects from: per counter, a LEFT JOIN to one grouped SUM of its
// tables' rows of keys (the keys bound as one array on PostgreSQL):
//
//	LEFT JOIN (SELECT hc_all.post_id AS hc_key, SUM(hc_all.n) AS hc_sum FROM post_likes_slots AS hc_all
//	  WHERE hc_all.post_id = ANY($1) AND hc_all.n <> 0 GROUP BY hc_all.post_id) AS hc_j0
//	  ON hc_j0.hc_key = posts.id
func (d Dialect) JoinTotals(w Writer, parent string, totals []Inline, keys []any) {
	first := true
	for i, in := range totals {
		if len(in.Read.Tables) == 0 {
			continue
		}
		if !first {
			w.WriteString(" ")
		}
		first = false
		alias := joinedAlias(i)
		w.WriteString("LEFT JOIN (")
		// Named apart from any column of the parent's: a user's
		// unqualified column in the load's WHERE or ORDER BY must not
		// become ambiguous.
		d.sumByOwnerAs(w, in.Table, in.Read.Tables, keys, true, joinedKey, joinedSum)
		q(w, ") AS % ON %.% = %.%", alias, alias, joinedKey, parent, in.Table.ParentKey)
	}
}

// joinedAlias names the grouped sum of the i-th counter JoinTotals joins,
// and joinedKey and joinedSum its columns.
func joinedAlias(i int) string { return "hc_j" + strconv.Itoa(i) }

const (
	joinedKey = "hc_key"
	joinedSum = "hc_sum"
)

// KeysBindAsOneArray reports whether keys go to the database as one
// parameter in the statements that read by them (on PostgreSQL: all
// integers or all strings, bound as one array), rather than one parameter
// each, which a statement that names them once per table can multiply
// past PostgreSQL's 65,535.
func (d Dialect) KeysBindAsOneArray(keys []any) bool {
	return d.kind == postgres && len(keys) > 1 && typedArray(keys) != nil
}

// TotalOf writes the parenthesised total of one counter of the parent row
// whose key key writes (a column of the outer query): the sum of each of
// its tables' rows of that parent, 0 without any.
func (d Dialect) TotalOf(w Writer, in Inline, key func(Writer)) {
	const s = "hc_s"
	w.WriteString("(")
	for i, tb := range in.Read.Tables {
		if i > 0 {
			w.WriteString(" + ")
		}
		q(w, "COALESCE((SELECT SUM(%.%) FROM % AS % WHERE %.% = ", s, ValueColumn, tb, s, s, in.Table.Owner)
		key(w)
		if d.citus && len(in.Keys) > 0 {
			q(w, " AND %.%", s, in.Table.Owner)
			d.keyIn(w, in.Keys)
		}
		w.WriteString("), 0)")
	}
	if len(in.Read.Tables) == 0 {
		w.WriteString("0")
	}
	w.WriteString(")")
}

// ValueOf writes the parenthesised exact value of one counter of the row of
// the table named parent (as the outer query names it): its column, when
// read (COALESCE'd: a NULL counts as 0), plus the n of its rows in each
// table. It is the expression a query's WHERE, ORDER BY, GROUP BY or select
// list uses in place of a counter that has no column, or whose column is
// behind: one correlated subquery per table per row it is evaluated for,
// each an index range over the slot table's (owner, slot) key.
func (d Dialect) ValueOf(w Writer, t Table, read Sources, parent string) {
	key := func(w Writer) { q(w, "%.%", parent, t.ParentKey) }
	in := Inline{Table: t, Read: read}
	if !read.Column {
		d.TotalOf(w, in, key)
		return
	}
	q(w, "(COALESCE(%.%, 0) + ", parent, t.Column)
	d.TotalOf(w, in, key)
	w.WriteString(")")
}
