package integration_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/hotcounter/hotcounter/entcounter"
	"github.com/hotcounter/hotcounter/gormcounter"
	"github.com/hotcounter/hotcounter/integration_test/ent"
	"github.com/hotcounter/hotcounter/integration_test/ent/desk"
	"github.com/hotcounter/hotcounter/integration_test/ent/topic"
	"gorm.io/gorm"
)

// Counts of children whose rows hold every kind of column a real table
// has: long text, JSON, binary, decimals, microsecond times, generated
// columns, enums and sets (MariaDB), hundreds of bytes of short columns,
// nothing NOT NULL. A count reads the reference, the soft-delete column
// and the columns of its condition, which here names a TEXT column; MariaDB
// 10.11 crashed (signal 11) when a trigger copied such a row into a derived
// table. One child table is counted by triggers for one parent and by
// hooks for another, through GORM and through ent.

// Thread counts its replies with triggers; Desk counts the same replies
// with GORM hooks.
type Thread struct {
	ID         uint
	Name       string
	ReplyCount int64 `gorm:"counter:counts=Replies"`
	BCount     int64 `gorm:"counter:slots=4,counts=Replies,where=kind = 'b' AND note <> ''"`
	Replies    []Reply
}

type Desk struct {
	ID         uint
	Name       string
	ReplyCount int64 `gorm:"counter:counts=Replies,hooks"`
	BCount     int64 `gorm:"counter:slots=4,counts=Replies,hooks,where=kind = 'b' AND note <> ''"`
	Replies    []Reply
}

// Reply is the wide child: the columns of ent's Topic, and a generated one.
type Reply struct {
	ID        uint
	ThreadID  *uint      `gorm:"index"`
	DeskID    *uint      `gorm:"index"`
	Kind      *string    `gorm:"size:1"`
	Note      *string    `gorm:"type:text"`
	Body      *string    // LONGTEXT on MySQL and MariaDB
	Meta      *string    `gorm:"type:json"`
	Data      []byte     // LONGBLOB, bytea, BLOB
	Price     *float64   `gorm:"type:decimal(20,6)"`
	At        *time.Time `gorm:"precision:6"`
	NoteLen   *int64     `gorm:"->;type:bigint GENERATED ALWAYS AS (LENGTH(note)) STORED"`
	DeletedAt gorm.DeletedAt
}

// wideStep is one way the children change: GORM's and ent's calls for it.
// Children are named by index, parents by index of a pair (a trigger
// parent and a hook parent, which every child shares).
type wideFront interface {
	newParents(t *testing.T, n int) (triggers, hooks []int)
	create(t *testing.T, rows []wideRow) []int // one batch
	setBody(t *testing.T, id int, body string) // a column no count reads
	softDelete(t *testing.T, id int)
	restore(t *testing.T, id int)
	move(t *testing.T, id, triggerParent, hookParent int)
	setKind(t *testing.T, id int, kind string)
	bulkClearNote(t *testing.T, triggerParent, hookParent int) // a bulk update of a condition's column
	bulkDelete(t *testing.T, triggerParent, hookParent int)    // a bulk hard delete
	hardDelete(t *testing.T, id int)
	recountHooks(t *testing.T) // repairs what raw SQL did to the counts kept by hooks
	loaded(t *testing.T) (triggers, hooks map[int][2]int64)
}

// wideRow is a child to create: its two parents, and the columns the
// counts' condition reads ("" for NULL), and a body no count reads.
type wideRow struct {
	trigger, hook    int
	kind, note, body string
}

// wideTables names what a front writes: the child table and its two
// references.
type wideTables struct{ child, triggerRef, hookRef string }

// TestCountsOfWideChildrenFollowEveryWrite walks a wide child table
// through every write, by the ORM and by raw SQL, and compares both
// parents' counts with COUNT(*) after each: triggers on every step, hooks
// on every ORM step and after Recount of the raw ones.
func TestCountsOfWideChildrenFollowEveryWrite(t *testing.T) {
	parallel(t)
	fronts := map[string]func(t *testing.T, e *env) (wideFront, wideTables){
		"gorm": func(t *testing.T, e *env) (wideFront, wideTables) {
			must(t, e.db.AutoMigrate(&Thread{}, &Desk{}, &Reply{}))
			return gormWide{e.db}, wideTables{"replies", "thread_id", "desk_id"}
		},
		"ent": func(t *testing.T, e *env) (wideFront, wideTables) {
			ee := withEnt(t, e, false)
			must(t, entMigrateOnly(context.Background(), ee.client, []string{"forums", "desks", "topics"}, entcounter.WithCounters(ee.client)))
			return entWide{ee.client}, wideTables{"topics", "forum_id", "desk_id"}
		},
	}
	for _, orm := range []string{"gorm", "ent"} {
		t.Run(orm, func(t *testing.T) {
			eachDB(t, func(t *testing.T, e *env) {
				f, tb := fronts[orm](t, e)
				widen(t, e, tb.child)
				walkWideChildren(t, e, f, tb)
			})
		})
	}
}

// widen adds the columns each database has beyond the model's: on MariaDB
// an ENUM and a SET, MEDIUMTEXT and TINYTEXT, a virtual and a stored
// generated column over the TEXT column the condition reads, and 30
// VARCHAR(255) columns (about 30 KB of row); on PostgreSQL jsonb, an
// array, tsvector and a generated column; on SQLite a virtual generated
// column.
func widen(t *testing.T, e *env, child string) {
	t.Helper()
	var stmts []string
	switch e.kind {
	case my:
		alter := "ALTER TABLE " + child + " MODIFY kind ENUM('a', 'b') NULL, ADD tags SET('x', 'y') NULL, ADD summary MEDIUMTEXT NULL, " +
			"ADD tiny TINYTEXT NULL, ADD head VARCHAR(20) AS (LEFT(note, 20)) VIRTUAL, ADD note_chars BIGINT AS (CHAR_LENGTH(note)) PERSISTENT"
		for i := range 30 {
			alter += fmt.Sprintf(", ADD w%d VARCHAR(255) NULL", i)
		}
		stmts = append(stmts, alter)
	case pg:
		stmts = append(stmts, "ALTER TABLE "+child+" ADD doc jsonb, ADD arr integer[], ADD tsv tsvector, "+
			"ADD note_chars bigint GENERATED ALWAYS AS (char_length(note)) STORED")
	default:
		stmts = append(stmts, "ALTER TABLE "+child+" ADD COLUMN head TEXT GENERATED ALWAYS AS (substr(note, 1, 20)) VIRTUAL")
	}
	for _, s := range stmts {
		must(t, e.db.Exec(s).Error)
	}
}

// fillWide sets the columns widen added on every child, with raw SQL: an
// update of columns no count reads, fired on every row.
func fillWide(t *testing.T, e *env, child string) {
	t.Helper()
	switch e.kind {
	case my:
		set := "tags = 'x,y', summary = REPEAT('s', 70000), tiny = 't'"
		for i := range 30 {
			set += fmt.Sprintf(", w%d = REPEAT('w', 255)", i)
		}
		must(t, e.db.Exec("UPDATE "+child+" SET "+set).Error)
	case pg:
		must(t, e.db.Exec("UPDATE "+child+` SET doc = '{"a": [1, 2]}', arr = '{1,2,3}', tsv = to_tsvector('simple', 'a long note')`).Error)
	default:
		must(t, e.db.Exec("UPDATE "+child+" SET body = body || ''").Error)
	}
}

func walkWideChildren(t *testing.T, e *env, f wideFront, tb wideTables) {
	tp, hp := f.newParents(t, 4)
	long := strings.Repeat("a long body ", 90_000) // about 1 MB
	var rows []wideRow
	for i, p := range []int{0, 0, 1, 2, 3, 3} {
		rows = append(rows, wideRow{tp[p], hp[p], []string{"b", "a", "b", "b", "b", ""}[i],
			[]string{"note", "note", "note", "", "note", "note"}[i], []string{long, "", "body", "body", "", "body"}[i]})
	}
	ids := f.create(t, rows)
	check := func(step string, hooksToo bool) {
		t.Helper()
		trig, hook := f.loaded(t)
		bad := wideMismatches(t, e, tb.child, tb.triggerRef, tp, trig)
		if hooksToo {
			bad = append(bad, wideMismatches(t, e, tb.child, tb.hookRef, hp, hook)...)
		}
		checkCounts(t, step, bad)
	}
	check("a batch create", true)
	fillWide(t, e, tb.child)
	check("a raw update of columns no count reads", true)

	f.setBody(t, ids[0], long+"!")
	check("an update of a column no count reads", true)
	f.softDelete(t, ids[0])
	check("a soft delete", true)
	f.restore(t, ids[0])
	check("a restore", true)
	f.move(t, ids[0], tp[1], hp[1])
	check("a move", true)
	f.setKind(t, ids[2], "a")
	check("a change of the condition's enum column", true)
	f.bulkClearNote(t, tp[1], hp[1])
	check("a bulk update of the condition's text column", true)
	f.hardDelete(t, ids[3])
	check("a hard delete", true)
	f.bulkDelete(t, tp[3], hp[3])
	check("a bulk delete", true)

	// Raw SQL: triggers count it; hooks cannot see it, and Recount repairs.
	raw := []struct {
		sql  string
		args []any
	}{
		{"INSERT INTO " + tb.child + " (" + tb.triggerRef + ", " + tb.hookRef + ", kind, note, body) VALUES (?, ?, 'b', 'raw', ?)", []any{tp[2], hp[2], long}},
		{"UPDATE " + tb.child + " SET note = 'again', body = ? WHERE " + tb.triggerRef + " = ?", []any{long, tp[1]}},
		{"UPDATE " + tb.child + " SET " + tb.triggerRef + " = ?, " + tb.hookRef + " = ? WHERE " + tb.triggerRef + " = ?", []any{tp[0], hp[0], tp[2]}},
		{"UPDATE " + tb.child + " SET deleted_at = ? WHERE id = ?", []any{time.Now(), ids[1]}},
		{"DELETE FROM " + tb.child + " WHERE id = ?", []any{ids[4]}},
	}
	for _, r := range raw {
		must(t, e.db.Exec(r.sql, r.args...).Error)
		check("raw SQL: "+strings.Fields(r.sql)[0], false)
	}
	f.recountHooks(t)
	check("raw SQL and a Recount of the hooks' counts", true)
}

// wideMismatches compares the loaded (all, b) counts of the parents with
// COUNT(*) over the child rows not deleted.
func wideMismatches(t *testing.T, e *env, child, ref string, parents []int, got map[int][2]int64) []string {
	t.Helper()
	type row struct {
		P   int
		All int64
		B   int64
	}
	var rows []row
	must(t, e.db.Raw(`SELECT `+ref+` AS p, COUNT(*) AS "all", SUM(CASE WHEN kind = 'b' AND note <> '' THEN 1 ELSE 0 END) AS b
		FROM `+child+` WHERE deleted_at IS NULL AND `+ref+` IS NOT NULL GROUP BY `+ref).Scan(&rows).Error)
	want := map[int][2]int64{}
	for _, r := range rows {
		want[r.P] = [2]int64{r.All, r.B}
	}
	var bad []string
	for _, p := range parents {
		if got[p] != want[p] {
			bad = append(bad, fmt.Sprintf("%s %d: loaded %v, COUNT(*) %v", ref, p, got[p], want[p]))
		}
	}
	sort.Strings(bad)
	return bad
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// gormWide writes replies through GORM.
type gormWide struct{ db *gorm.DB }

func (g gormWide) newParents(t *testing.T, n int) (tp, hp []int) {
	ts, bs := make([]Thread, n), make([]Desk, n)
	must(t, g.db.Create(&ts).Error)
	must(t, g.db.Create(&bs).Error)
	for i := range n {
		tp, hp = append(tp, int(ts[i].ID)), append(hp, int(bs[i].ID))
	}
	return tp, hp
}

func (g gormWide) create(t *testing.T, rows []wideRow) []int {
	replies := make([]Reply, len(rows))
	price, at := 12.345678, time.Date(2026, 12, 1, 10, 0, 0, 123456000, time.UTC)
	for i, r := range rows {
		th, bo := uint(r.trigger), uint(r.hook)
		replies[i] = Reply{ThreadID: &th, DeskID: &bo, Kind: optional(r.kind), Note: optional(r.note), Body: optional(r.body),
			Meta: optional(`{"tags": ["x"]}`), Data: []byte{0, 1, 2, 255}, Price: &price, At: &at}
	}
	must(t, g.db.Create(&replies).Error)
	ids := make([]int, len(replies))
	for i, r := range replies {
		ids[i] = int(r.ID)
	}
	return ids
}

func (g gormWide) setBody(t *testing.T, id int, body string) {
	must(t, g.db.Model(&Reply{ID: uint(id)}).Update("body", body).Error)
}

func (g gormWide) softDelete(t *testing.T, id int) { must(t, g.db.Delete(&Reply{}, id).Error) }

func (g gormWide) restore(t *testing.T, id int) {
	must(t, g.db.Unscoped().Model(&Reply{}).Where("id = ?", id).Update("deleted_at", nil).Error)
}

func (g gormWide) move(t *testing.T, id, tp, hp int) {
	must(t, g.db.Model(&Reply{ID: uint(id)}).Updates(map[string]any{"thread_id": tp, "desk_id": hp}).Error)
}

func (g gormWide) setKind(t *testing.T, id int, kind string) {
	must(t, g.db.Model(&Reply{ID: uint(id)}).Update("kind", kind).Error)
}

func (g gormWide) bulkClearNote(t *testing.T, tp, hp int) {
	must(t, g.db.Model(&Reply{}).Where("thread_id = ? OR desk_id = ?", tp, hp).Update("note", "").Error)
}

func (g gormWide) bulkDelete(t *testing.T, tp, hp int) {
	must(t, g.db.Unscoped().Where("thread_id = ? OR desk_id = ?", tp, hp).Delete(&Reply{}).Error)
}

func (g gormWide) hardDelete(t *testing.T, id int) {
	must(t, g.db.Unscoped().Delete(&Reply{}, id).Error)
}

func (g gormWide) recountHooks(t *testing.T) {
	for _, f := range []string{"ReplyCount", "BCount"} {
		_, err := gormcounter.Recount(g.db.Model(&Desk{}), f)
		must(t, err)
	}
}

func (g gormWide) loaded(t *testing.T) (tc, hc map[int][2]int64) {
	var ts []Thread
	var bs []Desk
	must(t, g.db.Find(&ts).Error)
	must(t, g.db.Find(&bs).Error)
	tc, hc = map[int][2]int64{}, map[int][2]int64{}
	for _, x := range ts {
		tc[int(x.ID)] = [2]int64{x.ReplyCount, x.BCount}
	}
	for _, x := range bs {
		hc[int(x.ID)] = [2]int64{x.ReplyCount, x.BCount}
	}
	return tc, hc
}

// entWide writes topics through ent, in transactions: the desks' counts
// are kept by hooks, which need one.
type entWide struct{ c *ent.Client }

func (w entWide) tx(t *testing.T, fn func(tx *ent.Tx) error) {
	t.Helper()
	must(t, inTx(context.Background(), w.c, fn))
}

func (w entWide) newParents(t *testing.T, n int) (tp, hp []int) {
	ctx := context.Background()
	for range n {
		f, err := w.c.Forum.Create().Save(ctx)
		must(t, err)
		d, err := w.c.Desk.Create().Save(ctx)
		must(t, err)
		tp, hp = append(tp, f.ID), append(hp, d.ID)
	}
	return tp, hp
}

func (w entWide) create(t *testing.T, rows []wideRow) []int {
	var ids []int
	w.tx(t, func(tx *ent.Tx) error {
		bs := make([]*ent.TopicCreate, len(rows))
		for i, r := range rows {
			c := tx.Topic.Create().SetForumID(r.trigger).SetDeskID(r.hook).
				SetNillableNote(optional(r.note)).SetNillableBody(optional(r.body)).
				SetMeta(map[string]any{"tags": []string{"x"}}).SetData([]byte{0, 1, 2, 255}).
				SetPrice(12.345678).SetAt(time.Date(2026, 12, 1, 10, 0, 0, 123456000, time.UTC))
			if r.kind != "" {
				c.SetKind(topic.Kind(r.kind))
			}
			bs[i] = c
		}
		got, err := tx.Topic.CreateBulk(bs...).Save(context.Background())
		for _, x := range got {
			ids = append(ids, x.ID)
		}
		return err
	})
	return ids
}

func (w entWide) setBody(t *testing.T, id int, body string) {
	w.tx(t, func(tx *ent.Tx) error { return tx.Topic.UpdateOneID(id).SetBody(body).Exec(context.Background()) })
}

func (w entWide) softDelete(t *testing.T, id int) {
	w.tx(t, func(tx *ent.Tx) error {
		return tx.Topic.UpdateOneID(id).SetDeletedAt(time.Now()).Exec(context.Background())
	})
}

func (w entWide) restore(t *testing.T, id int) {
	w.tx(t, func(tx *ent.Tx) error { return tx.Topic.UpdateOneID(id).ClearDeletedAt().Exec(context.Background()) })
}

func (w entWide) move(t *testing.T, id, tp, hp int) {
	w.tx(t, func(tx *ent.Tx) error {
		return tx.Topic.UpdateOneID(id).SetForumID(tp).SetDeskID(hp).Exec(context.Background())
	})
}

func (w entWide) setKind(t *testing.T, id int, kind string) {
	w.tx(t, func(tx *ent.Tx) error {
		return tx.Topic.UpdateOneID(id).SetKind(topic.Kind(kind)).Exec(context.Background())
	})
}

func (w entWide) bulkClearNote(t *testing.T, tp, hp int) {
	w.tx(t, func(tx *ent.Tx) error {
		_, err := tx.Topic.Update().Where(topic.Or(topic.ForumID(tp), topic.DeskID(hp))).SetNote("").Save(context.Background())
		return err
	})
}

func (w entWide) bulkDelete(t *testing.T, tp, hp int) {
	w.tx(t, func(tx *ent.Tx) error {
		_, err := tx.Topic.Delete().Where(topic.Or(topic.ForumID(tp), topic.DeskID(hp))).Exec(context.Background())
		return err
	})
}

func (w entWide) hardDelete(t *testing.T, id int) {
	w.tx(t, func(tx *ent.Tx) error { return tx.Topic.DeleteOneID(id).Exec(context.Background()) })
}

func (w entWide) recountHooks(t *testing.T) {
	for _, f := range []string{desk.FieldTopicCount, desk.FieldBCount} {
		_, err := entcounter.Recount(context.Background(), w.c, "Desk", f)
		must(t, err)
	}
}

func (w entWide) loaded(t *testing.T) (tc, hc map[int][2]int64) {
	ctx := context.Background()
	fs, err := w.c.Forum.Query().All(ctx)
	must(t, err)
	ds, err := w.c.Desk.Query().All(ctx)
	must(t, err)
	tc, hc = map[int][2]int64{}, map[int][2]int64{}
	for _, x := range fs {
		tc[x.ID] = [2]int64{x.TopicCount, x.BCount}
	}
	for _, x := range ds {
		hc[x.ID] = [2]int64{x.TopicCount, x.BCount}
	}
	return tc, hc
}
