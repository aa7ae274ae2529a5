package integration_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/hotcounter/hotcounter"
	"github.com/hotcounter/hotcounter/entcounter"
	"github.com/hotcounter/hotcounter/gormcounter"
	"github.com/hotcounter/hotcounter/integration_test/ent"
	"github.com/hotcounter/hotcounter/integration_test/ent/member"
	"github.com/hotcounter/hotcounter/redisstore"
)

// UUIDMember is ent's Member (integration_test/ent/schema/member.go) as a
// GORM model, on the same tables: a uuid.UUID key and a counter of each
// kind keyed by it.
type UUIDMember struct {
	ID        uuid.UUID `gorm:"type:uuid;primaryKey"`
	Name      string
	Likes     int64      `gorm:"counter"`
	Views     int64      `gorm:"counter:rollup"`
	Credits   int64      `gorm:"counter:guarded"`
	NoteCount int64      `gorm:"counter:counts=Notes"`
	PinCount  int64      `gorm:"counter:counts=Pins,hooks"`
	Notes     []UUIDNote `gorm:"foreignKey:MemberID"`
	Pins      []UUIDPin  `gorm:"foreignKey:MemberID"`
}

// TableName is ent's Member's.
func (UUIDMember) TableName() string { return "members" }

// UUIDNote is a member's note, counted by triggers; its key is a UUID too.
type UUIDNote struct {
	ID       uuid.UUID `gorm:"type:uuid;primaryKey"`
	MemberID uuid.UUID `gorm:"type:uuid"`
}

// TableName is ent's MemberNote's.
func (UUIDNote) TableName() string { return "member_notes" }

// UUIDPin is a member's pin, counted by hooks.
type UUIDPin struct {
	ID       uint
	MemberID uuid.UUID `gorm:"type:uuid"`
}

// TableName is ent's Pin's.
func (UUIDPin) TableName() string { return "pins" }

// uuidMembers is what the UUID key test does with members, in either ORM.
type uuidMembers interface {
	create(t *testing.T) uuid.UUID
	add(id uuid.UUID, field string, delta int64) error
	take(id uuid.UUID, n int64) error
	note(t *testing.T, id uuid.UUID) (remove func())
	pin(t *testing.T, id uuid.UUID)
	rollup(t *testing.T)
	// buffered adds delta to likes of each of ids through a write-behind
	// buffer in Redis, and closes it.
	buffered(t *testing.T, ids []uuid.UUID, delta int64)
	// load returns likes, views, credits, note count and pin count of
	// each of ids, loaded together.
	load(t *testing.T, ids ...uuid.UUID) [][5]int64
}

type gormMembers struct{ e *env }

func (m gormMembers) create(t *testing.T) uuid.UUID {
	u := UUIDMember{ID: uuid.New()}
	must(t, m.e.db.Create(&u).Error)
	return u.ID
}

func (m gormMembers) add(id uuid.UUID, field string, delta int64) error {
	return gormcounter.Increment(m.e.db.Model(&UUIDMember{ID: id}), map[string]string{"likes": "Likes", "views": "Views", "credits": "Credits"}[field], delta).Error
}

func (m gormMembers) take(id uuid.UUID, n int64) error {
	return gormcounter.Take(m.e.db.Model(&UUIDMember{ID: id}), "Credits", n).Error
}

func (m gormMembers) note(t *testing.T, id uuid.UUID) func() {
	n := UUIDNote{ID: uuid.New(), MemberID: id}
	must(t, m.e.db.Create(&n).Error)
	return func() { must(t, m.e.db.Delete(&n).Error) }
}

func (m gormMembers) pin(t *testing.T, id uuid.UUID) {
	must(t, m.e.db.Create(&UUIDPin{MemberID: id}).Error)
}

func (m gormMembers) rollup(t *testing.T) { must(t, gormcounter.RollupPass(m.e.db, &UUIDMember{})) }

func (m gormMembers) buffered(t *testing.T, ids []uuid.UUID, delta int64) {
	rdb, prefix := redisFor(t)
	_, buf := redisBuffer(t, m.e, rdb, prefix, time.Hour)
	for _, id := range ids {
		must(t, buf.Increment(context.Background(), &UUIDMember{ID: id}, "Likes", delta))
	}
	must(t, buf.Close(context.Background()))
}

func (m gormMembers) load(t *testing.T, ids ...uuid.UUID) [][5]int64 {
	var got []UUIDMember
	must(t, m.e.db.Where("id IN ?", ids).Find(&got).Error)
	byID := map[uuid.UUID]UUIDMember{}
	for _, u := range got {
		byID[u.ID] = u
	}
	out := make([][5]int64, len(ids))
	for i, id := range ids {
		u := byID[id]
		out[i] = [5]int64{u.Likes, u.Views, u.Credits, u.NoteCount, u.PinCount}
	}
	return out
}

type entMembers struct{ c *ent.Client }

func (m entMembers) create(t *testing.T) uuid.UUID {
	u, err := m.c.Member.Create().Save(context.Background())
	must(t, err)
	return u.ID
}

func (m entMembers) add(id uuid.UUID, field string, delta int64) error {
	up := m.c.Member.UpdateOneID(id)
	switch field {
	case "likes":
		up.AddLikes(delta)
	case "views":
		up.AddViews(delta)
	case "credits":
		up.AddCredits(delta)
	}
	return up.Exec(context.Background())
}

func (m entMembers) take(id uuid.UUID, n int64) error {
	return m.c.Member.TakeCredits(context.Background(), id, n)
}

func (m entMembers) note(t *testing.T, id uuid.UUID) func() {
	n, err := m.c.MemberNote.Create().SetMemberID(id).Save(context.Background())
	must(t, err)
	return func() { must(t, m.c.MemberNote.DeleteOneID(n.ID).Exec(context.Background())) }
}

func (m entMembers) pin(t *testing.T, id uuid.UUID) {
	ctx := context.Background()
	tx, err := m.c.Tx(ctx) // a count kept by hooks is written in the caller's transaction
	must(t, err)
	must(t, tx.Pin.Create().SetMemberID(id).Exec(ctx))
	must(t, tx.Commit())
}

func (m entMembers) rollup(t *testing.T) { must(t, entcounter.RollupPass(context.Background(), m.c)) }

func (m entMembers) buffered(t *testing.T, ids []uuid.UUID, delta int64) {
	ctx := context.Background()
	rdb, prefix := redisFor(t)
	buf, err := entcounter.NewBuffer(ctx, m.c, hotcounter.BufferConfig{Interval: time.Hour,
		Store: redisstore.New(rdb, redisstore.Options{Prefix: prefix})})
	must(t, err)
	for _, id := range ids {
		must(t, m.c.Member.Buffered(buf).AddLikes(ctx, id, delta))
	}
	must(t, buf.Close(ctx))
}

func (m entMembers) load(t *testing.T, ids ...uuid.UUID) [][5]int64 {
	got, err := m.c.Member.Query().Where(member.IDIn(ids...)).All(context.Background())
	must(t, err)
	byID := map[uuid.UUID]*ent.Member{}
	for _, u := range got {
		byID[u.ID] = u
	}
	out := make([][5]int64, len(ids))
	for i, id := range ids {
		if u := byID[id]; u != nil {
			out[i] = [5]int64{u.Likes, u.Views, u.Credits, u.NoteCount, u.PinCount}
		}
	}
	return out
}

// TestCountersOnUUIDKeys: a model keyed by a UUID (GORM's uuid.UUID with
// type:uuid, ent's field.UUID id) has every kind of counter: concurrent
// increments of a sum counter add up exactly, a rollup counter folds, a
// guarded counter gives out exactly its stock to concurrent takes, counts
// kept by triggers and by hooks follow the child rows, and a write-behind
// buffer in Redis (whose keys travel as text) writes its adds; all read
// back by one load of several parents. In ent, a slot table declared with
// SlotsOf keys by the owner's UUID as a generated one does.
func TestCountersOnUUIDKeys(t *testing.T) {
	parallel(t)
	check := func(t *testing.T, m uuidMembers) {
		ids := []uuid.UUID{m.create(t), m.create(t), m.create(t)}
		const writers, each = 16, 15
		var next atomic.Int64
		done := hammer(t, writers, each, func() error {
			return m.add(ids[next.Add(1)%int64(len(ids))], "likes", 1)
		})
		must(t, m.add(ids[0], "views", 4))
		must(t, m.add(ids[0], "credits", 5))
		remove := m.note(t, ids[1])
		m.note(t, ids[1])
		m.note(t, ids[2])
		remove()
		m.pin(t, ids[2])
		m.rollup(t)
		var took, refused atomic.Int64
		var failed int
		var firstErr atomic.Value
		hammerCount(8, 1, func() error {
			err := m.take(ids[0], 1)
			switch {
			case err == nil:
				took.Add(1)
			case errors.Is(err, hotcounter.ErrInsufficient):
				refused.Add(1)
				return nil
			default:
				firstErr.CompareAndSwap(nil, err)
			}
			return err
		}, &failed)
		if failed > 0 {
			t.Fatalf("%d takes failed: %v", failed, firstErr.Load())
		}
		if took.Load() != 5 || refused.Load() != 3 {
			t.Errorf("8 takes of 1 from a stock of 5: %d took, %d refused, want 5 and 3", took.Load(), refused.Load())
		}
		m.buffered(t, ids[1:], 10)
		got := m.load(t, ids...)
		var likes int64
		for _, g := range got {
			likes += g[0]
		}
		if likes != done+20 || done != writers*each {
			t.Errorf("likes add up to %d after %d acknowledged increments and 20 buffered, want %d", likes, done, done+20)
		}
		if want := [5]int64{got[0][0], 4, 0, 0, 0}; got[0] != want {
			t.Errorf("member 0 loaded (likes, views, credits, notes, pins) %v, want %v", got[0], want)
		}
		if got[1][3] != 1 || got[2][3] != 1 || got[2][4] != 1 || got[1][4] != 0 {
			t.Errorf("note and pin counts %v %v, want notes 1 and 1, pins 0 and 1", got[1], got[2])
		}
	}
	t.Run("gorm", func(t *testing.T) {
		eachDB(t, func(t *testing.T, e *env) {
			must(t, e.db.AutoMigrate(&UUIDMember{}, &UUIDNote{}, &UUIDPin{}))
			check(t, gormMembers{e: e})
		})
	})
	t.Run("ent", func(t *testing.T) {
		eachDB(t, func(t *testing.T, e *env) {
			ee := withEnt(t, e, false)
			must(t, entMigrate(context.Background(), ee.client, entcounter.WithCounters(ee.client)))
			check(t, entMembers{c: ee.client})
			// A slot table declared with SlotsOf keys by the UUID too.
			ctx := context.Background()
			b, err := ee.client.Badge.Create().Save(ctx)
			must(t, err)
			for range 3 {
				must(t, ee.client.Badge.UpdateOne(b).AddAwards(2).Exec(ctx))
			}
			got, err := ee.client.Badge.Get(ctx, b.ID)
			must(t, err)
			if got.Awards != 6 {
				t.Errorf("a badge awarded 3 times 2 loads %d, want 6", got.Awards)
			}
		})
	})
}
