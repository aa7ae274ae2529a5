package main

import (
	"net/http"

	"github.com/99designs/gqlgen/graphql/handler"
	"github.com/99designs/gqlgen/graphql/handler/transport"

	"github.com/hotcounter/hotcounter/examples/entgql/ent"
)

// Resolver is the root resolver: it holds the ent client. gqlgen wrote the
// file; the resolvers of the schema's fields are in ent.resolvers.go (the
// queries entgql generates) and counters.resolvers.go (the example's
// mutations).
type Resolver struct{ client *ent.Client }

// Handler returns the GraphQL endpoint of the example (POST, JSON), its
// fields resolved through client.
func Handler(client *ent.Client) http.Handler {
	srv := handler.New(NewExecutableSchema(Config{Resolvers: &Resolver{client: client}}))
	srv.AddTransport(transport.POST{})
	return srv
}
