// Package gormcounter is a GORM plugin that makes a struct field a sharded
// counter: a value that many writers can increment at once without queueing
// on one row lock.
//
// Tag a field, register the plugin, migrate, increment, load as usual:
//
//	type Post struct {
//		ID    uint
//		Title string
//		Likes int64 `gorm:"counter"`                 // 16 slots, sum mode
//		Views int64 `gorm:"counter:slots=64,rollup"` // 64 slots, rollup mode
//	}
//
//	db.Use(gormcounter.New(gormcounter.Config{}))
//	db.AutoMigrate(&Post{})                     // also creates post_likes_slots, post_views_slots
//	gormcounter.Increment(db.Model(&post), "Likes", 1)
//	db.First(&post)                             // post.Likes exact, post.Views cached
//	db.Clauses(gormcounter.Live).First(&post)   // post.Views exact too
//	gormcounter.RollupPass(db, &Post{})         // fold pending slots into posts.views
//
// # Storage
//
// Each counter has a slot table named after the parent table (singular) and
// the column, through the naming strategy: posts.likes -> post_likes_slots,
// with columns post_id, slot and n, primary key (post_id, slot), and a
// foreign key to the parent with ON DELETE CASCADE. An increment adds to one random slot row, so concurrent
// writers spread over up to N rows instead of one.
//
// # Modes
//
// Sum (the default): the parent table has no column; the value is the sum of
// the slots, selected with the rows by a load of the model (or filled by one
// grouped query per statement for other loads). Exact on every load; a
// statement that sorts or filters on it reads it by a subquery per row.
//
// Rollup: the parent has a NOT NULL DEFAULT 0 column caching the total, which
// RollupPass (or RollupLoop) keeps fresh by folding the slots into it. Plain
// loads read the column (stale by at most the rollup interval; sortable,
// indexable, usable in WHERE) and cost nothing extra; Live loads read column +
// pending slots in one statement.
//
// Append: like Rollup, but an increment inserts a delta row into
// <parent>_<column>_deltas instead of upserting a slot, so no two increments
// share a row; RollupPass folds the delta rows into the column in batches by id.
//
// # Adopting an existing column
//
// A column of a counter's name that the table already has is part of the
// value as long as it exists: a sum counter's load returns COALESCE(column,
// 0) plus the slots, in one statement, so tagging a column that holds
// counts hides nothing, and old code that still increments the column keeps
// counting. MoveToSlots moves the column's values onto slots, exactly once
// and without waiting on a row lock, so that the column can be dropped.
// Every change of mode or width keeps the total. See docs/adopting.md.
//
// # Tag options
//
// `gorm:"counter"` or `gorm:"counter:<options>"`, options separated by commas:
// slots=N (1 to 1024, default Config.DefaultSlots, 16), slots=auto[,max=N],
// sum, rollup, append, precreate[=true|false], skiplocked, guarded, and for
// counts counts=, total=, hooks and where= (below). slots=auto starts each
// parent at one slot row and widens it while its increments contend, up to
// max (default as slots=N). precreate inserts all N slot rows when a parent
// is created, so that no increment ever inserts one; skiplocked makes an
// increment of one parent take a slot row no other transaction holds (see
// docs/writes.md for when each matters). guarded makes the counter stock
// that never goes below zero: it goes down only through [Take], which takes
// in full or fails with [hotcounter.ErrInsufficient] (docs/guarded.md).
//
// # Counts of child rows
//
// counts=<relation> makes the counter the number of child rows of a has-many
// relation (a polymorphic one too), of the join rows of a many-to-many
// relation, or of two has-many levels (counts=Children.Products),
// optionally only those matching where=<SQL> (the last option);
// soft-deleted rows do not count. total=<column> sums that column of the
// children instead of counting them (docs/counts.md):
//
//	ObjectCount int64 `gorm:"counter:counts=Objects"`
//	ActiveCount int64 `gorm:"counter:counts=Objects,where=status = 'active'"`
//
// AutoMigrate installs triggers on the child table that keep it through
// every insert, delete, soft delete and move, raw SQL included; with the
// hooks option GORM callbacks keep it instead. Writers take slot locks in
// one order (one slot per parent per session, parents in key order), so
// moves in opposite directions do not deadlock. Recount repairs drift while
// writes go on.
//
// # Write-behind
//
// NewBuffer returns a Buffer whose Increment adds to memory and returns; a
// flush every interval writes all deltas in one transaction, recorded in a
// ledger so that a retried flush never counts twice.
//
// # Writes
//
// Increment, UpdateColumn/Update/Updates with gorm.Expr("likes + ?", n), and
// gen's "? + ?" form all become one slot upsert per counter per statement,
// inside the caller's transaction. The parent row is not written: not even
// updated_at. A new row's value (Create, Save of a new row, FirstOrCreate)
// is its starting total; an assignment of a value (Update("likes", 5),
// Updates(map)) sets the total, as ent's SetLikes does; Save and Updates
// with a struct leave an existing row's counters alone. Any other
// expression fails with hotcounter.ErrNotIncrement.
package gormcounter
