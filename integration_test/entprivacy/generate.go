// Package entprivacy is an ent application of the kind teams write, whose
// schema has what counters must respect: a privacy policy (readers may
// not write) and ent's documented soft-delete mixin (an interceptor that
// hides deleted rows, a hook that turns deletes into updates). The tests
// check that every counter write path runs them. Generated code is
// committed; .ci/run regenerates it and fails on a difference.
package entprivacy

//go:generate go run entc.go
