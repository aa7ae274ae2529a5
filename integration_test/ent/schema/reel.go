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

// Hooks of Reel: a schema hook that adds to the counter (an update titled
// "encore" is a play). ent runs it after the counter mixin's hooks, which
// cannot see what it adds: the write fails, saying to register such a hook
// with client.Reel.Use.
func (Reel) Hooks() []ent.Hook { return []ent.Hook{Encore} }

// Encore adds a play to an update that sets the title "encore".
func Encore(next ent.Mutator) ent.Mutator {
	return ent.MutateFunc(func(ctx context.Context, m ent.Mutation) (ent.Value, error) {
		if v, ok := m.Field("title"); ok && v == "encore" && m.Op().Is(ent.OpUpdateOne) {
			if err := m.AddField("plays", int64(1)); err != nil {
				return nil, err
			}
		}
		return next.Mutate(ctx, m)
	})
}

// ReelPlaysSlot is the slot table of Reel.plays.
type ReelPlaysSlot struct{ ent.Schema }

// Mixin of ReelPlaysSlot.
func (ReelPlaysSlot) Mixin() []ent.Mixin { return []ent.Mixin{entcounter.SlotsOf(Reel.Type, "plays")} }
