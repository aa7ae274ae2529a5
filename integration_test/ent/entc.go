//go:build ignore

// Generates the ent code the integration tests use, with entcounter's
// extension. Run: go generate ./integration_test/ent
package main

import (
	"log"

	"entgo.io/ent/entc"
	"entgo.io/ent/entc/gen"

	"github.com/hotcounter/hotcounter/entcounter"
)

func main() {
	if err := entc.Generate("./schema", &gen.Config{Features: []gen.Feature{gen.FeatureUpsert}}, entc.Extensions(entcounter.Extension())); err != nil {
		log.Fatal(err)
	}
}
