//go:build ignore

package main

import (
	"log"

	"entgo.io/ent/entc"
	"entgo.io/ent/entc/gen"

	"github.com/hotcounter/hotcounter/entcounter"
)

func main() {
	if err := entc.Generate("./schema", &gen.Config{}, entc.Extensions(entcounter.Extension())); err != nil {
		log.Fatal(err)
	}
}
