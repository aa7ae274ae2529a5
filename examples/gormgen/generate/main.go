// Command generate writes package query, gorm.io/gen's typed queries of
// the example's model: go generate ./examples/gormgen.
package main

import (
	"gorm.io/gen"

	"github.com/hotcounter/hotcounter/examples/gormgen/model"
)

func main() {
	g := gen.NewGenerator(gen.Config{OutPath: "query", Mode: gen.WithDefaultQuery | gen.WithQueryInterface})
	g.ApplyBasic(model.Post{})
	g.Execute()
}
