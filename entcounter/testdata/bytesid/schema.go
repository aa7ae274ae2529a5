// Package schema declares a counter on a schema whose id is bytes.
package schema

import (
	"entgo.io/ent"
	"entgo.io/ent/schema/field"

	"github.com/hotcounter/hotcounter/entcounter"
)

type Blob struct{ ent.Schema }

func (Blob) Fields() []ent.Field { return []ent.Field{field.Bytes("id")} }

func (Blob) Mixin() []ent.Mixin { return []ent.Mixin{entcounter.Counter("reads")} }
