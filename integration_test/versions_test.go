package integration_test

import (
	"context"
	"fmt"
	"testing"

	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/hotcounter/hotcounter/entcounter"
	"github.com/hotcounter/hotcounter/gormcounter"
	"github.com/hotcounter/hotcounter/integration_test/entversions/deltas"
	_ "github.com/hotcounter/hotcounter/integration_test/entversions/deltas/runtime"
	"github.com/hotcounter/hotcounter/integration_test/entversions/plain"
	"github.com/hotcounter/hotcounter/integration_test/entversions/rollup"
	_ "github.com/hotcounter/hotcounter/integration_test/entversions/rollup/runtime"
	"github.com/hotcounter/hotcounter/integration_test/entversions/sum16"
	_ "github.com/hotcounter/hotcounter/integration_test/entversions/sum16/runtime"
	"github.com/hotcounter/hotcounter/integration_test/entversions/sum64"
	_ "github.com/hotcounter/hotcounter/integration_test/entversions/sum64/runtime"
)

// appVersion is one deploy of an application whose one counter changes
// its declaration from deploy to deploy, opened as a new process opens
// it. The versions:
//   - "sum16": a sum counter of 16 slots;
//   - "rollup": a rollup counter;
//   - "deltas": an append counter;
//   - "sum64": a sum counter of 64 slots;
//   - "plain": no counter, a plain integer field of the same name.
//
// GORM's versions are models over the shows table (SumShow, RollupShow,
// AppendShow, WideShow, LeftShow: shows.likes); ent's are the entversions
// clients over the reels table (reels.plays).
type appVersion struct {
	migrate func() error
	// add adds n to the counter of row id (a plain version: the ORM's own
	// increment of the field).
	add func(id, n int64) error
	// value loads row id and returns the counter, exactly when live.
	value func(id int64, live bool) (int64, error)
	// rollup, moveToSlots and compact run the ORM's passes over the
	// version's counter.
	rollup, moveToSlots, compact func() error
}

// versionedTable names the table and column of the versioned application.
func versionedTable(o counterORM) (table, column string) {
	if _, isEnt := o.(entORM); isEnt {
		return "reels", "plays"
	}
	return "shows", "likes"
}

func (o gormORM) version(t testing.TB, v string) appVersion {
	t.Helper()
	db, err := gorm.Open(dialectorFor(o.e.kind, o.e.dsn), &gorm.Config{Logger: logger.Discard})
	must(t, err)
	must(t, db.Use(gormcounter.New(gormcounter.Config{})))
	pool, err := db.DB()
	must(t, err)
	pool.SetMaxOpenConns(4)
	t.Cleanup(func() { pool.Close() })
	model := map[string]func(id uint) any{
		"sum16":  func(id uint) any { return &SumShow{ID: id} },
		"rollup": func(id uint) any { return &RollupShow{ID: id} },
		"deltas": func(id uint) any { return &AppendShow{ID: id} },
		"sum64":  func(id uint) any { return &WideShow{ID: id} },
		"plain":  func(id uint) any { return &LeftShow{ID: id} },
	}[v]
	if model == nil {
		t.Fatalf("no version %q", v)
	}
	return appVersion{
		migrate: func() error { return db.AutoMigrate(model(0)) },
		add: func(id, n int64) error {
			if v == "plain" {
				return db.Model(model(uint(id))).UpdateColumn("likes", gorm.Expr("likes + ?", n)).Error
			}
			return gormcounter.Increment(db.Model(model(uint(id))), "Likes", n).Error
		},
		value: func(id int64, live bool) (int64, error) {
			q := db
			if live {
				q = q.Clauses(gormcounter.Live)
			}
			m := model(0)
			if err := q.First(m, id).Error; err != nil {
				return 0, err
			}
			switch m := m.(type) {
			case *SumShow:
				return m.Likes, nil
			case *RollupShow:
				return m.Likes, nil
			case *AppendShow:
				return m.Likes, nil
			case *WideShow:
				return m.Likes, nil
			case *LeftShow:
				return m.Likes, nil
			}
			return 0, fmt.Errorf("not a show: %T", m)
		},
		rollup: func() error { return gormcounter.RollupPass(db, model(0)) },
		moveToSlots: func() error {
			_, err := gormcounter.MoveToSlots(db, model(0))
			return err
		},
		compact: func() error { return errOf(gormcounter.CompactPass(db, model(0))) },
	}
}

// legacyRow makes the versioned table as the application had it before
// its counter (a plain integer column) and returns the id of a row whose
// column holds value.
func (o gormORM) legacyRow(t testing.TB, value int64) int64 {
	t.Helper()
	return int64(oldShows(t, o.gdb, &value)[0])
}

func (o entORM) version(t testing.TB, v string) appVersion {
	t.Helper()
	r := openReels(t, o.e.env, v)
	ctx := context.Background()
	return appVersion{
		migrate: func() error { return r.migrate(ctx) },
		add:     func(id, n int64) error { return r.add(ctx, int(id), n) },
		value: func(id int64, live bool) (int64, error) {
			if live {
				return r.plays(entcounter.WithLive(ctx), int(id))
			}
			return r.plays(ctx, int(id))
		},
		rollup: func() error { return entcounter.RollupPass(ctx, r.src) },
		moveToSlots: func() error {
			_, err := entcounter.MoveToSlots(ctx, r.src)
			return err
		},
		compact: func() error { return errOf(entcounter.CompactPass(ctx, r.src)) },
	}
}

func (o entORM) legacyRow(t testing.TB, value int64) int64 {
	t.Helper()
	must(t, o.version(t, "plain").migrate())
	must(t, o.db().Exec("INSERT INTO reels (title, plays) VALUES ('old', ?)", value).Error)
	return rawInt(t, o.db(), "SELECT MAX(id) FROM reels")
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
func openReels(t testing.TB, e *env, v string) reelVersion {
	t.Helper()
	drv := entDriver(t, e, 4, func(string) {})
	switch v {
	case "sum16":
		c := sum16.NewClient(sum16.Driver(drv))
		return reelVersion{c,
			func(ctx context.Context) error {
				return oneMigrationAtATime(func() error { return c.Schema.Create(ctx, entcounter.WithCounters(c)) })
			},
			func(ctx context.Context, id int, n int64) error { return c.Reel.UpdateOneID(id).AddPlays(n).Exec(ctx) },
			func(ctx context.Context, id int) (int64, error) { r, err := c.Reel.Get(ctx, id); return plays(r, err) }}
	case "rollup":
		c := rollup.NewClient(rollup.Driver(drv))
		return reelVersion{c,
			func(ctx context.Context) error {
				return oneMigrationAtATime(func() error { return c.Schema.Create(ctx, entcounter.WithCounters(c)) })
			},
			func(ctx context.Context, id int, n int64) error { return c.Reel.UpdateOneID(id).AddPlays(n).Exec(ctx) },
			func(ctx context.Context, id int) (int64, error) { r, err := c.Reel.Get(ctx, id); return plays(r, err) }}
	case "deltas":
		c := deltas.NewClient(deltas.Driver(drv))
		return reelVersion{c,
			func(ctx context.Context) error {
				return oneMigrationAtATime(func() error { return c.Schema.Create(ctx, entcounter.WithCounters(c)) })
			},
			func(ctx context.Context, id int, n int64) error { return c.Reel.UpdateOneID(id).AddPlays(n).Exec(ctx) },
			func(ctx context.Context, id int) (int64, error) { r, err := c.Reel.Get(ctx, id); return plays(r, err) }}
	case "sum64":
		c := sum64.NewClient(sum64.Driver(drv))
		return reelVersion{c,
			func(ctx context.Context) error {
				return oneMigrationAtATime(func() error { return c.Schema.Create(ctx, entcounter.WithCounters(c)) })
			},
			func(ctx context.Context, id int, n int64) error { return c.Reel.UpdateOneID(id).AddPlays(n).Exec(ctx) },
			func(ctx context.Context, id int) (int64, error) { r, err := c.Reel.Get(ctx, id); return plays(r, err) }}
	case "plain":
		c := plain.NewClient(plain.Driver(drv))
		return reelVersion{c,
			func(ctx context.Context) error {
				return oneMigrationAtATime(func() error { return c.Schema.Create(ctx, entcounter.WithCounters(c)) })
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
