package integration_test

import (
	"strings"
	"testing"

	"github.com/hotcounter/hotcounter/gormcounter"
	"github.com/hotcounter/hotcounter/integration_test/ent"
	"github.com/hotcounter/hotcounter/integration_test/ent/author"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// A load of the model's rows (Find, First, FindInBatches, each Preload
// level) selects their sum counters' totals in its own statement; raw SQL
// is filled with one grouped query per statement, whatever the number of
// rows.
func TestLoadsFillCountersInTheirStatementOrOneExtraQuery(t *testing.T) {
	parallel(t)
	eachDB(t, func(t *testing.T, e *env) {
		db := e.db
		const n = 20 // one grouped query per statement, whatever n is
		posts := seed(t, db, n)
		wantLikes := func(p Post) int64 {
			for i, s := range posts {
				if s.ID == p.ID {
					return int64(i + 1)
				}
			}
			return -1
		}
		check := func(name string, got []Post) {
			t.Helper()
			if len(got) == 0 {
				t.Fatalf("%s loaded nothing", name)
			}
			for _, p := range got {
				if p.Likes != wantLikes(p) {
					t.Fatalf("%s: post %d likes = %d, want %d", name, p.ID, p.Likes, wantLikes(p))
				}
				if p.Views != 0 {
					t.Fatalf("%s: post %d views = %d, want the cached 0 (no rollup yet)", name, p.ID, p.Views)
				}
			}
		}
		cases := []struct {
			name  string
			stmts int64
			load  func() []Post
		}{
			{"Find", 1, func() []Post { var ps []Post; must(t, db.Find(&ps).Error); return ps }},
			{"Find into pointers", 1, func() []Post {
				var ps []*Post
				must(t, db.Find(&ps).Error)
				out := make([]Post, len(ps))
				for i, p := range ps {
					out[i] = *p
				}
				return out
			}},
			// A load of the model's rows selects its sum counters' totals
			// beside its columns: one statement.
			{"First", 1, func() []Post { var p Post; must(t, db.First(&p).Error); return []Post{p} }},
			{"Take", 1, func() []Post { var p Post; must(t, db.Take(&p).Error); return []Post{p} }},
			{"Last", 1, func() []Post { var p Post; must(t, db.Last(&p).Error); return []Post{p} }},
			{"First by id", 1, func() []Post { var p Post; must(t, db.First(&p, posts[5].ID).Error); return []Post{p} }},
			{"Where", 1, func() []Post {
				var ps []Post
				must(t, db.Where("id IN ?", []uint{posts[3].ID, posts[7].ID}).Find(&ps).Error)
				return ps
			}},
			{"Raw().Find", 2, func() []Post {
				var ps []Post
				must(t, db.Raw("SELECT * FROM posts WHERE id <= ?", posts[9].ID).Find(&ps).Error)
				return ps
			}},
			{"FindInBatches (4 batches of 6)", 4, func() []Post {
				var all, batch []Post
				must(t, db.FindInBatches(&batch, 6, func(tx *gorm.DB, _ int) error {
					all = append(all, batch...)
					return nil
				}).Error)
				return all
			}},
		}
		for _, c := range cases {
			var got []Post
			if s := statements(e, func() { got = c.load() }); s != c.stmts {
				t.Fatalf("%s: %d statements, want %d:\n%s", c.name, s, c.stmts, joined(e.log.statements()))
			}
			check(c.name, got)
		}
		var all []Post
		must(t, db.Find(&all).Error)
		if len(all) != n {
			t.Fatalf("Find loaded %d posts, want %d", len(all), n)
		}

		// Preload: one statement per level (posts, then comments), never
		// one per row.
		var withComments []Post
		if s := statements(e, func() { must(t, db.Preload("Comments").Find(&withComments).Error) }); s != 2 {
			t.Fatalf("Preload: %d statements, want 2:\n%s", s, joined(e.log.statements()))
		}
		check("Preload", withComments)
		for i, p := range withComments {
			if len(p.Comments) != 2 {
				t.Fatalf("post %d has %d comments", p.ID, len(p.Comments))
			}
			for _, c := range p.Comments {
				if want := wantLikes(p) + 2; int64(c.Upvote) != want {
					t.Fatalf("preloaded comment %d (post %d, #%d) upvote = %d, want %d", c.ID, p.ID, i, c.Upvote, want)
				}
			}
		}

		// Joins: the joined author's counter is filled by the same one query.
		var withAuthor []Post
		if s := statements(e, func() { must(t, db.Joins("Author").Find(&withAuthor).Error) }); s != 2 {
			t.Fatalf("Joins: %d statements, want 2:\n%s", s, joined(e.log.statements()))
		}
		check("Joins", withAuthor)
		for _, p := range withAuthor {
			if p.Author == nil || int64(p.Author.Followers) != wantLikes(p)+1 {
				t.Fatalf("joined author of post %d: %+v, want followers %d", p.ID, p.Author, wantLikes(p)+1)
			}
		}

		// Live: exact rollup values with the same single extra query.
		var live []Post
		if s := statements(e, func() { must(t, db.Clauses(gormcounter.Live).Find(&live).Error) }); s != 2 {
			t.Fatalf("Live: %d statements, want 2:\n%s", s, joined(e.log.statements()))
		}
		for _, p := range live {
			if p.Views != 10*wantLikes(p) || p.Likes != wantLikes(p) {
				t.Fatalf("live post %d: likes %d views %d", p.ID, p.Likes, p.Views)
			}
		}
		var livePreload []Author
		must(t, db.WithContext(gormcounter.WithLive(t.Context())).Find(&livePreload).Error)
		if len(livePreload) != n {
			t.Fatalf("WithLive Find: %d authors", len(livePreload))
		}
	})
}

func TestPartialSelectsAndOtherDestinations(t *testing.T) {
	parallel(t)
	eachDB(t, func(t *testing.T, e *env) {
		db := e.db
		posts := seed(t, db, 3)
		id := posts[2].ID

		var p Post
		if s := statements(e, func() { must(t, db.Select("id", "title").First(&p, id).Error) }); s != 1 {
			t.Fatalf("Select without counters: %d statements, want 1 (no fill)", s)
		}
		if p.Likes != 0 || p.Title != "post" {
			t.Fatalf("Select(id, title): %+v", p)
		}

		p = Post{}
		must(t, db.Select("title", "likes").First(&p, id).Error) // the key is added for the fill
		if p.Likes != 3 || p.Title != "post" {
			t.Fatalf("Select(title, likes): %+v", p)
		}
		p = Post{}
		must(t, db.Select("title, Likes").Where("id = ?", id).Take(&p).Error)
		if p.Likes != 3 {
			t.Fatalf(`Select("title, Likes"): %+v`, p)
		}
		p = Post{}
		if s := statements(e, func() { must(t, db.Omit("likes").First(&p, id).Error) }); s != 1 || p.Likes != 0 {
			t.Fatalf("Omit(likes): %d statements, likes %d; want 1 and 0", s, p.Likes)
		}

		// Another struct as the destination: its counter-named field is filled.
		var sums []PostSummary
		must(t, db.Model(&Post{}).Order("id").Find(&sums).Error)
		if len(sums) != 3 || sums[2].Likes != 3 || sums[0].Likes != 1 {
			t.Fatalf("Find into PostSummary: %+v", sums)
		}
		// Scan goes around the query callbacks: it works, without the fill.
		var scanned []PostSummary
		must(t, db.Model(&Post{}).Select("id, title").Scan(&scanned).Error)
		if len(scanned) != 3 {
			t.Fatalf("Scan: %+v", scanned)
		}
		var titles []string
		must(t, db.Model(&Post{}).Pluck("title", &titles).Error)
		var count int64
		must(t, db.Model(&Post{}).Count(&count).Error)
		if len(titles) != 3 || count != 3 {
			t.Fatalf("Pluck %v, Count %d", titles, count)
		}
		rows, err := db.Model(&Post{}).Rows()
		must(t, err)
		n := 0
		for rows.Next() {
			var row Post
			must(t, db.ScanRows(rows, &row))
			n++
		}
		must(t, rows.Close())
		if n != 3 {
			t.Fatalf("Rows: %d rows", n)
		}
		var views []int64
		must(t, db.Model(&Post{}).Order("id").Pluck("views", &views).Error) // a rollup column is a column
		if len(views) != 3 {
			t.Fatalf("Pluck(views): %v", views)
		}

		// AfterFind hooks see filled counters.
		must(t, db.AutoMigrate(&Hooked{}))
		h := Hooked{}
		must(t, db.Create(&h).Error)
		must(t, gormcounter.Increment(db.Model(&h), "Hits", 9).Error)
		var hs []Hooked
		must(t, db.Find(&hs).Error)
		if len(hs) != 1 || hs[0].SeenInHok != 9 {
			t.Fatalf("AfterFind saw %+v, want 9", hs)
		}
	})
}

func TestCountersLoadUnderQueryFields(t *testing.T) {
	parallel(t)
	for _, k := range allKinds {
		t.Run(string(k), func(t *testing.T) {
			e := open(t, k, config(&gorm.Config{QueryFields: true}))
			posts := seed(t, e.db, 2)
			var got []Post
			must(t, e.db.Order("id").Find(&got).Error)
			if len(got) != 2 || got[1].Likes != 2 || got[1].ID != posts[1].ID {
				t.Fatalf("QueryFields Find: %+v", got)
			}
			var withAuthor []Post
			must(t, e.db.Joins("Author").Order("posts.id").Find(&withAuthor).Error)
			if len(withAuthor) != 2 || withAuthor[0].Author == nil || withAuthor[0].Author.Followers != 2 {
				t.Fatalf("QueryFields Joins: %+v", withAuthor)
			}
		})
	}
}

// Row and Find into plain values do not fill: the select list reads the
// counter's value, never the key passed off as the count.
func TestSelectingACounterWhereNothingFillsReadsItsValue(t *testing.T) {
	parallel(t)
	eachDB(t, func(t *testing.T, e *env) {
		db := e.db
		posts := seed(t, db, 2)
		id := posts[1].ID
		var n int64
		must(t, db.Model(&Post{}).Select("likes").Where("id = ?", id).Row().Scan(&n))
		if n != 2 {
			t.Fatalf("Row with Select(likes) returned %d, want 2", n)
		}
		var ls []int64
		must(t, db.Model(&Post{}).Select("likes").Where("id = ?", id).Find(&ls).Error)
		if len(ls) != 1 || ls[0] != 2 {
			t.Fatalf("Find into []int64 with Select(likes) returned %v, want [2]", ls)
		}
		// Live with a selected rollup counter and no key: the key is added, the value exact.
		must(t, gormcounter.Increment(db.Model(&Post{ID: id}), "Views", 5).Error)
		var p Post
		must(t, db.Clauses(gormcounter.Live).Select("views").Where("id = ?", id).Take(&p).Error)
		if p.Views != 20+5 {
			t.Fatalf("Live Select(views): %d, want 25", p.Views)
		}
	})
}

// A uint32 counter whose slot rows other code took below zero (its own
// decreases are refused there: TestAnUnsignedCounterNeverGoesBelowZero)
// fails the load, naming the field.
func TestUnsignedCounterBelowZeroIsAnError(t *testing.T) {
	parallel(t)
	eachDB(t, func(t *testing.T, e *env) {
		db := e.db
		must(t, db.AutoMigrate(&Debt{}))
		d := Debt{}
		must(t, db.Create(&d).Error)
		must(t, db.Exec("DELETE FROM debt_owed_slots WHERE debt_id = ?", d.ID).Error) // MariaDB pre-creates them
		must(t, db.Exec("INSERT INTO debt_owed_slots (debt_id, slot, n) VALUES (?, 0, -1)", d.ID).Error)
		var got Debt
		err := db.First(&got, d.ID).Error
		if err == nil || !strings.Contains(err.Error(), "Debt.Owed") {
			t.Fatalf("loading a negative total into uint32: %v (value %d), want an error naming Debt.Owed", err, got.Owed)
		}
	})
}

// A load of many posts by key (300 keys, duplicates and keys of no post
// among them) returns each post once with its exact likes: totals written
// at creation, increments on top, and posts with none. On PostgreSQL GORM
// reads such a load's totals with one grouped SUM joined to the rows
// (countersql.JoinedFrom keys or more); ent's load is followed by its
// grouped fill. GORM and ent, every database.
func TestALoadOfManyPostsByKeyHasEveryTotal(t *testing.T) {
	eachORM(t, func(t *testing.T, o counterORM) {
		const n = 300
		likes := make([]int64, n)
		for i := range likes {
			likes[i] = int64(i % 7) // 0 for every seventh post
		}
		ids := o.createPosts(t, likes)
		want := map[int64]int64{}
		for i, id := range ids {
			want[id] = likes[i]
			if i%3 == 0 {
				must(t, o.increment(modelPost, id, "likes", 2))
				want[id] += 2
			}
		}
		keys := append(append([]int64{}, ids...), ids[:10]...) // duplicates
		for i := range 5 {
			keys = append(keys, ids[n-1]+1000+int64(i)) // no such post
		}
		got := o.likesByKey(t, keys)
		if len(got) != n {
			t.Fatalf("the load returned %d posts for %d keys of %d posts, want %d", len(got), len(keys), n, n)
		}
		for id, w := range want {
			if got[id] != w {
				t.Errorf("post %d: likes=%d, want %d", id, got[id], w)
			}
		}
	})
}

// An eager load of many parents (GORM's Preload("Author"), ent's
// WithAuthor, over 300 posts of 300 authors) fills each author's followers
// exactly, authors without followers included: on PostgreSQL GORM's
// preload names 250 keys or more and reads the totals with one grouped SUM
// joined to the rows. GORM and ent, every database.
func TestAnEagerLoadOfManyParentsHasEveryTotal(t *testing.T) {
	eachORM(t, func(t *testing.T, o counterORM) {
		const n = 300
		followers := func(i int) int64 { return int64(i % 5) }
		got := map[int64]int64{} // post id -> its author's followers
		want := map[int64]int64{}
		switch o := o.(type) {
		case gormORM:
			authors := make([]Author, n)
			for i := range authors {
				authors[i].Name = "a"
			}
			must(t, o.gdb.CreateInBatches(&authors, 100).Error)
			byFollowers := map[int64][]uint{}
			posts := make([]Post, n)
			for i, a := range authors {
				byFollowers[followers(i)] = append(byFollowers[followers(i)], a.ID)
				posts[i] = Post{Title: "p", AuthorID: &a.ID}
			}
			for f, ids := range byFollowers {
				if f > 0 {
					must(t, gormcounter.Increment(o.gdb.Model(&Author{}).Where("id IN ?", ids), "Followers", f).Error)
				}
			}
			must(t, o.gdb.CreateInBatches(&posts, 100).Error)
			for i, p := range posts {
				want[int64(p.ID)] = followers(i)
			}
			var loaded []Post
			must(t, o.gdb.Preload("Author").Find(&loaded).Error)
			for _, p := range loaded {
				if p.Author != nil {
					got[int64(p.ID)] = int64(p.Author.Followers)
				}
			}
		case entORM:
			c, ctx := o.client, o.ctx()
			creates := make([]*ent.AuthorCreate, n)
			for i := range creates {
				creates[i] = c.Author.Create().SetName("a")
			}
			authors := c.Author.CreateBulk(creates...).SaveX(ctx)
			byFollowers := map[int64][]int{}
			posts := make([]*ent.PostCreate, n)
			for i, a := range authors {
				byFollowers[followers(i)] = append(byFollowers[followers(i)], a.ID)
				posts[i] = c.Post.Create().SetTitle("p").SetAuthorID(a.ID)
			}
			for f, ids := range byFollowers {
				if f > 0 {
					c.Author.Update().Where(author.IDIn(ids...)).AddFollowers(f).ExecX(ctx)
				}
			}
			for i, p := range c.Post.CreateBulk(posts...).SaveX(ctx) {
				want[int64(p.ID)] = followers(i)
			}
			for _, p := range c.Post.Query().WithAuthor().AllX(ctx) {
				if p.Edges.Author != nil {
					got[int64(p.ID)] = p.Edges.Author.Followers
				}
			}
		}
		if len(got) != n {
			t.Fatalf("%d posts loaded with their author, want %d", len(got), n)
		}
		for id, w := range want {
			if got[id] != w {
				t.Errorf("post %d: its author's followers=%d, want %d", id, got[id], w)
			}
		}
	})
}

// Loads that name 300 posts by key beside another condition fill every
// row they return exactly: OR another condition (GORM's Or, and raw SQL
// whose OR GORM does not bracket, so the rows are not bounded by the keys),
// under a row lock (FOR UPDATE), and ordered by an unqualified column.
// Every database.
func TestLoadsOfManyKeysFillEveryRowTheyReturn(t *testing.T) {
	parallel(t)
	eachDB(t, func(t *testing.T, e *env) {
		db := e.db
		must(t, db.AutoMigrate(&Author{}, &Post{}))
		posts := make([]Post, 301)
		for i := range posts {
			posts[i] = Post{Title: "listed", Likes: int64(i%4 + 1)}
		}
		posts[300].Title = "other"
		must(t, db.CreateInBatches(&posts, 100).Error)
		ids := make([]uint, 300)
		for i := range ids {
			ids[i] = posts[i].ID
		}
		want := map[uint]int64{}
		for _, p := range posts {
			want[p.ID] = p.Likes
		}
		for _, l := range []struct {
			name string
			rows int
			load func(*[]Post) error
		}{
			{"Or", 301, func(got *[]Post) error {
				return db.Where(map[string]any{"id": ids}).Or("title = ?", "other").Find(got).Error
			}},
			{"raw SQL with an OR GORM leaves unbracketed", 1, func(got *[]Post) error {
				return db.Where("title = 'other'\nOR title = 'none'").Find(got, ids).Error
			}},
			{"FOR UPDATE", 300, func(got *[]Post) error {
				return db.Transaction(func(tx *gorm.DB) error {
					return tx.Clauses(clause.Locking{Strength: "UPDATE"}).Find(got, ids).Error
				})
			}},
			{"ordered by an unqualified column", 300, func(got *[]Post) error { return db.Order("id DESC").Find(got, ids).Error }},
		} {
			var got []Post
			must(t, l.load(&got))
			if len(got) != l.rows {
				t.Fatalf("%s: %d posts loaded, want %d", l.name, len(got), l.rows)
			}
			for _, p := range got {
				if p.Likes != want[p.ID] {
					t.Errorf("%s: post %d (%s): likes=%d, want %d", l.name, p.ID, p.Title, p.Likes, want[p.ID])
				}
			}
		}
	})
}
