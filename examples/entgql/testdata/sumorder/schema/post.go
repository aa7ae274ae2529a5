// Package schema declares a sum counter as a GraphQL order field, which
// entcounter's extension refuses.
package schema

import (
	"entgo.io/contrib/entgql"
	"entgo.io/ent"

	"github.com/hotcounter/hotcounter/entcounter"
)

// Post orders by likes, a sum counter.
type Post struct{ ent.Schema }

// Mixin of Post.
func (Post) Mixin() []ent.Mixin {
	return []ent.Mixin{entcounter.Counter("likes").Annotate(entgql.OrderField("LIKES"))}
}
