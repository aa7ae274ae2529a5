package integration_test

import (
	stdsql "database/sql"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gorm.io/gorm"
)

// NaiveConversation and NaiveLabel count each other the classic way: a
// row trigger on their join table updates the label's column in place.
type NaiveConversation struct {
	ID      uint
	Subject string
	Labels  []NaiveLabel `gorm:"many2many:naive_conversation_labels;constraint:OnDelete:CASCADE"`
}

// NaiveLabel holds its count in a column.
type NaiveLabel struct {
	ID                uint
	Name              string
	ConversationCount int64
}

// BenchmarkSharedLabels: the Chatwoot shape on PostgreSQL. 24 writers,
// each changing the label set of its own conversation in a READ COMMITTED
// transaction (detach the labels dropped, attach the new ones, drawn from
// 8 shared labels in a shuffled order), a transaction that fails on a
// deadlock retried until it commits. ns/op is wall time per label-set
// change; p50-ms and p99-ms the latency of one change including its
// retries; deadlocks/op the retries. classic-trigger: a row trigger on
// the join table updating the label's column; counts: counts= on both
// sides.
func BenchmarkSharedLabels(b *testing.B) { benchSharedLabels(b, pg) }

// BenchmarkSharedLabelsMariaDB is BenchmarkSharedLabels on MariaDB.
func BenchmarkSharedLabelsMariaDB(b *testing.B) { benchSharedLabels(b, my) }

func benchSharedLabels(b *testing.B, kind dbKind) {
	const writers, shared = 24, 8
	db := openBenchOn(b, kind)
	if err := db.AutoMigrate(&NaiveConversation{}, &NaiveLabel{}, &Conversation{}, &Label{}); err != nil {
		b.Fatal(err)
	}
	classic := []string{
		`CREATE FUNCTION naive_label_ins() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
			UPDATE naive_labels SET conversation_count = conversation_count + 1 WHERE id = NEW.naive_label_id; RETURN NULL; END $$`,
		`CREATE FUNCTION naive_label_del() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
			UPDATE naive_labels SET conversation_count = conversation_count - 1 WHERE id = OLD.naive_label_id; RETURN NULL; END $$`,
		`CREATE TRIGGER naive_label_ins AFTER INSERT ON naive_conversation_labels FOR EACH ROW EXECUTE FUNCTION naive_label_ins()`,
		`CREATE TRIGGER naive_label_del AFTER DELETE ON naive_conversation_labels FOR EACH ROW EXECUTE FUNCTION naive_label_del()`,
	}
	if kind == my {
		classic = []string{
			`CREATE TRIGGER naive_label_ins AFTER INSERT ON naive_conversation_labels FOR EACH ROW
				UPDATE naive_labels SET conversation_count = conversation_count + 1 WHERE id = NEW.naive_label_id`,
			`CREATE TRIGGER naive_label_del AFTER DELETE ON naive_conversation_labels FOR EACH ROW
				UPDATE naive_labels SET conversation_count = conversation_count - 1 WHERE id = OLD.naive_label_id`,
		}
	}
	for _, stmt := range classic {
		if err := db.Exec(stmt).Error; err != nil {
			b.Fatal(err)
		}
	}
	naiveConvs, naiveLabels := make([]NaiveConversation, writers), make([]NaiveLabel, shared)
	convs, labels := make([]Conversation, writers), make([]Label, shared)
	for i := range convs {
		convs[i].Subject, naiveConvs[i].Subject = "c", "c"
	}
	for i := range labels {
		labels[i].Name, naiveLabels[i].Name = "l", "l"
	}
	for _, v := range []any{&naiveConvs, &naiveLabels, &convs, &labels} {
		if err := db.Create(v).Error; err != nil {
			b.Fatal(err)
		}
	}
	naiveLabelIDs, labelIDs := make([]uint, shared), make([]uint, shared)
	for i := range shared {
		naiveLabelIDs[i], labelIDs[i] = naiveLabels[i].ID, labels[i].ID
	}
	// change makes conversation w's labels want, from have.
	type change func(tx *gorm.DB, w int, add, drop []uint) error
	run := func(name string, ids []uint, fn change) {
		b.Run(name, func(b *testing.B) {
			var next, deadlocks atomic.Int64
			var mu sync.Mutex
			var lat []time.Duration
			b.SetParallelism((writers + 1) / 2)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				w := int(next.Add(1)-1) % writers
				r := rand.New(rand.NewPCG(uint64(w), 11))
				var have []uint
				var mine []time.Duration
				for pb.Next() {
					pick := slices.Clone(ids)
					r.Shuffle(len(pick), func(i, j int) { pick[i], pick[j] = pick[j], pick[i] })
					want := pick[:2+r.IntN(4)]
					add, drop := withoutIDs(want, have), withoutIDs(have, want)
					start := time.Now()
					for {
						err := db.Transaction(func(tx *gorm.DB) error { return fn(tx, w, add, drop) },
							&stdsql.TxOptions{Isolation: stdsql.LevelReadCommitted})
						if err == nil {
							break
						}
						if !isDeadlock(err) {
							b.Error(err)
							return
						}
						deadlocks.Add(1)
					}
					mine = append(mine, time.Since(start))
					have = want
				}
				mu.Lock()
				lat = append(lat, mine...)
				mu.Unlock()
			})
			b.StopTimer()
			slices.Sort(lat)
			if len(lat) > 0 {
				b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
				b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
			}
			b.ReportMetric(float64(deadlocks.Load())/float64(b.N), "deadlocks/op")
		})
	}
	run("classic-trigger", naiveLabelIDs, func(tx *gorm.DB, w int, add, drop []uint) error {
		a := func() *gorm.Association { return tx.Model(&naiveConvs[w]).Omit("Labels.*").Association("Labels") }
		if len(drop) > 0 {
			if err := a().Delete(naiveLabelRows(drop)); err != nil {
				return err
			}
		}
		if len(add) == 0 {
			return nil
		}
		return a().Append(naiveLabelRows(add))
	})
	run("counts", labelIDs, func(tx *gorm.DB, w int, add, drop []uint) error {
		a := func() *gorm.Association { return tx.Model(&convs[w]).Omit("Labels.*").Association("Labels") }
		if len(drop) > 0 {
			if err := a().Delete(labelRowsOf(drop)); err != nil {
				return err
			}
		}
		if len(add) == 0 {
			return nil
		}
		return a().Append(labelRowsOf(add))
	})
}

func withoutIDs(a, b []uint) []uint {
	var out []uint
	for _, id := range a {
		if !slices.Contains(b, id) {
			out = append(out, id)
		}
	}
	return out
}

func naiveLabelRows(ids []uint) []NaiveLabel {
	out := make([]NaiveLabel, len(ids))
	for i, id := range ids {
		out[i].ID = id
	}
	return out
}

func labelRowsOf(ids []uint) []Label {
	out := make([]Label, len(ids))
	for i, id := range ids {
		out[i].ID = id
	}
	return out
}
