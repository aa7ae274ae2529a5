package schema

import (
	"context"

	"entgo.io/ent"
	"entgo.io/ent/schema/field"

	"github.com/hotcounter/hotcounter/entcounter"
)

// Reel counts plays over slots=auto: one slot row per reel until its
// writers contend.
type Reel struct{ ent.Schema }

// Fields of Reel.
func (Reel) Fields() []ent.Field {
	return []ent.Field{field.String("title").Default("")}
}

// Mixin of Reel.
func (Reel) Mixin() []ent.Mixin {
	return []ent.Mixin{entcounter.Counter("plays", entcounter.AutoSlots(0))}
}

// Hooks of Reel: a schema hook that writes the counter. ent runs it after
// the counter mixin's hooks; the write counts as if the mutation had
// carried it from the start.
func (Reel) Hooks() []ent.Hook { return []ent.Hook{Encore} }

// Encore makes a reel created with the title "premiere" start at 10 plays,
// and adds a play to every reel an update titles "encore".
func Encore(next ent.Mutator) ent.Mutator {
	return ent.MutateFunc(func(ctx context.Context, m ent.Mutation) (ent.Value, error) {
		v, ok := m.Field("title")
		var err error
		switch {
		case ok && v == "premiere" && m.Op().Is(ent.OpCreate):
			err = m.SetField("plays", int64(10))
		case ok && v == "encore" && m.Op().Is(ent.OpUpdateOne|ent.OpUpdate):
			err = m.AddField("plays", int64(1))
		}
		if err != nil {
			return nil, err
		}
		return next.Mutate(ctx, m)
	})
}

// ReelPlaysSlot is the slot table of Reel.plays.
type ReelPlaysSlot struct{ ent.Schema }

// Mixin of ReelPlaysSlot.
func (ReelPlaysSlot) Mixin() []ent.Mixin { return []ent.Mixin{entcounter.SlotsOf(Reel.Type, "plays")} }
