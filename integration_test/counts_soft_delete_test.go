package integration_test

import (
	"context"
	"errors"
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

// SoftLabel is entprivacy's Label as a GORM model: it labels replies that
// are deleted softly and counts them through the join table, by triggers
// and by hooks.
type SoftLabel struct {
	ID               uint
	ReplyCount       int64          `gorm:"counter:counts=LabeledReplies"`
	HookedReplyCount int64          `gorm:"counter:counts=LabeledReplies,hooks"`
	LabeledReplies   []LabeledReply `gorm:"many2many:soft_label_replies;constraint:OnDelete:CASCADE"`
}

// LabeledReply is a reply deleted softly that counts its labels by hooks.
type LabeledReply struct {
	ID               uint
	HookedLabelCount int64       `gorm:"counter:counts=SoftLabels,hooks"`
	SoftLabels       []SoftLabel `gorm:"many2many:soft_label_replies;constraint:OnDelete:CASCADE"`
	DeletedAt        gorm.DeletedAt
}

// softLabels is what the many-to-many soft-delete test does with labels
// and the replies they label, in either ORM.
type softLabels interface {
	label(t *testing.T) int
	reply(t *testing.T, label int) int // a reply that label labels
	softDelete(t *testing.T, reply int)
	restore(t *testing.T, reply int)
	hardDelete(t *testing.T, reply int)
	// counts returns the label's two counts of replies as loaded and its
	// join rows (deleted softly or not), and the reply's count of its
	// labels as loaded (-1 once the reply is gone) and the labels the
	// ORM's query of them returns.
	counts(t *testing.T, label, reply int) (triggers, hooks, joins, replyLabels, labelsOfReply int64)
}

type gormSoftLabels struct{ db *gorm.DB }

func (g gormSoftLabels) label(t *testing.T) int {
	l := SoftLabel{}
	must(t, g.db.Create(&l).Error)
	return int(l.ID)
}

func (g gormSoftLabels) reply(t *testing.T, label int) int {
	r := LabeledReply{SoftLabels: []SoftLabel{{ID: uint(label)}}}
	must(t, g.db.Omit("SoftLabels.*").Create(&r).Error)
	return int(r.ID)
}

func (g gormSoftLabels) softDelete(t *testing.T, reply int) {
	must(t, g.db.Delete(&LabeledReply{ID: uint(reply)}).Error)
}

func (g gormSoftLabels) restore(t *testing.T, reply int) {
	must(t, g.db.Unscoped().Model(&LabeledReply{ID: uint(reply)}).Update("deleted_at", nil).Error)
}

func (g gormSoftLabels) hardDelete(t *testing.T, reply int) {
	must(t, g.db.Unscoped().Delete(&LabeledReply{ID: uint(reply)}).Error)
}

func (g gormSoftLabels) counts(t *testing.T, label, reply int) (int64, int64, int64, int64, int64) {
	var l SoftLabel
	must(t, g.db.First(&l, label).Error)
	var joins int64
	must(t, g.db.Table("soft_label_replies").Where("soft_label_id = ?", label).Count(&joins).Error)
	var r LabeledReply
	err := g.db.Unscoped().Preload("SoftLabels").First(&r, reply).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return l.ReplyCount, l.HookedReplyCount, joins, -1, 0
	}
	must(t, err)
	return l.ReplyCount, l.HookedReplyCount, joins, r.HookedLabelCount, int64(len(r.SoftLabels))
}

type entSoftLabels struct{ entThreads }

func (w entSoftLabels) label(t *testing.T) int {
	return w.c.Label.Create().SaveX(context.Background()).ID
}

func (w entSoftLabels) reply(t *testing.T, label int) (id int) {
	thread := w.thread(t)
	w.tx(t, context.Background(), func(tx *entprivacy.Tx) error {
		r, err := tx.Reply.Create().SetThreadID(thread).AddLabelIDs(label).Save(context.Background())
		if err == nil {
			id = r.ID
		}
		return err
	})
	return id
}

func (w entSoftLabels) counts(t *testing.T, label, reply int) (int64, int64, int64, int64, int64) {
	ctx := mixin.SkipSoftDelete(context.Background())
	l := w.c.Label.GetX(ctx, label)
	joins := int64(l.QueryReplies().CountX(ctx))
	r, err := w.c.Reply.Get(ctx, reply)
	if entprivacy.IsNotFound(err) {
		return l.ReplyCount, l.HookedReplyCount, joins, -1, 0
	}
	must(t, err)
	return l.ReplyCount, l.HookedReplyCount, joins, r.HookedLabelCount, int64(r.QueryLabels().CountX(ctx))
}

// TestASoftDeleteKeepsItsManyToManyRowsAndTheirCounts: a soft delete of a
// row with many-to-many edges is an update; its join rows stay, and so do
// the counts through them, by triggers and by hooks, on both sides. A
// restore finds its labels again; a hard delete (of a live or a
// soft-deleted row) takes its join rows and their counts with it.
func TestASoftDeleteKeepsItsManyToManyRowsAndTheirCounts(t *testing.T) {
	parallel(t)
	walk := func(t *testing.T, f softLabels) {
		l := f.label(t)
		r := []int{f.reply(t, l), f.reply(t, l)}
		check := func(step string, reply int, want, wantReply int64) {
			t.Helper()
			trig, hooks, joins, replyLabels, labelsOfReply := f.counts(t, l, reply)
			if trig != want || hooks != want || joins != want {
				t.Errorf("after %s: the label counts %d replies by triggers and %d by hooks, and has %d join rows; want %d",
					step, trig, hooks, joins, want)
			}
			if replyLabels != wantReply || (wantReply >= 0 && labelsOfReply != wantReply) {
				t.Errorf("after %s: the reply counts %d labels by hooks and the ORM's query returns %d; want %d",
					step, replyLabels, labelsOfReply, wantReply)
			}
		}
		check("two labelled replies", r[0], 2, 1)
		f.softDelete(t, r[0])
		check("a soft delete", r[0], 2, 1)
		f.restore(t, r[0])
		check("a restore", r[0], 2, 1)
		f.hardDelete(t, r[0])
		check("a hard delete", r[0], 1, -1)
		f.softDelete(t, r[1])
		f.hardDelete(t, r[1])
		check("a soft delete, then a hard delete of that row", r[1], 0, -1)
	}
	t.Run("gorm", func(t *testing.T) {
		eachDB(t, func(t *testing.T, e *env) {
			must(t, e.db.AutoMigrate(&SoftLabel{}, &LabeledReply{}))
			walk(t, gormSoftLabels{db: e.db})
		})
	})
	t.Run("ent", func(t *testing.T) {
		eachDB(t, func(t *testing.T, e *env) {
			ctx := context.Background()
			client := entprivacy.NewClient(entprivacy.Driver(entDriverSending(e.kind, openPool(t, e, e.pool), func(string) {})))
			must(t, oneMigrationAtATime(func() error { return client.Schema.Create(ctx, entcounter.WithCounters(client)) }))
			walk(t, entSoftLabels{entThreads{c: client}})
		})
	})
}
