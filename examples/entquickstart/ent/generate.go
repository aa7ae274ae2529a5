// Package ent is the generated ent client of the entquickstart example.
// Regenerate after changing a schema: go generate ./examples/entquickstart/ent
package ent

//go:generate go run entc.go
