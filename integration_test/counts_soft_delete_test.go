package integration_test

import (
	"context"
	"testing"

	"gorm.io/gorm"

	"github.com/hotcounter/hotcounter/entcounter"
	"github.com/hotcounter/hotcounter/integration_test/entprivacy"
	"github.com/hotcounter/hotcounter/integration_test/entprivacy/schema/mixin"
)

// SoftThread is entprivacy's Thread as a GORM model: its replies counted
// by triggers and by hooks, replies deleted softly (gorm.DeletedAt).
type SoftThread struct {
	ID               uint
	ReplyCount       int64 `gorm:"counter:counts=SoftReplies"`
	HookedReplyCount int64 `gorm:"counter:counts=SoftReplies,hooks"`
	SoftReplies      []SoftReply
}

// SoftReply is a reply deleted softly.
type SoftReply struct {
	ID           uint
	SoftThreadID uint
	DeletedAt    gorm.DeletedAt
}

// softThreads is what the soft-delete test does with threads and replies,
// in either ORM, each in its usual way.
type softThreads interface {
	thread(t *testing.T) int
	reply(t *testing.T, thread int) int
	softDelete(t *testing.T, reply int) // the ORM's ordinary delete
	restore(t *testing.T, reply int)
	hardDelete(t *testing.T, reply int) // of a row, deleted softly or not
	// counts returns the thread's two counts as loaded, and how many
	// replies the ORM's ordinary query of them returns.
	counts(t *testing.T, thread int) (triggers, hooks, visible int64)
}

type gormThreads struct{ db *gorm.DB }

func (g gormThreads) thread(t *testing.T) int {
	th := SoftThread{}
	must(t, g.db.Create(&th).Error)
	return int(th.ID)
}

func (g gormThreads) reply(t *testing.T, thread int) int {
	r := SoftReply{SoftThreadID: uint(thread)}
	must(t, g.db.Create(&r).Error)
	return int(r.ID)
}

func (g gormThreads) softDelete(t *testing.T, reply int) {
	must(t, g.db.Delete(&SoftReply{ID: uint(reply)}).Error)
}

func (g gormThreads) restore(t *testing.T, reply int) {
	must(t, g.db.Unscoped().Model(&SoftReply{ID: uint(reply)}).Update("deleted_at", nil).Error)
}

func (g gormThreads) hardDelete(t *testing.T, reply int) {
	must(t, g.db.Unscoped().Delete(&SoftReply{ID: uint(reply)}).Error)
}

func (g gormThreads) counts(t *testing.T, thread int) (int64, int64, int64) {
	var th SoftThread
	must(t, g.db.Preload("SoftReplies").First(&th, thread).Error)
	return th.ReplyCount, th.HookedReplyCount, int64(len(th.SoftReplies))
}

type entThreads struct{ c *entprivacy.Client }

// tx runs fn in a transaction: counts kept by hooks are written in the
// caller's.
func (w entThreads) tx(t *testing.T, ctx context.Context, fn func(tx *entprivacy.Tx) error) {
	t.Helper()
	tx, err := w.c.Tx(ctx)
	must(t, err)
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		t.Fatal(err)
	}
	must(t, tx.Commit())
}

func (w entThreads) thread(t *testing.T) int {
	return w.c.Thread.Create().SaveX(context.Background()).ID
}

func (w entThreads) reply(t *testing.T, thread int) (id int) {
	w.tx(t, context.Background(), func(tx *entprivacy.Tx) error {
		r, err := tx.Reply.Create().SetThreadID(thread).Save(context.Background())
		if err == nil {
			id = r.ID
		}
		return err
	})
	return id
}

func (w entThreads) softDelete(t *testing.T, reply int) {
	ctx := context.Background()
	w.tx(t, ctx, func(tx *entprivacy.Tx) error { return tx.Reply.DeleteOneID(reply).Exec(ctx) })
}

func (w entThreads) restore(t *testing.T, reply int) {
	ctx := mixin.SkipSoftDelete(context.Background())
	w.tx(t, ctx, func(tx *entprivacy.Tx) error { return tx.Reply.UpdateOneID(reply).ClearDeleteTime().Exec(ctx) })
}

func (w entThreads) hardDelete(t *testing.T, reply int) {
	ctx := mixin.SkipSoftDelete(context.Background())
	w.tx(t, ctx, func(tx *entprivacy.Tx) error { return tx.Reply.DeleteOneID(reply).Exec(ctx) })
}

func (w entThreads) counts(t *testing.T, thread int) (int64, int64, int64) {
	ctx := context.Background()
	th := w.c.Thread.GetX(ctx, thread)
	return th.ReplyCount, th.HookedReplyCount, int64(th.QueryReplies().CountX(ctx))
}

// TestSoftDeletedChildrenAreNotCounted: a count of children deleted softly
// (GORM's gorm.DeletedAt; ent's documented soft-delete mixin, recognised
// by its delete_time field) counts only the rows the ORM's ordinary query
// returns, kept by triggers and by hooks: a soft delete takes a row out, a
// restore puts it back, a hard delete of a soft-deleted row changes
// nothing and of a live one takes it out.
func TestSoftDeletedChildrenAreNotCounted(t *testing.T) {
	parallel(t)
	walk := func(t *testing.T, f softThreads) {
		th := f.thread(t)
		r := []int{f.reply(t, th), f.reply(t, th), f.reply(t, th)}
		check := func(step string, want int64) {
			t.Helper()
			trig, hooks, visible := f.counts(t, th)
			if trig != want || hooks != want || visible != want {
				t.Errorf("after %s: counted %d by triggers and %d by hooks, the ORM's query returns %d replies; want %d",
					step, trig, hooks, visible, want)
			}
		}
		check("three replies", 3)
		f.softDelete(t, r[0])
		check("a soft delete", 2)
		f.restore(t, r[0])
		check("a restore", 3)
		f.softDelete(t, r[1])
		f.hardDelete(t, r[1])
		check("a soft delete, then a hard delete of that row", 2)
		f.hardDelete(t, r[2])
		check("a hard delete of a live row", 1)
	}
	t.Run("gorm", func(t *testing.T) {
		eachDB(t, func(t *testing.T, e *env) {
			must(t, e.db.AutoMigrate(&SoftThread{}, &SoftReply{}))
			walk(t, gormThreads{db: e.db})
		})
	})
	t.Run("ent", func(t *testing.T) {
		eachDB(t, func(t *testing.T, e *env) {
			ctx := context.Background()
			client := entprivacy.NewClient(entprivacy.Driver(entDriverSending(e.kind, openPool(t, e, e.pool), func(string) {})))
			must(t, oneMigrationAtATime(func() error { return client.Schema.Create(ctx, entcounter.WithCounters(client)) }))
			walk(t, entThreads{c: client})
		})
	})
}
