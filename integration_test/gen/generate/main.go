// Command generate writes package query, gorm.io/gen's typed queries of
// the models in package model. Run it with go generate ./integration_test/gen.
package main

import (
	"gorm.io/gen"

	"github.com/hotcounter/hotcounter/integration_test/gen/model"
)

func main() {
	g := gen.NewGenerator(gen.Config{OutPath: "query", Mode: gen.WithDefaultQuery | gen.WithQueryInterface})
	g.ApplyBasic(model.Post{})
	g.Execute()
}
