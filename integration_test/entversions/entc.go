//go:build ignore

// Generates the nine versions. Run: go generate ./integration_test/entversions
package main

import (
	"log"

	"entgo.io/ent/entc"
	"entgo.io/ent/entc/gen"

	"github.com/hotcounter/hotcounter/entcounter"
)

func main() {
	const module = "github.com/hotcounter/hotcounter/integration_test/entversions/"
	for _, v := range []string{"sum16", "rollup", "deltas", "sum64", "plain", "noext", "remarks", "remarked", "remarkedkind"} {
		cfg := &gen.Config{Target: "./" + v, Package: module + v, Features: []gen.Feature{gen.FeatureUpsert}}
		var opts []entc.Option
		if v != "noext" { // noext: a schema with a counter, generated without the extension
			opts = append(opts, entc.Extensions(entcounter.Extension()))
		}
		if err := entc.Generate("./"+v+"/schema", cfg, opts...); err != nil {
			log.Fatalf("%s: %v", v, err)
		}
	}
}
