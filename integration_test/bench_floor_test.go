package integration_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"entgo.io/ent/dialect"
	entsql "entgo.io/ent/dialect/sql"
	"gorm.io/gorm"

	"github.com/hotcounter/hotcounter/integration_test/ent"
	"github.com/hotcounter/hotcounter/integration_test/ent/post"
)

// Loads at the SQL floor: the library's load of 1, 100 and 1,000 posts
// with their likes (a sum counter), by key, by a condition and as the first
// page of an ordering, against the hand-written statements that return the
// same rows and totals, in the same run. 2,000 posts with 1 to 8 slot rows
// holding values (MariaDB's pre-created rows of the others hold 0), after
// ANALYZE. Each shape runs:
//
//   - gorm: the load through GORM, as an application writes it;
//   - gorm-plain: the same load of the table without counters (PlainPost);
//   - ent: the same load through ent (the integration tests' ent schema,
//     whose Post maps the same table and slot table), as an application
//     writes it; the statements it sends for one load are logged;
//   - lib: the statement GORM sends for the load, by hand through
//     database/sql (every column read as raw bytes);
//   - correlated, joined, cte, lateral (PostgreSQL): hand-written
//     statements for the same rows and totals, the same way: a correlated
//     SUM per row; a left join to one grouped SUM over the rows' keys; the
//     rows in a CTE joined to a grouped SUM over the CTE's keys; a LATERAL
//     join to a SUM per row.
//
// Before timing, each statement's rows are checked: the same ids, in the
// same order for a page, and every total (id % 8 + 1).
func BenchmarkLoadFloor(b *testing.B) { benchLoadFloor(b, pg) }

// BenchmarkLoadFloorMariaDB is BenchmarkLoadFloor on MariaDB.
func BenchmarkLoadFloorMariaDB(b *testing.B) { benchLoadFloor(b, my) }

func benchLoadFloor(b *testing.B, kind dbKind) {
	db := openBenchOn(b, kind)
	if err := db.AutoMigrate(&Author{}, &Post{}); err != nil {
		b.Fatal(err)
	}
	const total = 2000
	posts := make([]Post, total)
	for i := range posts {
		posts[i].Title = "post " + strconv.Itoa(i)
	}
	if err := db.CreateInBatches(&posts, 500).Error; err != nil {
		b.Fatal(err)
	}
	// Post id holds id % 8 + 1 likes, one per slot row.
	fill := "INSERT INTO post_likes_slots (post_id, slot, n) SELECT id, s, 1 FROM posts CROSS JOIN generate_series(0, 7) AS s WHERE s <= id % 8"
	analyze := "ANALYZE"
	if kind == my {
		fill = "UPDATE post_likes_slots SET n = 1 WHERE slot <= post_id % 8"
		analyze = "ANALYZE TABLE posts, post_likes_slots"
	}
	for _, stmt := range []string{fill, analyze} {
		if err := db.Exec(stmt).Error; err != nil {
			b.Fatal(err)
		}
	}
	sqlDB, err := db.DB()
	if err != nil {
		b.Fatal(err)
	}
	entDialect := dialect.Postgres
	if kind == my {
		entDialect = dialect.MySQL
	}
	client := ent.NewClient(ent.Driver(entsql.OpenDB(entDialect, sqlDB)))
	var entSent []string
	traced := ent.NewClient(ent.Driver(entDriverSending(kind, sqlDB, func(s string) { entSent = append(entSent, s) })))
	ctx := context.Background()
	first := posts[0].ID
	for _, n := range []int{1, 100, 1000} {
		ids := make([]uint, n)
		for i := range ids {
			ids[i] = first + uint(2*i)
		}
		lo, hi := first+500, first+500+uint(n)-1
		entIDs := make([]int, n)
		for i, id := range ids {
			entIDs[i] = int(id)
		}
		shapes := []loadShape{
			{name: "key", ids: ids, load: func(tx *gorm.DB, dest any) *gorm.DB { return tx.Find(dest, ids) },
				entLoad: func(c *ent.Client) ([]*ent.Post, error) { return c.Post.Query().Where(post.IDIn(entIDs...)).All(ctx) }},
			{name: "condition", lo: lo, hi: hi, load: func(tx *gorm.DB, dest any) *gorm.DB {
				return tx.Where("id BETWEEN ? AND ?", lo, hi).Find(dest)
			}, entLoad: func(c *ent.Client) ([]*ent.Post, error) {
				return c.Post.Query().Where(post.IDGTE(int(lo)), post.IDLTE(int(hi))).All(ctx)
			}},
			{name: "page", limit: n, load: func(tx *gorm.DB, dest any) *gorm.DB { return tx.Order("id DESC").Limit(n).Find(dest) },
				entLoad: func(c *ent.Client) ([]*ent.Post, error) {
					return c.Post.Query().Order(ent.Desc(post.FieldID)).Limit(n).All(ctx)
				}},
		}
		for _, sh := range shapes {
			b.Run(fmt.Sprintf("%s-%d", sh.name, n), func(b *testing.B) {
				want := sh.want(posts)
				run := func(name string, fn func() error) {
					b.Run(name, func(b *testing.B) {
						for range b.N {
							if err := fn(); err != nil {
								b.Fatal(err)
							}
						}
					})
				}
				var got []Post
				if err := sh.load(db, &got).Error; err != nil {
					b.Fatal(err)
				}
				checkLoad(b, "gorm", want, gormRows(got), sh.limit > 0)
				run("gorm", func() error { var ps []Post; return sh.load(db, &ps).Error })
				run("gorm-plain", func() error { var ps []PlainPost; return sh.load(db, &ps).Error })
				entSent = nil
				byEnt, err := sh.entLoad(traced)
				if err != nil {
					b.Fatal(err)
				}
				checkLoad(b, "ent", want, entRows(byEnt), sh.limit > 0)
				b.Logf("ent sends %d statements: %.300q", len(entSent), entSent)
				run("ent", func() error { _, err := sh.entLoad(client); return err })
				st := sh.load(db.Session(&gorm.Session{DryRun: true}), &[]Post{}).Statement
				statements := map[string]handStatement{"lib": {st.SQL.String(), st.Vars}}
				b.Logf("lib: %.300s", st.SQL.String())
				for name, text := range sh.handWritten(kind) {
					statements[name] = text
				}
				for _, name := range []string{"lib", "correlated", "joined", "grouped-keys", "cte", "lateral"} {
					hs, ok := statements[name]
					if !ok {
						continue
					}
					got, err := queryLoad(sqlDB.Query(hs.text, hs.args...))
					if err != nil {
						b.Fatalf("%s: %v\n%s", name, err, hs.text)
					}
					checkLoad(b, name, want, got, sh.limit > 0)
					run(name, func() error { return drainRows(sqlDB.Query(hs.text, hs.args...)) })
				}
			})
		}
	}
}

// loadShape is one load of BenchmarkLoadFloor: by ids, by id between lo
// and hi, or the first limit posts by id descending.
type loadShape struct {
	name   string
	ids    []uint
	lo, hi uint
	limit  int
	load   func(tx *gorm.DB, dest any) *gorm.DB
	// entLoad is the same load through ent.
	entLoad func(c *ent.Client) ([]*ent.Post, error)
}

// handStatement is a statement text and its arguments.
type handStatement struct {
	text string
	args []any
}

// loadedRow is a post's id and likes as a load returned them.
type loadedRow struct{ id, likes int64 }

// want is what the shape loads from posts: ids in order (a page's order
// matters), each with id % 8 + 1 likes.
func (sh loadShape) want(posts []Post) []loadedRow {
	var out []loadedRow
	add := func(id uint) { out = append(out, loadedRow{int64(id), int64(id%8 + 1)}) }
	switch {
	case sh.ids != nil:
		for _, id := range sh.ids {
			add(id)
		}
	case sh.limit > 0:
		for i := len(posts) - 1; i >= len(posts)-sh.limit; i-- {
			add(posts[i].ID)
		}
	default:
		for id := sh.lo; id <= sh.hi; id++ {
			add(id)
		}
	}
	return out
}

// handWritten returns the shape's hand-written statements on kind's
// database, each returning the posts' columns and likes.
func (sh loadShape) handWritten(kind dbKind) map[string]handStatement {
	var args []any
	mark := func(v any) string {
		args = append(args, v)
		if kind == pg {
			return "$" + strconv.Itoa(len(args))
		}
		return "?"
	}
	// where renders the shape's condition on the posts table named as;
	// order its ordering and limit (a page).
	where := func(as string) string {
		switch {
		case sh.ids != nil:
			marks := make([]string, len(sh.ids))
			for i, id := range sh.ids {
				marks[i] = mark(id)
			}
			return " WHERE " + as + ".id IN (" + strings.Join(marks, ", ") + ")"
		case sh.limit > 0:
			return ""
		default:
			return " WHERE " + as + ".id BETWEEN " + mark(sh.lo) + " AND " + mark(sh.hi)
		}
	}
	// (The limit is bound, as GORM binds it: a literal one plans
	// differently, and the comparison is of how the totals are read.)
	order := func(as string) string {
		if sh.limit > 0 {
			return " ORDER BY " + as + ".id DESC LIMIT " + mark(sh.limit)
		}
		return ""
	}
	statement := func(build func() string) handStatement {
		args = nil
		text := build()
		return handStatement{text, args}
	}
	out := map[string]handStatement{
		"correlated": statement(func() string {
			return "SELECT posts.*, COALESCE((SELECT SUM(s.n) FROM post_likes_slots AS s WHERE s.post_id = posts.id), 0) AS likes FROM posts" +
				where("posts") + order("posts")
		}),
		"joined": statement(func() string {
			keys := "SELECT k.id FROM posts AS k" + where("k") + order("k")
			if sh.limit > 0 {
				keys = "SELECT id FROM (" + keys + ") AS kk" // MariaDB: no LIMIT directly in IN
			}
			return "SELECT posts.*, COALESCE(t.n, 0) AS likes FROM posts LEFT JOIN (SELECT post_id, SUM(n) AS n FROM post_likes_slots WHERE post_id IN (" +
				keys + ") GROUP BY post_id) AS t ON t.post_id = posts.id" + where("posts") + order("posts")
		}),
		"cte": statement(func() string {
			rowsOrder := ""
			if sh.limit > 0 {
				rowsOrder = " ORDER BY r.id DESC"
			}
			return "WITH r AS (SELECT posts.* FROM posts" + where("posts") + order("posts") +
				") SELECT r.*, COALESCE(t.n, 0) AS likes FROM r LEFT JOIN (SELECT post_id, SUM(n) AS n FROM post_likes_slots WHERE post_id IN (SELECT id FROM r) GROUP BY post_id) AS t ON t.post_id = r.id" +
				rowsOrder
		}),
	}
	if sh.ids != nil {
		out["grouped-keys"] = statement(func() string {
			marks := make([]string, len(sh.ids))
			for i, id := range sh.ids {
				marks[i] = mark(id)
			}
			return "SELECT posts.*, COALESCE(t.n, 0) AS likes FROM posts LEFT JOIN (SELECT post_id, SUM(n) AS n FROM post_likes_slots WHERE post_id IN (" +
				strings.Join(marks, ", ") + ") AND n <> 0 GROUP BY post_id) AS t ON t.post_id = posts.id" + where("posts")
		})
	}
	if kind == pg {
		out["lateral"] = statement(func() string {
			return "SELECT posts.*, COALESCE(t.n, 0) AS likes FROM posts LEFT JOIN LATERAL (SELECT SUM(s.n) AS n FROM post_likes_slots AS s WHERE s.post_id = posts.id) AS t ON true" +
				where("posts") + order("posts")
		})
	}
	return out
}

// queryLoad reads the id and likes columns of every row a load returned.
func queryLoad(rows interface {
	Columns() ([]string, error)
	Next() bool
	Scan(...any) error
	Err() error
	Close() error
}, err error) ([]loadedRow, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	var out []loadedRow
	for rows.Next() {
		vals := make([]any, len(cols))
		var r loadedRow
		for i, c := range cols {
			switch c {
			case "id":
				vals[i] = &r.id
			case "likes":
				vals[i] = &r.likes
			default:
				vals[i] = new(any)
			}
		}
		if err := rows.Scan(vals...); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// gormRows is posts as loadedRows.
func gormRows(posts []Post) []loadedRow {
	out := make([]loadedRow, len(posts))
	for i, p := range posts {
		out[i] = loadedRow{int64(p.ID), p.Likes}
	}
	return out
}

// entRows is ent's posts as loadedRows.
func entRows(posts []*ent.Post) []loadedRow {
	out := make([]loadedRow, len(posts))
	for i, p := range posts {
		out[i] = loadedRow{int64(p.ID), p.Likes}
	}
	return out
}

// checkLoad fails b unless got holds want's rows (in want's order when
// ordered is set: a page; else in any order).
func checkLoad(b *testing.B, name string, want, got []loadedRow, ordered bool) {
	b.Helper()
	if ordered && len(got) == len(want) {
		for i := range want {
			if got[i].id != want[i].id {
				b.Fatalf("%s: row %d is post %d, want %d", name, i, got[i].id, want[i].id)
			}
		}
	}
	seen := map[int64]int64{}
	for _, r := range got {
		seen[r.id] = r.likes
	}
	if len(got) != len(want) || len(seen) != len(want) {
		b.Fatalf("%s returned %d rows (%d distinct), want %d", name, len(got), len(seen), len(want))
	}
	for _, r := range want {
		if likes, ok := seen[r.id]; !ok || likes != r.likes {
			b.Fatalf("%s: post %d has %d likes (returned: %v), want %d", name, r.id, likes, ok, r.likes)
		}
	}
}
