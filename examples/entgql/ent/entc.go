//go:build ignore

package main

import (
	"log"

	"entgo.io/contrib/entgql"
	"entgo.io/ent/entc"
	"entgo.io/ent/entc/gen"

	"github.com/hotcounter/hotcounter/entcounter"
)

func main() {
	gql, err := entgql.NewExtension(
		entgql.WithSchemaGenerator(),
		entgql.WithSchemaPath("ent.graphql"),
		entgql.WithConfigPath("gqlgen.yml"),
		entgql.WithWhereInputs(true),
	)
	if err != nil {
		log.Fatal(err)
	}
	if err := entc.Generate("./ent/schema", &gen.Config{}, entc.Extensions(gql, entcounter.Extension())); err != nil {
		log.Fatal(err)
	}
}
