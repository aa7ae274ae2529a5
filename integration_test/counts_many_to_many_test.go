package integration_test

import (
	"context"
	stdsql "database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/hotcounter/hotcounter/entcounter"
	"github.com/hotcounter/hotcounter/gormcounter"
	"github.com/hotcounter/hotcounter/integration_test/ent"
	"github.com/hotcounter/hotcounter/integration_test/ent/conversation"
	"github.com/hotcounter/hotcounter/integration_test/ent/hookedconversation"
	"github.com/hotcounter/hotcounter/integration_test/ent/hookedlabel"
	"github.com/hotcounter/hotcounter/integration_test/ent/label"
)

// Counts through a many-to-many relation: conversations count their labels
// and labels their conversations, both as rows of the join table
// conversation_labels, kept by triggers on it.

// Conversation counts its labels through the join table.
type Conversation struct {
	ID         uint
	Subject    string
	LabelCount int64   `gorm:"counter:counts=Labels"`
	Labels     []Label `gorm:"many2many:conversation_labels;constraint:OnDelete:CASCADE"`
}

// Label counts its conversations through the same join table.
type Label struct {
	ID                uint
	Name              string
	ConversationCount int64          `gorm:"counter:counts=Conversations"`
	Conversations     []Conversation `gorm:"many2many:conversation_labels;constraint:OnDelete:CASCADE"`
}

// labelScene is conversations and labels that count each other, through
// one ORM's many-to-many API: what a many-to-many behaviour is written
// against, once for both ORMs.
type labelScene interface {
	onEnv() *env
	// names returns the scene's tables and columns.
	names() labelNames
	// conversations and labels create n rows and return their ids.
	conversations(t testing.TB, n int) []int64
	labels(t testing.TB, n int) []int64
	// attach adds labels to a conversation, in tx (nil: none of its own);
	// attachFrom adds conversations to a label (the other side's setter).
	attach(tx any, conv int64, labels ...int64) error
	// attachExisting adds labels known to exist, the ORM's way of not
	// saving them again (GORM: Omit("Labels.*"), which skips the upsert of
	// the label rows that Append sends first, ON DUPLICATE KEY UPDATE on
	// MySQL and MariaDB, an exclusive lock on each label until commit).
	attachExisting(tx any, conv int64, labels ...int64) error
	attachFrom(label int64, convs ...int64) error
	// attachToEach adds label to each of convs in one call (GORM's
	// Association on a slice of models, ent's bulk Update).
	attachToEach(label int64, convs ...int64) error
	// detach removes labels from a conversation, in tx.
	detach(tx any, conv int64, labels ...int64) error
	// replace makes labels the conversation's only ones; clear removes
	// them all.
	replace(conv int64, labels ...int64) error
	clear(conv int64) error
	// createWith creates a conversation with labels and returns its id.
	createWith(t testing.TB, labels ...int64) int64
	// deleteConversation and deleteLabel delete a row, whose join rows go
	// by the foreign key's cascade.
	deleteConversation(id int64) error
	deleteLabel(id int64) error
	// inTx runs fn in a READ COMMITTED transaction, committing if it
	// returns nil.
	inTx(fn func(tx any) error) error
	// loaded returns the counts as the ORM loads them, by id.
	loaded(t testing.TB) (labelCounts, conversationCounts map[int64]int64)
	// recount runs the ORM's Recount of both counts and returns how many
	// parents it corrected.
	recount(t testing.TB) int64
}

// labelNames are the tables and columns of a label scene: conversations
// and labels whose counts triggers keep, or their twins whose counts hooks
// keep (hooked_...).
type labelNames struct {
	join, conv, label     string // the join table and its columns
	convSlots, labelSlots string // the slot tables
	convOwner, labelOwner string // their owner columns
}

func labelNamesOf(hooked bool) labelNames {
	p := ""
	if hooked {
		p = "hooked_"
	}
	return labelNames{
		join: p + "conversation_labels", conv: p + "conversation_id", label: p + "label_id",
		convSlots: p + "conversation_label_count_slots", labelSlots: p + "label_conversation_count_slots",
		convOwner: p + "conversation_id", labelOwner: p + "label_id",
	}
}

// HookedConversation and HookedLabel are Conversation and Label with
// their counts kept by hooks.
type HookedConversation struct {
	ID         uint
	Subject    string
	LabelCount int64         `gorm:"counter:counts=Labels,hooks"`
	Labels     []HookedLabel `gorm:"many2many:hooked_conversation_labels;constraint:OnDelete:CASCADE"`
}

// HookedLabel: see HookedConversation.
type HookedLabel struct {
	ID                uint
	Name              string
	ConversationCount int64                `gorm:"counter:counts=Conversations,hooks"`
	Conversations     []HookedConversation `gorm:"many2many:hooked_conversation_labels;constraint:OnDelete:CASCADE"`
}

// eachLabelScene runs fn on both ORMs, on the given databases, with the
// counts kept by triggers.
func eachLabelScene(t *testing.T, kinds []dbKind, fn func(t *testing.T, s labelScene)) {
	t.Helper()
	conformanceTest(t)
	eachLabelSceneAfter(t, kinds, nil, fn)
}

// eachLabelSceneEitherWay runs fn on both ORMs, on the given databases,
// with the counts kept by triggers and, apart, by hooks.
func eachLabelSceneEitherWay(t *testing.T, kinds []dbKind, fn func(t *testing.T, s labelScene)) {
	t.Helper()
	conformanceTest(t)
	parallel(t)
	t.Run("triggers", func(t *testing.T) { eachLabelScene(t, kinds, fn) })
	t.Run("hooks", func(t *testing.T) {
		parallel(t)
		t.Run("gorm", func(t *testing.T) {
			eachDB(t, func(t *testing.T, e *env) {
				must(t, e.db.AutoMigrate(&HookedConversation{}, &HookedLabel{}))
				fn(t, gormLabels{e: e, conv: reflect.TypeFor[HookedConversation](), label: reflect.TypeFor[HookedLabel]()})
			}, on(kinds...), pool(writersPool))
		})
		t.Run("ent", func(t *testing.T) {
			parallel(t)
			for _, k := range kinds {
				t.Run(string(k), func(t *testing.T) {
					e := openEnt(t, k, false, pool(writersPool))
					must(t, entMigrateOnly(context.Background(), e.client, []string{"hooked_conversations", "hooked_labels"}, entcounter.WithCounters(e.client)))
					fn(t, entHookedLabels{e})
				})
			}
		})
	})
}

// eachLabelSceneAfter is eachLabelScene, where an earlier version of the
// application, without the counts, created the tables and wrote what
// before writes: GORM's AutoMigrate of ConversationBefore and
// LabelBefore, or ent's migration without WithCounters (which leaves the
// count triggers out).
func eachLabelSceneAfter(t *testing.T, kinds []dbKind, before func(t testing.TB, db *gorm.DB), fn func(t *testing.T, s labelScene)) {
	t.Helper()
	conformanceTest(t)
	parallel(t)
	t.Run("gorm", func(t *testing.T) {
		eachDB(t, func(t *testing.T, e *env) {
			if before != nil {
				must(t, e.db.AutoMigrate(&ConversationBefore{}, &LabelBefore{}))
				before(t, e.db)
			}
			must(t, e.db.AutoMigrate(&Conversation{}, &Label{}))
			fn(t, gormLabels{e: e, conv: reflect.TypeFor[Conversation](), label: reflect.TypeFor[Label]()})
		}, on(kinds...), pool(writersPool))
	})
	t.Run("ent", func(t *testing.T) {
		parallel(t)
		for _, k := range kinds {
			t.Run(string(k), func(t *testing.T) {
				e := openEnt(t, k, before != nil, pool(writersPool), entTables("conversations", "labels"))
				if before != nil {
					before(t, e.db)
				}
				must(t, entMigrateOnly(context.Background(), e.client, e.entRoots, entcounter.WithCounters(e.client)))
				fn(t, entLabels{e})
			})
		}
	})
}

// checkLabelCounts fails t where a loaded count differs from COUNT(*) over
// the join table, and returns the join rows.
func checkLabelCounts(t testing.TB, s labelScene, when string) int64 {
	t.Helper()
	db, n := s.onEnv().db, s.names()
	want := func(col string) map[int64]int64 {
		rows, err := db.Raw("SELECT " + col + ", COUNT(*) FROM " + n.join + " GROUP BY " + col).Rows()
		must(t, err)
		defer rows.Close()
		out := map[int64]int64{}
		for rows.Next() {
			var id, n int64
			must(t, rows.Scan(&id, &n))
			out[id] = n
		}
		return out
	}
	byConv, byLabel := want(n.conv), want(n.label)
	labelCounts, convCounts := s.loaded(t)
	for id, got := range labelCounts {
		if got != byConv[id] {
			t.Errorf("%s: conversation %d: LabelCount %d, COUNT(*) %d", when, id, got, byConv[id])
		}
	}
	for id, got := range convCounts {
		if got != byLabel[id] {
			t.Errorf("%s: label %d: ConversationCount %d, COUNT(*) %d", when, id, got, byLabel[id])
		}
	}
	return rawInt(t, db, "SELECT COUNT(*) FROM "+n.join)
}

func TestManyToManyCountsFollowEveryWayJoinRowsComeAndGo(t *testing.T) {
	eachLabelSceneEitherWay(t, allKinds, func(t *testing.T, s labelScene) {
		convs, labels := s.conversations(t, 4), s.labels(t, 5)
		step := func(name string, err error) {
			t.Helper()
			must(t, err)
			checkLabelCounts(t, s, name)
		}
		step("attach", s.attach(nil, convs[0], labels[0], labels[1], labels[2]))
		step("attach again, one already there", s.attach(nil, convs[0], labels[2], labels[3]))
		step("attach from the other side", s.attachFrom(labels[4], convs[0], convs[1], convs[2]))
		step("detach", s.detach(nil, convs[0], labels[1]))
		step("replace", s.replace(convs[1], labels[0], labels[1]))
		created := s.createWith(t, labels[0], labels[3])
		checkLabelCounts(t, s, "create with labels")
		step("clear", s.clear(convs[0]))
		step("attach to each of several", s.attachToEach(labels[3], convs[2], convs[3]))
		db, n := s.onEnv().db, s.names()
		if n.join == "conversation_labels" { // triggers count raw SQL; hooks do not
			step("raw insert", db.Exec("INSERT INTO conversation_labels (conversation_id, label_id) VALUES (?, ?), (?, ?)", convs[3], labels[0], convs[3], labels[2]).Error)
			step("raw delete", db.Exec("DELETE FROM conversation_labels WHERE conversation_id = ? AND label_id = ?", convs[3], labels[2]).Error)
		} else {
			step("attach and detach", errors.Join(s.attach(nil, convs[3], labels[0], labels[2]), s.detach(nil, convs[3], labels[2])))
		}
		if n := checkLabelCounts(t, s, "before the deletes"); n == 0 {
			t.Fatal("no join rows left to delete")
		}
		labelCounts, convCounts := s.loaded(t)
		if labelCounts[created] != 2 || convCounts[labels[0]] != 3 || convCounts[labels[3]] != 3 {
			t.Fatalf("created conversation counts %d labels (want 2), label 0 %d conversations (want 3), label 3 %d (want 3)",
				labelCounts[created], convCounts[labels[0]], convCounts[labels[3]])
		}
		step("delete a label", s.deleteLabel(labels[0]))
		step("delete a conversation", s.deleteConversation(convs[1]))
		_, convCounts = s.loaded(t)
		if convCounts[labels[4]] != 1 { // of conversations 0, 1 and 2, 0 was cleared and 1 replaced
			t.Fatalf("label 4 counts %d conversations, want 1", convCounts[labels[4]])
		}
	})
}

func TestManyToManyCountsRecountAndCountWhatExisted(t *testing.T) {
	eachLabelSceneEitherWay(t, allKinds, func(t *testing.T, s labelScene) {
		convs, labels := s.conversations(t, 6), s.labels(t, 3)
		for i, c := range convs {
			must(t, s.attach(nil, c, labels[:1+i%3]...))
		}
		db, n := s.onEnv().db, s.names()
		must(t, db.Exec("UPDATE "+n.convSlots+" SET n = n + 5 WHERE "+n.convOwner+" IN ?", convs[:2]).Error)
		must(t, db.Exec("UPDATE "+n.labelSlots+" SET n = n - 1 WHERE "+n.labelOwner+" = ?", labels[0]).Error)
		if n := s.recount(t); n != 3 {
			t.Fatalf("recount corrected %d parents, want 3 (two conversations, one label)", n)
		}
		checkLabelCounts(t, s, "after the recount")
	})
}

// ConversationBefore and LabelBefore are Conversation and Label as an
// earlier version of the application declared them, without counts.
type ConversationBefore struct {
	ID      uint
	Subject string        `gorm:"not null;default:''"`
	Labels  []LabelBefore `gorm:"many2many:conversation_labels;joinForeignKey:ConversationID;joinReferences:LabelID;constraint:OnDelete:CASCADE"`
}

func (ConversationBefore) TableName() string { return "conversations" }

// LabelBefore: see ConversationBefore.
type LabelBefore struct {
	ID   uint
	Name string `gorm:"not null;default:''"`
}

func (LabelBefore) TableName() string { return "labels" }

func TestManyToManyCountsCountTheJoinRowsThatExistedBeforeThem(t *testing.T) {
	earlier := func(t testing.TB, db *gorm.DB) {
		must(t, db.Exec("INSERT INTO labels (id, name) VALUES (1, 'a'), (2, 'b'), (3, 'c')").Error)
		must(t, db.Exec("INSERT INTO conversations (id, subject) VALUES (1, 'x'), (2, 'y'), (3, 'z')").Error)
		must(t, db.Exec("INSERT INTO conversation_labels (conversation_id, label_id) VALUES (1, 1), (1, 2), (1, 3), (2, 1), (2, 2), (3, 3)").Error)
	}
	eachLabelSceneAfter(t, allKinds, earlier, func(t *testing.T, s labelScene) {
		if n := checkLabelCounts(t, s, "after the migration that declared the counts"); n != 6 {
			t.Fatalf("%d join rows, want the 6 the earlier version wrote", n)
		}
		labelCounts, _ := s.loaded(t)
		if len(labelCounts) != 3 || labelCounts[1] != 3 {
			t.Fatalf("loaded label counts %v, want 3 conversations, the first with 3 labels", labelCounts)
		}
	})
}

func TestManyToManyCountsOfSharedLabelsNeverDeadlock(t *testing.T) {
	// Attaching shuffled sets of shared labels to different conversations
	// in transactions: each attach and detach writes a count of a label
	// that every writer writes too, as a classic counter cache on the
	// label row would, where it deadlocks.
	eachLabelSceneEitherWay(t, []dbKind{pg, my}, func(t *testing.T, s labelScene) {
		const writers, rounds, shared = 24, 8, 8
		convs, labels := s.conversations(t, writers), s.labels(t, shared)
		var wg sync.WaitGroup
		errs := make(chan error, writers*rounds)
		for w := 0; w < writers; w++ {
			wg.Add(1)
			go func(conv int64, seed uint64) {
				defer wg.Done()
				r := rand.New(rand.NewPCG(seed, 7))
				var have []int64
				for range rounds {
					pick := append([]int64(nil), labels...)
					r.Shuffle(len(pick), func(i, j int) { pick[i], pick[j] = pick[j], pick[i] })
					want := pick[:2+r.IntN(4)]
					// A label set changed as an application changes it: the
					// labels it no longer has detached, the new ones attached.
					add, drop := without(want, have), without(have, want)
					err := s.inTx(func(tx any) error {
						if len(drop) > 0 {
							if err := s.detach(tx, conv, drop...); err != nil {
								return err
							}
						}
						if len(add) == 0 {
							return nil
						}
						return s.attachExisting(tx, conv, add...)
					})
					if err != nil {
						errs <- fmt.Errorf("conversation %d: %w", conv, err)
						return
					}
					have = want
				}
			}(convs[w], uint64(w))
		}
		wg.Wait()
		close(errs)
		deadlocks := 0
		for err := range errs {
			if isDeadlock(err) {
				deadlocks++
			}
			t.Error(err)
		}
		if deadlocks > 0 {
			t.Errorf("%d deadlocks", deadlocks)
		}
		if n := checkLabelCounts(t, s, "after the storm"); n < writers*2 {
			t.Fatalf("%d join rows after the storm, want at least %d", n, writers*2)
		}
	})
}

func TestManyToManyCountsOfPairsAttachedAndDetachedByManyWritersAtOnceAreExact(t *testing.T) {
	// Writers attach and detach the same few pairs at once: a pair that
	// two transactions attach together exists once and counts once, and
	// one detached while another attaches it counts as it ends.
	eachLabelSceneEitherWay(t, []dbKind{pg, my}, func(t *testing.T, s labelScene) {
		const writers, rounds = 16, 12
		convs, labels := s.conversations(t, 2), s.labels(t, 2)
		var wg sync.WaitGroup
		var attached atomic.Int64
		errs := make(chan error, writers*rounds)
		for w := range writers {
			wg.Add(1)
			go func(seed uint64) {
				defer wg.Done()
				r := rand.New(rand.NewPCG(seed, 11))
				for range rounds {
					conv, label := convs[r.IntN(2)], labels[r.IntN(2)]
					attach := r.IntN(3) > 0
					err := s.inTx(func(tx any) error {
						if !attach {
							return s.detach(tx, conv, label)
						}
						return s.attachExisting(tx, conv, label)
					})
					switch {
					case err == nil && attach:
						attached.Add(1)
					case err != nil && !isDeadlock(err): // two writers of one pair may deadlock on its row: retried by an application
						errs <- err
					}
				}
			}(uint64(w))
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		if attached.Load() == 0 {
			t.Fatal("no attach committed: the writers wrote nothing to count")
		}
		checkLabelCounts(t, s, "after the writers")
	})
}

// without returns the ids of a that are not in b.
func without(a, b []int64) []int64 {
	var out []int64
	for _, id := range a {
		if !slices.Contains(b, id) {
			out = append(out, id)
		}
	}
	return out
}

// gormLabels is the label scene through GORM, over Conversation and Label
// or their hooked twins (conv and label).
type gormLabels struct {
	e           *env
	conv, label reflect.Type
}

func (s gormLabels) onEnv() *env { return s.e }

func (s gormLabels) names() labelNames {
	return labelNamesOf(s.conv != reflect.TypeFor[Conversation]())
}

// modelRows returns a slice of t (a pointer to it) whose rows have ids, or are
// n new rows named by field.
func modelRows(t reflect.Type, ids []int64, n int, field string) reflect.Value {
	p := reflect.New(reflect.SliceOf(t))
	p.Elem().Set(reflect.MakeSlice(reflect.SliceOf(t), max(n, len(ids)), max(n, len(ids))))
	for i := range p.Elem().Len() {
		if ids != nil {
			p.Elem().Index(i).FieldByName("ID").SetUint(uint64(ids[i]))
		} else {
			p.Elem().Index(i).FieldByName(field).SetString(fmt.Sprint(field[:1], i))
		}
	}
	return p
}

// modelRow returns a new *t with id.
func modelRow(t reflect.Type, id int64) any {
	v := reflect.New(t)
	v.Elem().FieldByName("ID").SetUint(uint64(id))
	return v.Interface()
}

// rowIDs returns the ids of a slice of rows (a pointer to it).
func rowIDs(p reflect.Value) []int64 {
	ids := make([]int64, p.Elem().Len())
	for i := range ids {
		ids[i] = int64(p.Elem().Index(i).FieldByName("ID").Uint())
	}
	return ids
}

func (s gormLabels) conversations(t testing.TB, n int) []int64 {
	cs := modelRows(s.conv, nil, n, "Subject")
	must(t, s.e.db.Create(cs.Interface()).Error)
	return rowIDs(cs)
}

func (s gormLabels) labels(t testing.TB, n int) []int64 {
	ls := modelRows(s.label, nil, n, "Name")
	must(t, s.e.db.Create(ls.Interface()).Error)
	return rowIDs(ls)
}

// db returns tx if it is a transaction of this scene, else the scene's.
func (s gormLabels) db(tx any) *gorm.DB {
	if db, ok := tx.(*gorm.DB); ok {
		return db
	}
	return s.e.db
}

func (s gormLabels) labelRows(ids []int64) any {
	return modelRows(s.label, ids, 0, "").Elem().Interface()
}

func (s gormLabels) attach(tx any, conv int64, labels ...int64) error {
	return s.db(tx).Model(modelRow(s.conv, conv)).Association("Labels").Append(s.labelRows(labels))
}

func (s gormLabels) attachExisting(tx any, conv int64, labels ...int64) error {
	return s.db(tx).Model(modelRow(s.conv, conv)).Omit("Labels.*").Association("Labels").Append(s.labelRows(labels))
}

func (s gormLabels) attachToEach(label int64, convs ...int64) error {
	each := make([]any, len(convs)) // one value per model, in order
	for i := range convs {
		each[i] = modelRow(s.label, label)
	}
	return s.e.db.Model(modelRows(s.conv, convs, 0, "").Interface()).Omit("Labels.*").Association("Labels").Append(each...)
}

func (s gormLabels) attachFrom(label int64, convs ...int64) error {
	return s.e.db.Model(modelRow(s.label, label)).Association("Conversations").Append(modelRows(s.conv, convs, 0, "").Elem().Interface())
}

func (s gormLabels) detach(tx any, conv int64, labels ...int64) error {
	return s.db(tx).Model(modelRow(s.conv, conv)).Association("Labels").Delete(s.labelRows(labels))
}

func (s gormLabels) replace(conv int64, labels ...int64) error {
	return s.e.db.Model(modelRow(s.conv, conv)).Association("Labels").Replace(s.labelRows(labels))
}

func (s gormLabels) clear(conv int64) error {
	return s.e.db.Model(modelRow(s.conv, conv)).Association("Labels").Clear()
}

func (s gormLabels) createWith(t testing.TB, labels ...int64) int64 {
	c := reflect.New(s.conv)
	c.Elem().FieldByName("Subject").SetString("new")
	c.Elem().FieldByName("Labels").Set(reflect.ValueOf(s.labelRows(labels)))
	must(t, s.e.db.Create(c.Interface()).Error)
	return int64(c.Elem().FieldByName("ID").Uint())
}

func (s gormLabels) deleteConversation(id int64) error {
	return s.e.db.Delete(reflect.New(s.conv).Interface(), id).Error
}

func (s gormLabels) deleteLabel(id int64) error {
	return s.e.db.Delete(reflect.New(s.label).Interface(), id).Error
}

func (s gormLabels) inTx(fn func(tx any) error) error {
	return s.e.db.Transaction(func(tx *gorm.DB) error { return fn(tx) }, &stdsql.TxOptions{Isolation: stdsql.LevelReadCommitted})
}

func (s gormLabels) loaded(t testing.TB) (map[int64]int64, map[int64]int64) {
	read := func(typ reflect.Type, field string) map[int64]int64 {
		p := reflect.New(reflect.SliceOf(typ))
		must(t, s.e.db.Find(p.Interface()).Error)
		out := map[int64]int64{}
		for i := range p.Elem().Len() {
			r := p.Elem().Index(i)
			out[int64(r.FieldByName("ID").Uint())] = r.FieldByName(field).Int()
		}
		return out
	}
	return read(s.conv, "LabelCount"), read(s.label, "ConversationCount")
}

func (s gormLabels) recount(t testing.TB) int64 {
	a, err := gormcounter.Recount(s.e.db.Model(reflect.New(s.conv).Interface()), "LabelCount")
	must(t, err)
	b, err := gormcounter.Recount(s.e.db.Model(reflect.New(s.label).Interface()), "ConversationCount")
	must(t, err)
	return a + b
}

type entLabels struct{ e *entEnv }

func (s entLabels) onEnv() *env { return s.e.env }

func (s entLabels) names() labelNames { return labelNamesOf(false) }

func (s entLabels) conversations(t testing.TB, n int) []int64 {
	bs := make([]*ent.ConversationCreate, n)
	for i := range bs {
		bs[i] = s.e.client.Conversation.Create().SetSubject(fmt.Sprint("c", i))
	}
	got, err := s.e.client.Conversation.CreateBulk(bs...).Save(context.Background())
	must(t, err)
	ids := make([]int64, n)
	for i, c := range got {
		ids[i] = int64(c.ID)
	}
	return ids
}

func (s entLabels) labels(t testing.TB, n int) []int64 {
	bs := make([]*ent.LabelCreate, n)
	for i := range bs {
		bs[i] = s.e.client.Label.Create().SetName(fmt.Sprint("l", i))
	}
	got, err := s.e.client.Label.CreateBulk(bs...).Save(context.Background())
	must(t, err)
	ids := make([]int64, n)
	for i, l := range got {
		ids[i] = int64(l.ID)
	}
	return ids
}

// client returns tx's client if it is a transaction of this scene.
func (s entLabels) client(tx any) *ent.Client {
	if tx, ok := tx.(*ent.Tx); ok {
		return tx.Client()
	}
	return s.e.client
}

func (s entLabels) attach(tx any, conv int64, labels ...int64) error {
	return s.client(tx).Conversation.UpdateOneID(int(conv)).AddLabelIDs(ints(labels)...).Exec(context.Background())
}

func (s entLabels) attachExisting(tx any, conv int64, labels ...int64) error {
	return s.attach(tx, conv, labels...)
}

func (s entLabels) attachToEach(label int64, convs ...int64) error {
	return s.e.client.Conversation.Update().Where(conversation.IDIn(ints(convs)...)).AddLabelIDs(int(label)).Exec(context.Background())
}

func (s entLabels) attachFrom(label int64, convs ...int64) error {
	return s.e.client.Label.UpdateOneID(int(label)).AddConversationIDs(ints(convs)...).Exec(context.Background())
}

func (s entLabels) detach(tx any, conv int64, labels ...int64) error {
	return s.client(tx).Conversation.UpdateOneID(int(conv)).RemoveLabelIDs(ints(labels)...).Exec(context.Background())
}

func (s entLabels) replace(conv int64, labels ...int64) error {
	return s.e.client.Conversation.UpdateOneID(int(conv)).ClearLabels().AddLabelIDs(ints(labels)...).Exec(context.Background())
}

func (s entLabels) clear(conv int64) error {
	return s.e.client.Conversation.UpdateOneID(int(conv)).ClearLabels().Exec(context.Background())
}

func (s entLabels) createWith(t testing.TB, labels ...int64) int64 {
	c, err := s.e.client.Conversation.Create().SetSubject("new").AddLabelIDs(ints(labels)...).Save(context.Background())
	must(t, err)
	return int64(c.ID)
}

func (s entLabels) deleteConversation(id int64) error {
	_, err := s.e.client.Conversation.Delete().Where(conversation.ID(int(id))).Exec(context.Background())
	return err
}

func (s entLabels) deleteLabel(id int64) error {
	_, err := s.e.client.Label.Delete().Where(label.ID(int(id))).Exec(context.Background())
	return err
}

func (s entLabels) inTx(fn func(tx any) error) error {
	ctx := context.Background()
	tx, err := s.e.client.BeginTx(ctx, &stdsql.TxOptions{Isolation: stdsql.LevelReadCommitted})
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		return errors.Join(err, tx.Rollback())
	}
	return tx.Commit()
}

func (s entLabels) loaded(t testing.TB) (map[int64]int64, map[int64]int64) {
	ctx := context.Background()
	cs, err := s.e.client.Conversation.Query().All(ctx)
	must(t, err)
	ls, err := s.e.client.Label.Query().All(ctx)
	must(t, err)
	lc, cc := map[int64]int64{}, map[int64]int64{}
	for _, c := range cs {
		lc[int64(c.ID)] = c.LabelCount
	}
	for _, l := range ls {
		cc[int64(l.ID)] = l.ConversationCount
	}
	return lc, cc
}

func (s entLabels) recount(t testing.TB) int64 {
	ctx := context.Background()
	a, err := entcounter.Recount(ctx, s.e.client, "Conversation", conversation.FieldLabelCount)
	must(t, err)
	b, err := entcounter.Recount(ctx, s.e.client, "Label", label.FieldConversationCount)
	must(t, err)
	return a + b
}

// entHookedLabels is the label scene through ent over HookedConversation
// and HookedLabel, whose counts hooks keep.
type entHookedLabels struct{ e *entEnv }

func (s entHookedLabels) onEnv() *env { return s.e.env }

func (s entHookedLabels) names() labelNames { return labelNamesOf(true) }

func (s entHookedLabels) conversations(t testing.TB, n int) []int64 {
	bs := make([]*ent.HookedConversationCreate, n)
	for i := range bs {
		bs[i] = s.e.client.HookedConversation.Create().SetSubject(fmt.Sprint("c", i))
	}
	got, err := s.e.client.HookedConversation.CreateBulk(bs...).Save(context.Background())
	must(t, err)
	ids := make([]int64, n)
	for i, c := range got {
		ids[i] = int64(c.ID)
	}
	return ids
}

func (s entHookedLabels) labels(t testing.TB, n int) []int64 {
	bs := make([]*ent.HookedLabelCreate, n)
	for i := range bs {
		bs[i] = s.e.client.HookedLabel.Create().SetName(fmt.Sprint("l", i))
	}
	got, err := s.e.client.HookedLabel.CreateBulk(bs...).Save(context.Background())
	must(t, err)
	ids := make([]int64, n)
	for i, l := range got {
		ids[i] = int64(l.ID)
	}
	return ids
}

// do runs fn on tx's client, or in a transaction of its own: ent's hooks
// keep a count only inside one (ErrNeedsTx).
func (s entHookedLabels) do(tx any, fn func(c *ent.Client) error) error {
	if tx, ok := tx.(*ent.Tx); ok {
		return fn(tx.Client())
	}
	return s.inTx(func(tx any) error { return fn(tx.(*ent.Tx).Client()) })
}

func (s entHookedLabels) attach(tx any, conv int64, labels ...int64) error {
	return s.do(tx, func(c *ent.Client) error {
		return c.HookedConversation.UpdateOneID(int(conv)).AddLabelIDs(ints(labels)...).Exec(context.Background())
	})
}

func (s entHookedLabels) attachExisting(tx any, conv int64, labels ...int64) error {
	return s.attach(tx, conv, labels...)
}

func (s entHookedLabels) attachToEach(label int64, convs ...int64) error {
	return s.do(nil, func(c *ent.Client) error {
		return c.HookedConversation.Update().Where(hookedconversation.IDIn(ints(convs)...)).AddLabelIDs(int(label)).Exec(context.Background())
	})
}

func (s entHookedLabels) attachFrom(label int64, convs ...int64) error {
	return s.do(nil, func(c *ent.Client) error {
		return c.HookedLabel.UpdateOneID(int(label)).AddConversationIDs(ints(convs)...).Exec(context.Background())
	})
}

func (s entHookedLabels) detach(tx any, conv int64, labels ...int64) error {
	return s.do(tx, func(c *ent.Client) error {
		return c.HookedConversation.UpdateOneID(int(conv)).RemoveLabelIDs(ints(labels)...).Exec(context.Background())
	})
}

func (s entHookedLabels) replace(conv int64, labels ...int64) error {
	return s.do(nil, func(c *ent.Client) error {
		return c.HookedConversation.UpdateOneID(int(conv)).ClearLabels().AddLabelIDs(ints(labels)...).Exec(context.Background())
	})
}

func (s entHookedLabels) clear(conv int64) error {
	return s.do(nil, func(c *ent.Client) error {
		return c.HookedConversation.UpdateOneID(int(conv)).ClearLabels().Exec(context.Background())
	})
}

func (s entHookedLabels) createWith(t testing.TB, labels ...int64) int64 {
	var id int
	must(t, s.do(nil, func(c *ent.Client) error {
		n, err := c.HookedConversation.Create().SetSubject("new").AddLabelIDs(ints(labels)...).Save(context.Background())
		if err == nil {
			id = n.ID
		}
		return err
	}))
	return int64(id)
}

func (s entHookedLabels) deleteConversation(id int64) error {
	return s.do(nil, func(c *ent.Client) error {
		_, err := c.HookedConversation.Delete().Where(hookedconversation.ID(int(id))).Exec(context.Background())
		return err
	})
}

func (s entHookedLabels) deleteLabel(id int64) error {
	return s.do(nil, func(c *ent.Client) error {
		_, err := c.HookedLabel.Delete().Where(hookedlabel.ID(int(id))).Exec(context.Background())
		return err
	})
}

func (s entHookedLabels) inTx(fn func(tx any) error) error {
	ctx := context.Background()
	tx, err := s.e.client.BeginTx(ctx, &stdsql.TxOptions{Isolation: stdsql.LevelReadCommitted})
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		return errors.Join(err, tx.Rollback())
	}
	return tx.Commit()
}

func (s entHookedLabels) loaded(t testing.TB) (map[int64]int64, map[int64]int64) {
	ctx := context.Background()
	cs, err := s.e.client.HookedConversation.Query().All(ctx)
	must(t, err)
	ls, err := s.e.client.HookedLabel.Query().All(ctx)
	must(t, err)
	lc, cc := map[int64]int64{}, map[int64]int64{}
	for _, c := range cs {
		lc[int64(c.ID)] = c.LabelCount
	}
	for _, l := range ls {
		cc[int64(l.ID)] = l.ConversationCount
	}
	return lc, cc
}

func (s entHookedLabels) recount(t testing.TB) int64 {
	ctx := context.Background()
	a, err := entcounter.Recount(ctx, s.e.client, "HookedConversation", hookedconversation.FieldLabelCount)
	must(t, err)
	b, err := entcounter.Recount(ctx, s.e.client, "HookedLabel", hookedlabel.FieldConversationCount)
	must(t, err)
	return a + b
}

// Project counts its contributors, and its admins, through a join model of its
// own (GORM's SetupJoinTable): rows of project_contributors, whose role the
// admins' count reads.
type Project struct {
	ID               uint
	Name             string
	ContributorCount int64         `gorm:"counter:counts=Contributors"`
	AdminCount       int64         `gorm:"counter:counts=Contributors,where=role = 'admin'"`
	Contributors     []Contributor `gorm:"many2many:project_contributors;constraint:OnDelete:CASCADE"`
}

// Contributor counts its projects.
type Contributor struct {
	ID           uint
	Name         string
	ProjectCount int64     `gorm:"counter:counts=Projects"`
	Projects     []Project `gorm:"many2many:project_contributors;constraint:OnDelete:CASCADE"`
}

// ProjectContributor is the join model: the pair, and the contributor's role.
type ProjectContributor struct {
	ProjectID     uint   `gorm:"primaryKey"`
	ContributorID uint   `gorm:"primaryKey"`
	Role          string `gorm:"size:20;not null;default:'contributor'"`
}

// HookedProject, HookedContributor and HookedProjectContributor are
// Project, Contributor and ProjectContributor with the counts kept by
// hooks.
type HookedProject struct {
	ID               uint
	Name             string
	ContributorCount int64               `gorm:"counter:counts=Contributors,hooks"`
	AdminCount       int64               `gorm:"counter:counts=Contributors,hooks,where=role = 'admin'"`
	Contributors     []HookedContributor `gorm:"many2many:hooked_project_contributors;constraint:OnDelete:CASCADE"`
}

// HookedContributor: see HookedProject.
type HookedContributor struct {
	ID           uint
	Name         string
	ProjectCount int64           `gorm:"counter:counts=Projects,hooks"`
	Projects     []HookedProject `gorm:"many2many:hooked_project_contributors;constraint:OnDelete:CASCADE"`
}

// HookedProjectContributor: see HookedProject.
type HookedProjectContributor struct {
	HookedProjectID     uint   `gorm:"primaryKey"`
	HookedContributorID uint   `gorm:"primaryKey"`
	Role                string `gorm:"size:20;not null;default:'contributor'"`
}

func TestManyToManyCountsThroughAJoinModelCountItsConditionAndDeletesOfAssociations(t *testing.T) {
	parallel(t)
	type scene struct {
		project, contributor, join reflect.Type
		prefix                     string // of the tables and columns
	}
	for name, sc := range map[string]scene{
		"triggers": {reflect.TypeFor[Project](), reflect.TypeFor[Contributor](), reflect.TypeFor[ProjectContributor](), ""},
		"hooks":    {reflect.TypeFor[HookedProject](), reflect.TypeFor[HookedContributor](), reflect.TypeFor[HookedProjectContributor](), "hooked_"},
	} {
		t.Run(name, func(t *testing.T) {
			eachDB(t, func(t *testing.T, e *env) {
				db, p := e.db, sc.prefix
				newOf := func(t reflect.Type) any { return reflect.New(t).Interface() }
				must(t, db.SetupJoinTable(newOf(sc.project), "Contributors", newOf(sc.join)))
				must(t, db.SetupJoinTable(newOf(sc.contributor), "Projects", newOf(sc.join)))
				must(t, db.AutoMigrate(newOf(sc.project), newOf(sc.contributor)))
				projects, contributors := modelRows(sc.project, nil, 3, "Name"), modelRows(sc.contributor, nil, 4, "Name")
				must(t, db.Create(projects.Interface()).Error)
				must(t, db.Create(contributors.Interface()).Error)
				pid, cid := rowIDs(projects), rowIDs(contributors)
				joinRow := func(project, contributor int64, role string) any {
					j := reflect.New(sc.join)
					j.Elem().Field(0).SetUint(uint64(project))
					j.Elem().Field(1).SetUint(uint64(contributor))
					j.Elem().FieldByName("Role").SetString(role)
					return j.Interface()
				}
				join, projectCol, contributorCol := p+"project_contributors", p+"project_id", p+"contributor_id"
				check := func(when string) {
					t.Helper()
					ps, cs := reflect.New(reflect.SliceOf(sc.project)), reflect.New(reflect.SliceOf(sc.contributor))
					must(t, db.Find(ps.Interface()).Error)
					must(t, db.Find(cs.Interface()).Error)
					for i := range ps.Elem().Len() {
						b := ps.Elem().Index(i)
						id := b.FieldByName("ID").Uint()
						all := rawInt(t, db, "SELECT COUNT(*) FROM "+join+" WHERE "+projectCol+" = ?", id)
						admins := rawInt(t, db, "SELECT COUNT(*) FROM "+join+" WHERE "+projectCol+" = ? AND role = 'admin'", id)
						if got, gotAdmins := b.FieldByName("ContributorCount").Int(), b.FieldByName("AdminCount").Int(); got != all || gotAdmins != admins {
							t.Errorf("%s: project %d: ContributorCount %d AdminCount %d, COUNT(*) %d and %d", when, id, got, gotAdmins, all, admins)
						}
					}
					for i := range cs.Elem().Len() {
						m := cs.Elem().Index(i)
						id := m.FieldByName("ID").Uint()
						if all := rawInt(t, db, "SELECT COUNT(*) FROM "+join+" WHERE "+contributorCol+" = ?", id); m.FieldByName("ProjectCount").Int() != all {
							t.Errorf("%s: contributor %d: ProjectCount %d, COUNT(*) %d", when, id, m.FieldByName("ProjectCount").Int(), all)
						}
					}
				}
				c := contributors.Elem()
				must(t, db.Model(projects.Elem().Index(0).Addr().Interface()).Association("Contributors").
					Append(c.Index(0).Addr().Interface(), c.Index(1).Addr().Interface(), c.Index(2).Addr().Interface()))
				must(t, db.Create(joinRow(pid[1], cid[0], "admin")).Error)
				must(t, db.Create(joinRow(pid[0], cid[3], "admin")).Error)
				must(t, db.Create(joinRow(pid[2], cid[3], "contributor")).Error)
				check("joined")
				must(t, db.Model(newOf(sc.join)).Where(projectCol+" = ? AND "+contributorCol+" = ?", pid[0], cid[1]).Update("role", "admin").Error)
				must(t, db.Model(newOf(sc.join)).Where(projectCol+" = ?", pid[1]).Update("role", "contributor").Error)
				check("roles changed")
				if name == "hooks" {
					// Hooks name a join row by its references: an update
					// that changes one is refused, naming the column.
					err := db.Model(newOf(sc.join)).Where(projectCol+" = ?", pid[2]).Update(contributorCol, cid[0]).Error
					if err == nil || !strings.Contains(err.Error(), contributorCol) {
						t.Fatalf("an update of %s under hooks = %v; want an error naming it", contributorCol, err)
					}
					check("a refused update of a reference")
				}
				must(t, db.Select(clause.Associations).Delete(projects.Elem().Index(0).Addr().Interface()).Error)
				check("a project deleted with its associations")
				left := reflect.New(sc.contributor)
				must(t, db.First(left.Interface(), cid[3]).Error)
				if n := left.Elem().FieldByName("ProjectCount").Int(); n != 1 {
					t.Fatalf("contributor 3 counts %d projects after one of its two was deleted, want 1", n)
				}
			})
		})
	}
}
