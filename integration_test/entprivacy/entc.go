//go:build ignore

// Generates the entprivacy client. Run: go generate ./integration_test/entprivacy
package main

import (
	"log"

	"entgo.io/ent/entc"
	"entgo.io/ent/entc/gen"

	"github.com/hotcounter/hotcounter/entcounter"
)

func main() {
	cfg := &gen.Config{Features: []gen.Feature{gen.FeatureUpsert, gen.FeaturePrivacy, gen.FeatureIntercept}}
	if err := entc.Generate("./schema", cfg, entc.Extensions(entcounter.Extension())); err != nil {
		log.Fatal(err)
	}
}
