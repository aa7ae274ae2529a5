// Package ent is the ent client of the integration tests: the schemas of
// integration_test's GORM models (Post, Author, Comment) declared with
// entcounter, so that both ORMs share one database. Generated code is
// committed; .ci/run regenerates it and fails on a difference.
package ent

//go:generate go run entc.go
