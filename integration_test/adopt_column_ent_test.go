package integration_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	atlasmigrate "ariga.io/atlas/sql/migrate"
	"entgo.io/ent/dialect/sql/schema"
	"github.com/hotcounter/hotcounter/entcounter"
	"github.com/hotcounter/hotcounter/integration_test/ent/migrate"
	"github.com/hotcounter/hotcounter/integration_test/ent/post"
	"github.com/hotcounter/hotcounter/integration_test/entversions/deltas"
	_ "github.com/hotcounter/hotcounter/integration_test/entversions/deltas/runtime"
	"github.com/hotcounter/hotcounter/integration_test/entversions/plain"
	"github.com/hotcounter/hotcounter/integration_test/entversions/rollup"
	_ "github.com/hotcounter/hotcounter/integration_test/entversions/rollup/runtime"
	"github.com/hotcounter/hotcounter/integration_test/entversions/sum16"
	_ "github.com/hotcounter/hotcounter/integration_test/entversions/sum16/runtime"
	"github.com/hotcounter/hotcounter/integration_test/entversions/sum64"
	_ "github.com/hotcounter/hotcounter/integration_test/entversions/sum64/runtime"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
)

// legacyEntPosts makes the posts table as an ent application had it
// before likes became a counter: ent's schema of today without the slot
// table of likes, and with a plain likes column (NOT NULL without a default
// where the database can drop one; SQLite keeps DEFAULT 0). It creates two
// posts, with 1234 and 0 likes.
func legacyEntPosts(t *testing.T, e *entEnv) (int, int) {
	t.Helper()
	ctx := context.Background()
	must(t, entMigrate(ctx, e.client))
	must(t, e.db.Exec("DROP TABLE post_likes_slots").Error)
	must(t, e.db.Exec("ALTER TABLE posts ADD COLUMN likes BIGINT NOT NULL DEFAULT 0").Error)
	if e.kind != lite {
		must(t, e.db.Exec("ALTER TABLE posts ALTER COLUMN likes DROP DEFAULT").Error)
	}
	var ids [2]int
	for i, likes := range []int64{1234, 0} {
		must(t, e.db.Exec("INSERT INTO posts (title, views, likes) VALUES (?, 0, ?)", fmt.Sprint("old ", i), likes).Error)
		ids[i] = int(rawInt(t, e.db, "SELECT MAX(id) FROM posts"))
	}
	e.client = reopenEnt(t, e) // a new process: nothing learned yet
	return ids[0], ids[1]
}

func entLikes(t *testing.T, e *entEnv, ctx context.Context, ids ...int) []int64 {
	t.Helper()
	out := make([]int64, len(ids))
	for i, id := range ids {
		p, err := e.client.Post.Get(ctx, id)
		must(t, err)
		out[i] = p.Likes
	}
	return out
}

// What ent alone has of a counter over an existing column (the rest, for
// both ORMs: TestACounterOverAnExistingColumnHidesNothing): the entity
// UpdateOne returns, and every entity of a query, show the total with the
// column's value.
func TestEntEntitiesShowTheTotalWithTheExistingColumn(t *testing.T) {
	parallel(t)
	for _, k := range allKinds {
		t.Run(string(k), func(t *testing.T) {
			ctx := context.Background()
			e := openEnt(t, k, false)
			a, b := legacyEntPosts(t, e)
			must(t, entMigrate(ctx, e.client, entcounter.WithCounters(e.client)))

			saved, err := e.client.Post.UpdateOneID(a).AddLikes(1).Save(ctx)
			must(t, err)
			assert.EqualValues(t, 1235, saved.Likes, "UpdateOne returns the total with the column")
			all, err := e.client.Post.Query().Order(post.ByID()).All(ctx)
			must(t, err)
			require.Len(t, all, 2)
			assert.EqualValues(t, 1235, all[0].Likes, "All")
			assert.EqualValues(t, b, all[1].ID)
			assert.EqualValues(t, 0, all[1].Likes, "All")
		})
	}
}

// The versioned-migration path: ent's diff of the legacy database keeps
// the likes column (ent drops columns only when told to) and adds the slot
// tables; applied, it leaves loads showing the column's likes.
func TestEntVersionedMigrationKeepsTheColumn(t *testing.T) {
	parallel(t)
	for _, k := range allKinds {
		t.Run(string(k), func(t *testing.T) {
			ctx := context.Background()
			e := openEnt(t, k, false)
			a, _ := legacyEntPosts(t, e)
			dir := t.TempDir()
			ld, err := atlasmigrate.NewLocalDir(dir)
			must(t, err)
			m, err := schema.NewMigrate(e.client.HotCounter().Driver, schema.WithDir(ld), schema.WithFormatter(atlasmigrate.DefaultFormatter))
			must(t, err)
			entSchemaMu.Lock()
			err = m.NamedDiff(ctx, "adopt", migrate.Tables...)
			entSchemaMu.Unlock()
			must(t, err)
			files, err := filepath.Glob(filepath.Join(dir, "*_adopt.sql"))
			must(t, err)
			require.Len(t, files, 1)
			body, err := os.ReadFile(files[0])
			must(t, err)
			sql := string(body)
			assert.Contains(t, sql, "post_likes_slots")
			assert.NotContains(t, strings.ToLower(sql), "drop column")
			var stmt strings.Builder
			for _, line := range strings.Split(sql, "\n") {
				if strings.HasPrefix(line, "--") {
					continue
				}
				stmt.WriteString(line + "\n")
				if strings.HasSuffix(line, ";") {
					must(t, e.db.Exec(stmt.String()).Error)
					stmt.Reset()
				}
			}
			assert.Equal(t, []int64{1234}, entLikes(t, e, ctx, a))
			must(t, e.client.Post.UpdateOneID(a).AddLikes(2).Exec(ctx))
			assert.Equal(t, []int64{1236}, entLikes(t, e, ctx, a))
		})
	}
}

// AdoptColumn keeps the column in ent's schema: a migration that alters the
// table (here it makes the old NOT NULL column nullable with the default 0;
// on SQLite by copying the table) keeps it and its counts.
func TestEntAdoptColumnKeepsTheColumn(t *testing.T) {
	parallel(t)
	for _, k := range allKinds {
		t.Run(string(k), func(t *testing.T) {
			ctx := context.Background()
			e := openEnt(t, k, false)
			ddl := map[dbKind]string{
				pg:   "CREATE TABLE clips (id bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, title character varying NOT NULL DEFAULT '', likes bigint NOT NULL)",
				my:   "CREATE TABLE clips (id bigint AUTO_INCREMENT PRIMARY KEY, title varchar(255) NOT NULL DEFAULT '', likes bigint NOT NULL)",
				lite: "CREATE TABLE clips (id integer PRIMARY KEY AUTOINCREMENT, title text NOT NULL DEFAULT '', likes integer NOT NULL)",
			}[k]
			must(t, e.db.Exec(ddl).Error)
			must(t, e.db.Exec("INSERT INTO clips (title, likes) VALUES ('a', 41)").Error)
			id := int(rawInt(t, e.db, "SELECT MAX(id) FROM clips"))
			single := reopenEnt(t, e) // SQLite: ent turns foreign keys off for its copy on the connection it migrates on
			if k == lite {
				single = reopenEntPool(t, e, 1)
			}
			must(t, entMigrate(ctx, single, entcounter.WithCounters(single)))
			c, err := e.client.Clip.Get(ctx, id)
			must(t, err)
			assert.EqualValues(t, 41, c.Likes)
			must(t, e.client.Clip.UpdateOneID(id).AddLikes(1).Exec(ctx))
			c, err = e.client.Clip.Get(ctx, id)
			must(t, err)
			assert.EqualValues(t, 42, c.Likes)
			moved, err := entcounter.MoveToSlots(ctx, e.client)
			must(t, err)
			assert.Equal(t, entcounter.Moved{Parents: 1, Amount: 41}, moved)
		})
	}
}

// On SQLite a migration that copies a parent table would drop a column
// that a counter was declared over without AdoptColumn, with its counts:
// WithCounters refuses, and says what to declare.
func TestEntSQLiteCopyOfAnAdoptedColumnIsRefused(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	e := openEnt(t, lite, false)
	a, _ := legacyEntPosts(t, e)
	// Make views nullable by copying the table, as an old schema would have
	// it: ent's next migration copies the table to make it NOT NULL again.
	must(t, e.db.Connection(func(conn *gorm.DB) error {
		var ddl string
		must(t, conn.Raw("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'posts'").Scan(&ddl).Error)
		nullable := regexp.MustCompile("`views` integer NOT NULL DEFAULT \\(0\\)").ReplaceAllString(ddl, "`views` integer NULL")
		require.NotEqual(t, ddl, nullable, "ent's DDL of posts: %s", ddl)
		for _, s := range []string{
			"PRAGMA foreign_keys = OFF",
			strings.Replace(nullable, "`posts`", "`posts_copy`", 1),
			"INSERT INTO posts_copy SELECT * FROM posts",
			"DROP TABLE posts",
			"ALTER TABLE posts_copy RENAME TO posts",
			"PRAGMA foreign_keys = ON",
		} {
			must(t, conn.Exec(s).Error)
		}
		return nil
	}))
	single := reopenEntPool(t, e, 1)
	err := entMigrate(ctx, single, entcounter.WithCounters(single))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "Post.likes")
	assert.Contains(t, err.Error(), "AdoptColumn")
	assert.EqualValues(t, 1234, rawInt(t, e.db, "SELECT likes FROM posts WHERE id = ?", a), "nothing was lost")
}

// reelVersion is one deploy of the entversions application, opened on a
// database as a new process opens it.
type reelVersion struct {
	src     entcounter.Source
	migrate func(ctx context.Context) error
	add     func(ctx context.Context, id int, n int64) error
	plays   func(ctx context.Context, id int) (int64, error)
}

// openReels opens version v ("sum16", "rollup", "deltas", "sum64", "plain") of the
// entversions application on e's database.
func openReels(t *testing.T, e *env, v string) reelVersion {
	t.Helper()
	drv := entDriver(t, e, 4, func(string) {})
	locked := func(create func() error) error {
		entSchemaMu.Lock() // the generated migrate.Tables are shared
		defer entSchemaMu.Unlock()
		return create()
	}
	switch v {
	case "sum16":
		c := sum16.NewClient(sum16.Driver(drv))
		return reelVersion{c,
			func(ctx context.Context) error {
				return locked(func() error { return c.Schema.Create(ctx, entcounter.WithCounters(c)) })
			},
			func(ctx context.Context, id int, n int64) error { return c.Reel.UpdateOneID(id).AddPlays(n).Exec(ctx) },
			func(ctx context.Context, id int) (int64, error) { r, err := c.Reel.Get(ctx, id); return plays(r, err) }}
	case "rollup":
		c := rollup.NewClient(rollup.Driver(drv))
		return reelVersion{c,
			func(ctx context.Context) error {
				return locked(func() error { return c.Schema.Create(ctx, entcounter.WithCounters(c)) })
			},
			func(ctx context.Context, id int, n int64) error { return c.Reel.UpdateOneID(id).AddPlays(n).Exec(ctx) },
			func(ctx context.Context, id int) (int64, error) { r, err := c.Reel.Get(ctx, id); return plays(r, err) }}
	case "deltas":
		c := deltas.NewClient(deltas.Driver(drv))
		return reelVersion{c,
			func(ctx context.Context) error {
				return locked(func() error { return c.Schema.Create(ctx, entcounter.WithCounters(c)) })
			},
			func(ctx context.Context, id int, n int64) error { return c.Reel.UpdateOneID(id).AddPlays(n).Exec(ctx) },
			func(ctx context.Context, id int) (int64, error) { r, err := c.Reel.Get(ctx, id); return plays(r, err) }}
	case "sum64":
		c := sum64.NewClient(sum64.Driver(drv))
		return reelVersion{c,
			func(ctx context.Context) error {
				return locked(func() error { return c.Schema.Create(ctx, entcounter.WithCounters(c)) })
			},
			func(ctx context.Context, id int, n int64) error { return c.Reel.UpdateOneID(id).AddPlays(n).Exec(ctx) },
			func(ctx context.Context, id int) (int64, error) { r, err := c.Reel.Get(ctx, id); return plays(r, err) }}
	case "plain":
		c := plain.NewClient(plain.Driver(drv))
		return reelVersion{c,
			func(ctx context.Context) error {
				return locked(func() error { return c.Schema.Create(ctx, entcounter.WithCounters(c)) })
			},
			func(ctx context.Context, id int, n int64) error { return c.Reel.UpdateOneID(id).AddPlays(n).Exec(ctx) },
			func(ctx context.Context, id int) (int64, error) { r, err := c.Reel.Get(ctx, id); return plays(r, err) }}
	}
	t.Fatalf("no version %q", v)
	return reelVersion{}
}

// plays reads the plays of any version's reel.
func plays[R interface {
	*sum16.Reel | *rollup.Reel | *deltas.Reel | *sum64.Reel | *plain.Reel
}](r R, err error) (int64, error) {
	if err != nil {
		return 0, err
	}
	switch r := any(r).(type) {
	case *sum16.Reel:
		return r.Plays, nil
	case *rollup.Reel:
		return r.Plays, nil
	case *deltas.Reel:
		return r.Plays, nil
	case *sum64.Reel:
		return r.Plays, nil
	case *plain.Reel:
		return r.Plays, nil
	}
	return 0, fmt.Errorf("not a reel: %T", r)
}

// The ent side of TestChangingModeKeepsTotals: one reels table whose plays
// a column held (10) deployed as sum -> rollup -> sum -> append -> sum ->
// 64 slots -> 16 slots, each deploy a new process that migrates, each
// step's total read by every version deployed so far (live for rollup and
// append).
func TestEntChangingModeKeepsTotals(t *testing.T) {
	parallel(t)
	for _, k := range allKinds {
		t.Run(string(k), func(t *testing.T) {
			ctx := context.Background()
			e := open(t, k)
			first := openReels(t, e, "sum16")
			must(t, first.migrate(ctx))
			must(t, e.db.Exec("ALTER TABLE reels ADD COLUMN plays BIGINT NOT NULL DEFAULT 0").Error)
			must(t, e.db.Exec("INSERT INTO reels (title, plays) VALUES ('old', 10)").Error)
			id := int(rawInt(t, e.db, "SELECT MAX(id) FROM reels"))

			want := int64(10)
			readers := []string{"sum16"}
			exact := func(step string) {
				t.Helper()
				for _, v := range readers {
					got, err := openReels(t, e, v).plays(entcounter.WithLive(ctx), id)
					must(t, err)
					assert.Equal(t, want, got, "%s: read by %s", step, v)
				}
			}
			deploy := func(v string) reelVersion {
				t.Helper()
				r := openReels(t, e, v)
				must(t, r.migrate(ctx))
				if !slices.Contains(readers, v) {
					readers = append(readers, v)
				}
				for i := 0; i < 20; i++ {
					must(t, r.add(ctx, id, 1))
				}
				want += 20
				return r
			}

			deploy("sum16")
			exact("sum over the old column")
			r := deploy("rollup")
			exact("sum -> rollup")
			must(t, entcounter.RollupPass(ctx, r.src))
			exact("rollup, folded")
			got, err := openReels(t, e, "rollup").plays(ctx, id)
			must(t, err)
			assert.Equal(t, want, got, "a plain rollup load after the fold")

			deploy("sum16")
			exact("rollup -> sum: the folded column is part of the sum")
			a := deploy("deltas")
			exact("sum -> append: the slots still count")
			must(t, entcounter.RollupPass(ctx, a.src))
			exact("append, folded (deltas and the slots left by sum)")
			got, err = openReels(t, e, "deltas").plays(ctx, id)
			must(t, err)
			assert.Equal(t, want, got, "a plain append load after the fold")

			s := deploy("sum16")
			exact("append -> sum")
			_, err = entcounter.MoveToSlots(ctx, s.src)
			must(t, err)
			exact("after MoveToSlots")

			deploy("sum64")
			exact("16 -> 64 slots")
			s = deploy("sum16")
			exact("64 -> 16 slots: rows above 16 keep counting")
			if k != my {
				must(t, errOf(entcounter.CompactPass(ctx, s.src)))
				exact("64 -> 16 slots, compacted")
			}
		})
	}
}

// Removing a counter's mixin for a plain integer field of the same name
// folds what its slot or delta table holds back into the column, exactly
// once: the deploy that migrates to the plain field (ent adds the column of
// a sum counter; a rollup or append counter's is there) loads every play,
// and the table is left empty.
func TestEntRemovingTheCounterFoldsTheSlotsBack(t *testing.T) {
	parallel(t)
	for _, k := range allKinds {
		for _, from := range []string{"sum16", "rollup", "deltas"} {
			t.Run(string(k)+"/"+from, func(t *testing.T) {
				ctx := context.Background()
				e := open(t, k)
				r := openReels(t, e, from)
				must(t, r.migrate(ctx))
				must(t, e.db.Exec("INSERT INTO reels (title) VALUES ('old')").Error)
				id := int(rawInt(t, e.db, "SELECT MAX(id) FROM reels"))
				must(t, r.add(ctx, id, 3))
				if from != "sum16" {
					must(t, entcounter.RollupPass(ctx, r.src)) // the column holds 3, the table nothing
				}
				must(t, r.add(ctx, id, 5))
				table, held := "reel_plays_slots", int64(8)
				if from == "deltas" {
					table = "reel_plays_deltas"
				}
				if from != "sum16" {
					held = 5
				}
				require.Equal(t, held, rawInt(t, e.db, "SELECT COALESCE(SUM(n), 0) FROM "+table))

				p := openReels(t, e, "plain")
				must(t, p.migrate(ctx))
				got, err := p.plays(ctx, id)
				must(t, err)
				assert.Equal(t, int64(8), got, "a plain load after the counter is removed")
				assert.Equal(t, int64(0), rawInt(t, e.db, "SELECT COALESCE(SUM(n), 0) FROM "+table), "what %s held is folded", table)

				must(t, p.migrate(ctx)) // nothing left to fold: counted once
				must(t, p.add(ctx, id, 2))
				got, err = p.plays(ctx, id)
				must(t, err)
				assert.Equal(t, int64(10), got, "a second migration and a plain increment")
			})
		}
	}
}
