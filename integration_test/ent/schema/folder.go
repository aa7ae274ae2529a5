package schema

import (
	"entgo.io/ent"
	"entgo.io/ent/schema/edge"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/index"

	"github.com/hotcounter/hotcounter/entcounter"
)

// Folder keeps the running total of its files' sizes, kept by triggers.
type Folder struct{ ent.Schema }

// Fields of Folder.
func (Folder) Fields() []ent.Field {
	return []ent.Field{field.String("name").Default("")}
}

// Mixin of Folder.
func (Folder) Mixin() []ent.Mixin {
	return []ent.Mixin{entcounter.Counter("bytes", entcounter.Counts("files"), entcounter.Total("size"))}
}

// Edges of Folder.
func (Folder) Edges() []ent.Edge {
	return []ent.Edge{edge.To("files", File.Type)}
}

// File is what folders add up.
type File struct{ ent.Schema }

// Fields of File.
func (File) Fields() []ent.Field {
	return []ent.Field{
		field.Int64("size").Optional().Nillable(),
		field.Int("folder_id").Optional().Nillable(),
	}
}

// Edges of File.
func (File) Edges() []ent.Edge {
	return []ent.Edge{edge.From("folder", Folder.Type).Ref("files").Field("folder_id").Unique()}
}

// Indexes of File.
func (File) Indexes() []ent.Index {
	return []ent.Index{index.Fields("folder_id")}
}

// FolderBytesSlot is the slot table of Folder.bytes.
type FolderBytesSlot struct{ ent.Schema }

// Mixin of FolderBytesSlot.
func (FolderBytesSlot) Mixin() []ent.Mixin {
	return []ent.Mixin{entcounter.SlotsOf(Folder.Type, "bytes")}
}
