package entcounter

import (
	"fmt"

	"entgo.io/ent"
	"entgo.io/ent/dialect/entsql"
	"entgo.io/ent/entc/gen"
	"entgo.io/ent/entc/load"
	"entgo.io/ent/schema/field"

	"github.com/hotcounter/hotcounter/internal/countersql"
	"github.com/hotcounter/hotcounter/internal/spec"
)

// The slot (or delta) table schema of a counter is generated when the
// schema package declares none: the extension adds it to the graph before
// ent generates code, as SlotsOf (DeltasOf) would declare it, so one
// declaration of a counter is enough. A schema declared with SlotsOf is
// used as it is.

// withSlotSchemas returns g, or a graph of g's schemas and the slot and
// delta table schemas its counters lack.
func withSlotSchemas(g *gen.Graph) (*gen.Graph, error) {
	var extra []*load.Schema
	for _, n := range g.Nodes {
		for _, f := range counterFields(n) {
			a, _ := annotationOfField(f)
			if a.Err != "" || !n.HasOneFieldID() || hasSlotSchema(g, n, f.Name, a.Append) {
				continue
			}
			s, err := slotSchema(g, n, f.Name, a.Append)
			if err != nil {
				return nil, fmt.Errorf("entcounter: %s.%s: %w", n.Name, f.Name, err)
			}
			extra = append(extra, s)
		}
	}
	if len(extra) == 0 {
		return g, nil
	}
	return gen.NewGraph(g.Config, append(g.Schemas[:len(g.Schemas):len(g.Schemas)], extra...)...)
}

// hasSlotSchema reports whether g declares the slot (delta) table schema
// of n's counter field.
func hasSlotSchema(g *gen.Graph, n *gen.Type, field string, deltas bool) bool {
	for _, s := range g.Nodes {
		if sa, ok := slotsAnnotationOf(s); ok && sa.Owner == n.Name && sa.Field == field && sa.Deltas == deltas {
			return true
		}
	}
	return false
}

// slotSchema is the schema SlotsOf (DeltasOf) declares for n's counter
// field, named <Type><Field>Slot (Delta), as loaded from a schema package.
// Its value column's default is the database's (entsql.Default), not a Go
// default: a Go default is set by generated runtime code that reads the
// schema's Go type, which a generated schema does not have.
func slotSchema(g *gen.Graph, n *gen.Type, fieldName string, deltas bool) (*load.Schema, error) {
	prefix := spec.Singular(n.Table())
	id := ownerID(g, n)
	key, err := keyField(prefix+"_id", &field.Descriptor{Info: n.ID.Type, ValueScanner: idScanner(id)})
	if err != nil {
		return nil, fmt.Errorf("%s's id: %w", n.Name, err)
	}
	m := slotsMixin{field: fieldName, deltas: deltas, ownerName: n.Name, table: n.Table(), prefix: prefix, keyField: key,
		owner: func(ent.Schema) {}, dbDefault: true}
	b, err := load.MarshalSchema(generatedSlots{m: m})
	if err != nil {
		return nil, err
	}
	s, err := load.UnmarshalSchema(b)
	if err != nil {
		return nil, err
	}
	s.Name = n.Name + pascal(fieldName) + "Slot"
	if deltas {
		s.Name = n.Name + pascal(fieldName) + "Delta"
	}
	s.Edges[0].Type = n.Name // the placeholder owner names no schema
	if id != nil && !integerOrString(n.ID.Type.Type) {
		// The key column is the owner id's own: its Go type (a uuid.UUID)
		// and the column type and size it declares for each database.
		for _, f := range s.Fields {
			if f.Name == prefix+"_id" {
				f.Info, f.SchemaType, f.Size = n.ID.Type, id.SchemaType, id.Size
			}
		}
	}
	return s, nil
}

// ownerID returns the id field n's schema declares, or nil when it
// declares none (ent's integer id).
func ownerID(g *gen.Graph, n *gen.Type) *load.Field {
	for _, s := range g.Schemas {
		if s.Name != n.Name {
			continue
		}
		for _, f := range s.Fields {
			if f.Name == "id" {
				return f
			}
		}
	}
	return nil
}

// idScanner stands for an id field's ValueScanner in a descriptor: a
// generated schema has no Go value to call, only whether there is one.
func idScanner(f *load.Field) any {
	if f != nil && f.ValueScanner {
		return true
	}
	return nil
}

// generatedSlots is the schema value slotSchema marshals.
type generatedSlots struct {
	ent.Schema
	m slotsMixin
}

func (s generatedSlots) Mixin() []ent.Mixin { return []ent.Mixin{s.m} }

// keyField is the owner key column of a slot table, of the type of the
// owner's id, d: an integer or string column as the id's; for a
// field.UUID id, a column of the id's own Go type, column types and size
// (uuid on PostgreSQL, char(36) on MySQL, as ent makes the id's). An id read and
// written through a ValueScanner is refused: the slot table would need
// the same codec, which only the owner's schema holds.
func keyField(col string, d *field.Descriptor) (ent.Field, error) {
	switch d.Info.Type {
	case field.TypeInt:
		return field.Int(col).Immutable(), nil
	case field.TypeInt64:
		return field.Int64(col).Immutable(), nil
	case field.TypeInt32:
		return field.Int32(col).Immutable(), nil
	case field.TypeUint:
		return field.Uint(col).Immutable(), nil
	case field.TypeUint64:
		return field.Uint64(col).Immutable(), nil
	case field.TypeString:
		return field.String(col).Immutable(), nil
	case field.TypeUUID:
		if d.ValueScanner != nil {
			return nil, fmt.Errorf("a %s with a ValueScanner: counters support ids ent reads and writes without one", d.Info)
		}
		return sameAs{d: &field.Descriptor{Name: col, Info: d.Info, Size: d.Size, SchemaType: d.SchemaType, Immutable: true}}, nil
	}
	return nil, fmt.Errorf("a %s: counters support integer, string and UUID ids", d.Info)
}

// integerOrString reports whether keyField writes t's key column with a
// field constructor of its own (not the owner id's type).
func integerOrString(t field.Type) bool {
	switch t {
	case field.TypeInt, field.TypeInt64, field.TypeInt32, field.TypeUint, field.TypeUint64, field.TypeString:
		return true
	}
	return false
}

// sameAs is a field whose descriptor is given whole: the owner key column
// of the owner id's own type.
type sameAs struct{ d *field.Descriptor }

// Descriptor implements ent.Field.
func (f sameAs) Descriptor() *field.Descriptor { return f.d }

// dbDefaultValue is the value column of a generated slot schema: 0 by the
// database's default.
func dbDefaultValue() ent.Field {
	return field.Int64(countersql.ValueColumn).Annotations(entsql.Default("0"))
}
