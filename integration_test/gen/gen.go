// Package gen holds the models and the gorm.io/gen queries that the
// integration tests write counters through (gen_test.go).
package gen

//go:generate go run ./generate
