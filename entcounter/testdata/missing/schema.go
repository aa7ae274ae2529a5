// Package schema declares a counter without its slot schema.
package schema

import (
	"entgo.io/ent"

	"github.com/hotcounter/hotcounter/entcounter"
)

type Post struct{ ent.Schema }

func (Post) Mixin() []ent.Mixin { return []ent.Mixin{entcounter.Counter("likes")} }
