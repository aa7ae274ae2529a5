// Package schema holds the entgql example's ent schema: a post with a sum
// counter and a rollup counter, both exposed as GraphQL fields.
package schema

import (
	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/dialect/entsql"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/field"

	"github.com/hotcounter/hotcounter/entcounter"
)

// Post has two counters. likes: sum mode, exact on every load, no column;
// GraphQL can read and filter it but not order by it (the extension refuses
// entgql.OrderField on a sum counter). views: rollup mode, a column folded
// by a rollup pass; GraphQL orders posts by it (orderBy: {field: VIEWS}).
type Post struct{ ent.Schema }

// Fields of Post.
func (Post) Fields() []ent.Field {
	return []ent.Field{
		field.String("title").Annotations(entgql.OrderField("TITLE")),
	}
}

// Mixin of Post: its counters. Annotate carries entgql's field annotations
// to the field the mixin declares.
func (Post) Mixin() []ent.Mixin {
	return []ent.Mixin{
		entcounter.Counter("likes"),
		entcounter.Counter("views", entcounter.Slots(64), entcounter.Rollup()).
			Annotate(entgql.OrderField("VIEWS")),
	}
}

// Annotations of Post: a relay connection query field (posts), and tables
// of the example's own, so that -dsn can point at any database.
func (Post) Annotations() []schema.Annotation {
	return []schema.Annotation{
		entsql.Table("entgql_posts"),
		entgql.QueryField(),
		entgql.RelayConnection(),
		entgql.Mutations(entgql.MutationCreate()),
	}
}
