// Package entversions holds five versions of one ent application's schema,
// each generated into its own package, as five deploys of the application
// would have them: the reels table's plays counted as a sum over 16 slots
// (sum16), as a rollup (rollup), in append mode (deltas), as a sum over 64
// slots (sum64), and as a plain column that is no longer a counter (plain);
// and one generated without entcounter's extension (noext), whose every
// operation must say how to generate it. Two more are a reel and its
// remarks, first not counted (remarks), then counted (remarked): a count
// added by a later release over existing rows, then counted under a
// condition (remarkedkind): a count whose definition a release changes.
// The tests migrate one database from version to version and check that no
// play is lost or counted twice. Generated code is committed; .ci/run
// regenerates it and fails on a difference.
package entversions

//go:generate go run entc.go
