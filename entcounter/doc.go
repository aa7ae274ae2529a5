// Package entcounter declares sharded counters on ent schemas: the same
// counters, tables and guarantees as gormcounter, so either ORM can read
// what the other wrote.
//
// A counter is a field that a mixin declares on the parent schema; the
// extension generates the schema of its slot table:
//
//	// ent/schema/post.go
//	func (Post) Mixin() []ent.Mixin {
//		return []ent.Mixin{
//			entcounter.Counter("likes"),                                            // sum: no column on posts
//			entcounter.Counter("views", entcounter.Slots(64), entcounter.Rollup()), // rollup: cached column posts.views
//		}
//	}
//
//	// ent/entc.go (go:generate go run entc.go)
//	entc.Generate("./schema", &gen.Config{}, entc.Extensions(entcounter.Extension()))
//
// The program imports the generated runtime package (<module>/ent/runtime),
// which registers the counter hooks, as for any ent schema with hooks.
//
// Then, as usual in ent:
//
//   - client.Schema.Create creates the slot tables (post_likes_slots with
//     post_id, slot, n, a surrogate id, a unique index on (post_id, slot) and a
//     foreign key ON DELETE CASCADE); versioned migrations and Atlas see them
//     too, because they are ordinary schemas.
//   - AddLikes(k) on UpdateOne or on a bulk Update becomes one upsert into a
//     random slot of each matched post, in the mutation's transaction when it
//     has one, and never writes or locks the post row.
//   - SetLikes(v) sets the total exactly: the slot rows of the post are
//     replaced by one holding v (rollup: the column is set and the pending
//     slots removed), in one transaction; Create().SetLikes(v) starts the
//     post at v. GORM's Update("likes", v) and Create mean the same.
//   - Get, Only, All and eager loading (WithPosts) fill sum counters
//     exactly: Get, Only and First in the load's own statement, loads of
//     many rows and eager-loaded edges with one grouped query per
//     statement; rollup counters read their cached column, or column +
//     pending slots under [WithLive].
//   - [RollupPass] and [RollupLoop] fold pending slots into rollup columns.
//   - [Counts] makes a counter the number of rows an O2M or M2M edge
//     reaches, or two O2M edges ("children.products") ([Where] limits it); [WithCounters] or [InstallTriggers] creates the
//     triggers that keep it, and [Recount] repairs drift.
//   - A plain field that becomes a counter keeps its counts: loads add the
//     column to the slots until [MoveToSlots] empties it; [WithCounters]
//     readies such columns during Schema.Create ([AdoptColumn] keeps one in
//     the schema meanwhile).
//   - [Append] counters insert a delta row per increment (their table is
//     generated like a slot table's); [NewBuffer] adds increments up in memory
//     and writes them in batches (write-behind).
//
// PostgreSQL, MySQL/MariaDB (InnoDB) and SQLite, with the same statements
// as gormcounter.
package entcounter
