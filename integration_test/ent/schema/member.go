package schema

import (
	"entgo.io/ent"
	"entgo.io/ent/schema/edge"
	"entgo.io/ent/schema/field"
	"github.com/google/uuid"

	"github.com/hotcounter/hotcounter/entcounter"
)

// Member has a UUID id, as many ent projects declare it, and a counter of
// each kind keyed by it: a sum, a rollup, guarded stock, and counts of its
// notes kept by triggers and by hooks. Its slot tables are generated (no
// SlotsOf); Badge declares one with SlotsOf. GORM's UUIDMember, UUIDNote
// and UUIDPin (integration_test/uuid_keys_test.go) map the same tables.
type Member struct{ ent.Schema }

// Fields of Member.
func (Member) Fields() []ent.Field {
	return []ent.Field{
		field.UUID("id", uuid.UUID{}).Default(uuid.New),
		field.String("name").Default(""),
	}
}

// Edges of Member.
func (Member) Edges() []ent.Edge {
	return []ent.Edge{
		edge.To("notes", MemberNote.Type),
		edge.To("pins", Pin.Type),
	}
}

// Mixin of Member.
func (Member) Mixin() []ent.Mixin {
	return []ent.Mixin{
		entcounter.Counter("likes"),
		entcounter.Counter("views", entcounter.Rollup()),
		entcounter.Counter("credits", entcounter.Guarded()),
		entcounter.Counter("note_count", entcounter.Counts("notes")),
		entcounter.Counter("pin_count", entcounter.Counts("pins"), entcounter.ByHooks()),
	}
}

// MemberNote is a member's note, counted by triggers. Its id is a UUID too.
type MemberNote struct{ ent.Schema }

// Fields of MemberNote.
func (MemberNote) Fields() []ent.Field {
	return []ent.Field{
		field.UUID("id", uuid.UUID{}).Default(uuid.New),
		field.UUID("member_id", uuid.UUID{}),
	}
}

// Edges of MemberNote.
func (MemberNote) Edges() []ent.Edge {
	return []ent.Edge{edge.From("member", Member.Type).Ref("notes").Field("member_id").Unique().Required()}
}

// Pin is a member's pin, counted by hooks; its id is ent's integer.
type Pin struct{ ent.Schema }

// Fields of Pin.
func (Pin) Fields() []ent.Field { return []ent.Field{field.UUID("member_id", uuid.UUID{})} }

// Edges of Pin.
func (Pin) Edges() []ent.Edge {
	return []ent.Edge{edge.From("member", Member.Type).Ref("pins").Field("member_id").Unique().Required()}
}

// Badge has a UUID id and a slot table declared with SlotsOf.
type Badge struct{ ent.Schema }

// Fields of Badge.
func (Badge) Fields() []ent.Field {
	return []ent.Field{field.UUID("id", uuid.UUID{}).Default(uuid.New)}
}

// Mixin of Badge.
func (Badge) Mixin() []ent.Mixin { return []ent.Mixin{entcounter.Counter("awards")} }

// BadgeAwardsSlot is the slot table of Badge.awards.
type BadgeAwardsSlot struct{ ent.Schema }

// Mixin of BadgeAwardsSlot.
func (BadgeAwardsSlot) Mixin() []ent.Mixin {
	return []ent.Mixin{entcounter.SlotsOf(Badge.Type, "awards")}
}
