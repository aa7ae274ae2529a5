package countersql

import (
	"strconv"
	"strings"
	"testing"
)

// A row trigger reads a count's condition from OLD or NEW: every column the
// condition names is qualified, and nothing else is touched (strings, quoted
// text, functions, numbers, names that are no column).
func TestRowConditionQualifiesOnlyTheChildColumnsItNames(t *testing.T) {
	columns := []string{"id", "status", "body", "e5", "Kind", "lower"}
	cases := []struct {
		d          Dialect
		cond, want string
	}{
		{Dialect{kind: mysql}, "status = 'active'", "NEW.`status` = 'active'"},
		{Dialect{kind: mysql}, "status IN ('status', 'body') AND body <> ''", "NEW.`status` IN ('status', 'body') AND NEW.`body` <> ''"},
		{Dialect{kind: mysql}, `status = "body"`, "NEW.`status` = \"body\""},  // a string on MySQL
		{Dialect{kind: sqlite}, `"status" = 'body'`, `NEW."status" = 'body'`}, // an identifier on SQLite
		{Dialect{kind: sqlite}, "[status] = 'x'", `NEW."status" = 'x'`},
		{Dialect{kind: mysql}, "`status` = 'it''s status'", "NEW.`status` = 'it''s status'"},
		{Dialect{kind: mysql}, `status = 'it\'s body' AND id > 0`, "NEW.`status` = 'it\\'s body' AND NEW.`id` > 0"},
		{Dialect{kind: mysql}, "LOWER(status) = 'x' AND lower(body) = 'y'", "LOWER(NEW.`status`) = 'x' AND lower(NEW.`body`) = 'y'"},
		{Dialect{kind: mysql}, "lower = 1e5 AND id < 0x1F", "NEW.`lower` = 1e5 AND NEW.`id` < 0x1F"},
		{Dialect{kind: mysql}, "kind IS NOT NULL AND STATUS <> 'x'", "NEW.`Kind` IS NOT NULL AND NEW.`status` <> 'x'"},
		{Dialect{kind: sqlite}, "état = 1 AND status = 'é'", "état = 1 AND NEW.\"status\" = 'é'"},
	}
	for _, tc := range cases {
		w := &goldenWriter{quote: "`"}
		if tc.d.kind != mysql {
			w.quote = `"`
		}
		tc.d.rowCondition(w, Count{Where: tc.cond, Columns: columns}, "NEW")
		if got := w.b.String(); got != tc.want {
			t.Errorf("%s over NEW:\n got %s\nwant %s", tc.cond, got, tc.want)
		}
	}
}

func TestCheckConditionRefusesSubqueriesCommentsAndQualifiedNames(t *testing.T) {
	for cond, want := range map[string]string{
		"status IN (SELECT s FROM open_states)": "subquery",
		"status = 'a' -- the open ones":         "no comment",
		"status = 'a' /* open */":               "no comment",
		"status = 'a' # open":                   "no comment",
		"status = 'a'; DROP TABLE x":            "without ';'",
		"objects.status = 'a'":                  "not objects.status",
	} {
		err := CheckCondition(cond)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("CheckCondition(%q) = %v, want an error saying %q", cond, err, want)
		}
	}
	for _, cond := range []string{
		"status = 'select'", "status = 'a;b' AND kind <> '--'", "price > 1.5", "`select` = 1",
	} {
		if err := CheckCondition(cond); err != nil {
			t.Errorf("CheckCondition(%q) = %v, want nil", cond, err)
		}
	}
}

// An ORM's SQL text is split around the references to counters of its
// table, and nothing else: other tables' columns, aliases, functions and
// strings stay text, and the placeholders are counted where they fall.
func TestColumnRefsFindTheTablesCounterColumns(t *testing.T) {
	d := Dialect{kind: postgres}
	render := func(ps []Piece) string {
		var b strings.Builder
		for _, p := range ps {
			if p.Column != "" {
				b.WriteString("<" + p.Column + ">")
				continue
			}
			b.WriteString(p.Text + "|" + strings.Repeat("?", p.Binds) + "|")
		}
		return b.String()
	}
	for sql, want := range map[string]string{
		"likes > ? AND title = ?":         "<likes> > ? AND title = ?|??|",
		`"posts"."likes" desc`:            `<likes> desc||`,
		"posts.likes + comments.likes":    "<likes> + comments.likes||",
		"likes AS l, COUNT(*) AS likes":   "<likes> AS l, COUNT(*) AS likes||",
		"likes(x) = 'likes' OR LIKES = ?": "likes(x) = 'likes' OR ||<likes> = ?|?|",
		"coalesce(Views, 0) - likes":      "coalesce(||<views>, 0) - ||<likes>",
		"authors.id = posts.author_id":    "authors.id = posts.author_id||",
		"public.posts.likes > 1":          "public.posts.likes > 1||",
	} {
		if got := render(d.ColumnRefs(sql, "posts", []string{"likes", "views"})); got != want {
			t.Errorf("ColumnRefs(%q):\n got %s\nwant %s", sql, got, want)
		}
	}
}

// A whole query an ORM rendered: its references to counters read their
// values, and a select item that is one alone keeps the counter's name.
func TestRewriteRefsReadsValuesAndKeepsSelectedNames(t *testing.T) {
	d := Dialect{kind: postgres}
	values := map[string]string{"likes": "(L)"}
	for sql, want := range map[string]string{
		`SELECT "posts"."id", "posts"."likes" FROM "posts" WHERE "posts"."likes" > $1 ORDER BY "posts"."likes" DESC`: `SELECT "posts"."id", (L) AS "likes" FROM "posts" WHERE (L) > $1 ORDER BY (L) DESC`,
		`SELECT COUNT(*) FROM "posts" WHERE ("posts"."likes" > $1)`:                                                  `SELECT COUNT(*) FROM "posts" WHERE ((L) > $1)`,
		`SELECT "posts"."likes", COUNT(*) FROM "posts" GROUP BY "posts"."likes"`:                                     `SELECT (L) AS "likes", COUNT(*) FROM "posts" GROUP BY (L)`,
		`SELECT "posts"."id", (SELECT 1 FROM x) AS "likes" FROM "posts"`:                                             `SELECT "posts"."id", (SELECT 1 FROM x) AS "likes" FROM "posts"`,
		`SELECT "comments"."likes" FROM "comments"`:                                                                  `SELECT "comments"."likes" FROM "comments"`,
	} {
		if got := d.RewriteRefs(sql, "posts", []string{"likes"}, values); got != want {
			t.Errorf("RewriteRefs(%s):\n got %s\nwant %s", sql, got, want)
		}
	}
}

// A qualified reference to another table's counter keeps its name where it
// stands alone in a select list (a subquery that an outer query reads by
// that name, as ent's order by a neighbor's field does), and nowhere else.
func TestRewriteQualifiedRefsKeepsTheNameOfASelectedItem(t *testing.T) {
	d := Dialect{kind: postgres}
	values := map[string]string{"followers": "(F)"}
	for sql, want := range map[string]string{
		`SELECT "posts"."id" FROM "posts" LEFT JOIN (SELECT "authors"."id", "authors"."followers" FROM "authors") AS "t1" ON "posts"."author_id" = "t1"."id" ORDER BY "t1"."followers" DESC`: `SELECT "posts"."id" FROM "posts" LEFT JOIN (SELECT "authors"."id", (F) AS "followers" FROM "authors") AS "t1" ON "posts"."author_id" = "t1"."id" ORDER BY "t1"."followers" DESC`,
		`SELECT DISTINCT "authors"."followers" FROM "authors"`:                                                                       `SELECT DISTINCT (F) AS "followers" FROM "authors"`,
		`SELECT "authors"."followers" AS "f", "authors"."id" FROM "authors"`:                                                         `SELECT (F) AS "f", "authors"."id" FROM "authors"`,
		`SELECT * FROM "posts" WHERE "posts"."author_id" IN (SELECT "authors"."id" FROM "authors" WHERE "authors"."followers" > $1)`: `SELECT * FROM "posts" WHERE "posts"."author_id" IN (SELECT "authors"."id" FROM "authors" WHERE (F) > $1)`,
		`SELECT GREATEST(1, "authors"."followers", 2) FROM "authors"`:                                                                `SELECT GREATEST(1, (F), 2) FROM "authors"`,
		`SELECT 1 - "authors"."followers", 2 FROM "authors"`:                                                                         `SELECT 1 - (F), 2 FROM "authors"`,
	} {
		if got := d.RewriteQualifiedRefs(sql, "authors", []string{"followers"}, values); got != want {
			t.Errorf("RewriteQualifiedRefs(%s):\n got %s\nwant %s", sql, got, want)
		}
	}
}

// Refers keeps its answers, and asked again about the same text for
// another table, other columns or a qualified reference, it answers each
// question apart: the second round answers from what the first kept.
func TestRefersAnswersEachQuestionApartWhenAskedAgain(t *testing.T) {
	pg := Dialect{kind: postgres}
	q := `SELECT "posts"."id", "likes" AS "n" FROM "posts" WHERE "posts"."views" > $1`
	for round := range 2 {
		for _, tc := range []struct {
			table     string
			columns   []string
			qualified bool
			want      bool
		}{
			{"posts", []string{"views"}, false, true},
			{"posts", []string{"views"}, true, true},
			{"posts", []string{"likes"}, false, true},
			{"posts", []string{"likes"}, true, false}, // bare: not posts.likes
			{"posts", []string{"title"}, false, false},
			{"authors", []string{"views"}, true, false},
		} {
			if got := pg.Refers(q, tc.table, tc.columns, tc.qualified); got != tc.want {
				t.Errorf("round %d: Refers(%s, %v, qualified %v) = %v, want %v", round, tc.table, tc.columns, tc.qualified, got, tc.want)
			}
		}
	}
}

// Texts that vary with their arguments (a LIMIT, an IN list) never make
// Refers keep more than refersMax answers, and it answers right across
// the point where it drops them; a text over refersText bytes is not
// kept at all.
func TestRefersKeepsABoundedNumberOfAnswers(t *testing.T) {
	pg := Dialect{kind: postgres}
	for i := range refersMax + 100 {
		q := `SELECT "posts"."id" FROM "posts" WHERE "posts"."views" > $1 LIMIT ` + strconv.Itoa(i)
		if !pg.Refers(q, "posts", []string{"views"}, true) || pg.Refers(q, "posts", []string{"likes"}, true) {
			t.Fatalf("text %d: wrong answer", i)
		}
		if n := refersCount.Load(); n > refersMax {
			t.Fatalf("text %d: %d answers kept, want at most %d", i, n, refersMax)
		}
	}
	long := `SELECT "posts"."id" FROM "posts" WHERE "posts"."views" IN (` + strings.Repeat("$1, ", refersText/4) + `$1)`
	if !pg.Refers(long, "posts", []string{"views"}, true) {
		t.Fatal("a long text: wrong answer")
	}
	key := refersKey{pg, long, "posts", "views", true}
	if _, kept := refersSeen.Load(key); kept {
		t.Fatalf("a text of %d bytes was kept, want none over %d", len(long), refersText)
	}
}

func TestUnknownColumnsNamesOnlyWordsThatWouldBeMissingColumns(t *testing.T) {
	cols := []string{"id", "status", "deleted_at", "score", "data"}
	for _, tc := range []struct {
		cond string
		want []string
	}{
		{"status = 'open'", nil},
		{"Status IN ('open', 'held') AND deleted_at IS NULL", nil},
		{"LOWER(status) = 'open' OR COALESCE(score, 0) > 2", nil},
		{"CAST(score AS DECIMAL(10, 2)) > 1.5e3 AND status::text <> 'x'", nil},
		{"deleted_at > CURRENT_TIMESTAMP - INTERVAL '1 day' AND data->>'k' = \"v\"", nil},
		{"status IS NOT DISTINCT FROM 'open' AND score BETWEEN 1 AND 3", nil},
		{"created_at > DATE '2024-01-01'", []string{"created_at"}},
		{"state = 'open' AND `kind` = 1 AND state <> 'x'", []string{"state", "kind"}},
		{"t.status = 'open'", nil}, // qualified: CheckCondition refuses it
	} {
		got := UnknownColumns(tc.cond, cols)
		if strings.Join(got, ",") != strings.Join(tc.want, ",") {
			t.Errorf("UnknownColumns(%q) = %q, want %q", tc.cond, got, tc.want)
		}
	}
}
