package main

// Regenerate after changing a schema or a .graphql file, from this
// directory: the ent client and ent.graphql (entc, with entgql and
// entcounter's extension), then the GraphQL server (gqlgen).
//
//go:generate go run ./ent/entc.go
//go:generate go run github.com/99designs/gqlgen
