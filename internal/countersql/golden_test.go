package countersql

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The golden files in testdata hold every statement this package writes,
// per dialect, with its arguments, so that a change of SQL shows as a diff
// in review without a database. Regenerate them with
//
//	go test ./internal/countersql -update
var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// goldenWriter renders a statement as the ORMs do: identifiers quoted the
// dialect's way, arguments as numbered placeholders listed after it.
type goldenWriter struct {
	b     strings.Builder
	quote string
	args  []any
}

func (w *goldenWriter) WriteString(s string) { w.b.WriteString(s) }
func (w *goldenWriter) Ident(name string) {
	for i, part := range strings.Split(name, ".") {
		if i > 0 {
			w.b.WriteByte('.')
		}
		w.b.WriteString(w.quote + part + w.quote)
	}
}
func (w *goldenWriter) Arg(v any) {
	w.args = append(w.args, v)
	fmt.Fprintf(&w.b, "$%d", len(w.args))
}

var (
	posts = Table{Parent: "posts", ParentKey: "id", Column: "likes", Slots: "post_likes_slots", Owner: "post_id", Other: "post_likes_deltas"}
	claps = Table{Parent: "stories", ParentKey: "id", Column: "claps", Slots: "story_claps_deltas", Owner: "story_id", Other: "story_claps_slots"}
	count = Count{Table: Table{Parent: "categories", ParentKey: "id", Column: "object_count", Slots: "category_object_count_slots", Owner: "category_id"},
		SlotCount: 16, Child: "objects", ChildKey: "id", Ref: "category_id", Columns: []string{"id", "category_id", "status", "deleted_at"},
		Where: "status = 'active'", SoftDelete: "deleted_at"}
	// A tag's count of posts, through the join table post_tags.
	tagCount = Count{Table: Table{Parent: "tags", ParentKey: "id", Column: "post_count", Slots: "tag_post_count_slots", Owner: "tag_id"},
		SlotCount: 16, Child: "post_tags", Ref: "tag_id", Columns: []string{"post_id", "tag_id"},
		Across: &Across{Ref: "post_id", Table: "posts", Key: "id"}}
	// A folder's bytes: the running total of its files' size.
	folderBytes = Count{Table: Table{Parent: "folders", ParentKey: "id", Column: "bytes", Slots: "folder_bytes_slots", Owner: "folder_id"},
		SlotCount: 16, Child: "files", ChildKey: "id", Ref: "folder_id", Columns: []string{"id", "folder_id", "size"}, Sum: "size"}
	// A section's count of the pages of its sub-sections (two levels).
	sectionPages = Count{Table: Table{Parent: "sections", ParentKey: "id", Column: "page_count", Slots: "section_page_count_slots", Owner: "section_id"},
		SlotCount: 16, Child: "pages", ChildKey: "id", Ref: "section_id", Columns: []string{"id", "section_id"},
		Via: &Via{Table: "sections", Key: "id", Ref: "parent_id"}}
	// ent's layout: a surrogate key beside the unique (owner, slot).
	entPosts = func() Table { t := posts; t.RowID = "id"; return t }()
	entCount = func() Count { c := count; c.RowID = "id"; return c }()
	keys     = []any{int64(1), int64(2), int64(3)}
	cond     = func(w Writer) { w.WriteString("1=1") }
)

// statements lists one call of every statement builder that d's database
// runs, by name: the builders of Dialect, then those of the families and
// the type of d's own database (OnUpserts, OnRowLocks, OnPostgres, OnMySQL,
// OnSQLite).
func statements(d Dialect) []struct {
	name  string
	build func(Writer)
} {
	type st = struct {
		name  string
		build func(Writer)
	}
	one := func(name string, b func(Writer)) st { return st{name, b} }
	many := func(name string, bs []func(Writer)) []st {
		out := make([]st, len(bs))
		for i, b := range bs {
			out[i] = st{fmt.Sprintf("%s (%d of %d)", name, i+1, len(bs)), b}
		}
		return out
	}
	out := []st{
		one("CreateSlotTable", func(w Writer) { d.CreateSlotTable(w, posts, "bigint") }),
		one("DropSlotTable", func(w Writer) { d.DropSlotTable(w, posts) }),
		one("PrecreateSlots", func(w Writer) { d.PrecreateSlots(w, posts, 16, d.KeyIn(posts, keys)) }),
		one("Fill: slots", func(w Writer) {
			d.Fill(w, []FillPart{{Table: posts, Read: Sources{Tables: []string{posts.Slots}}, Keys: keys}})
		}),
		one("Fill: slots and deltas", func(w Writer) {
			d.Fill(w, []FillPart{{Table: posts, Read: Sources{Tables: []string{posts.Slots, posts.Other}}, Keys: keys}})
		}),
		one("Fill: column and slots, and a second part", func(w Writer) {
			d.Fill(w, []FillPart{
				{Table: posts, Read: Sources{Column: true, Tables: []string{posts.Slots}}, Keys: keys},
				{Table: claps, Read: Sources{Column: true, Tables: []string{claps.Slots, claps.Other}}, Keys: keys},
			})
		}),
		one("Fill: column alone", func(w Writer) { d.Fill(w, []FillPart{{Table: posts, Read: Sources{Column: true}, Keys: keys}}) }),
		one("PendingOwners", func(w Writer) { d.PendingOwners(w, posts, int64(9), 500) }),
		one("DeleteOwners", func(w Writer) { d.DeleteOwners(w, posts, keys) }),
		one("SetColumn", func(w Writer) { d.SetColumn(w, posts, keys, 0) }),
		one("SelectKeys", func(w Writer) { d.SelectKeys(w, posts, cond) }),
		one("SlotsHolding", func(w Writer) { d.SlotsHolding(w, posts, int64(1)) }),
		one("SelectJoinedTotals", func(w Writer) {
			totals := []Inline{{Table: posts, Read: Sources{Tables: []string{"post_likes_slots"}}, As: "likes"},
				{Table: posts, Read: Sources{Tables: []string{"post_likes_slots", "post_likes_deltas"}}, As: "views"}}
			d.SelectJoinedTotals(w, "posts", totals)
			w.WriteString(" FROM ")
			w.Ident("posts")
			w.WriteString(" ")
			d.JoinTotals(w, "posts", totals, []any{int64(1), int64(2), int64(3)})
		}),
		one("SelectWithTotals", func(w Writer) {
			d.SelectWithTotals(w, "posts", []Inline{{Table: posts, Read: Sources{Tables: []string{"post_likes_slots", "post_likes_deltas"}}, As: "likes"}})
		}),
		one("SelectWithTotals, rows named by key", func(w Writer) {
			d.SelectWithTotals(w, "posts", []Inline{{Table: posts, Read: Sources{Tables: []string{"post_likes_slots"}}, As: "likes", Keys: keys[:2]}})
		}),
		one("ReshapeSlots", func(w Writer) { d.ReshapeSlots(w, posts, int64(1), []any{int64(0), int64(3)}, []int64{5, -7}) }),
		one("TakeFromSlot", func(w Writer) { d.TakeFromSlot(w, posts, int64(1), 3, 2) }),
		one("LockAllSlots", func(w Writer) { d.LockAllSlots(w, posts, int64(1)) }),
		one("SpreadOver", func(w Writer) { d.SpreadOver(w, posts, int64(1), []int64{2, 2, 1}) }),
		one("AddToSlots", func(w Writer) { d.AddToSlots(w, posts, keys, []int{ColumnSlot, ColumnSlot, 3}, []int64{4, 5, 6}) }),
	}
	out = append(out, many("CreateLedger", d.CreateLedger("post_ledger"))...)
	out = append(out,
		one("LedgerAdd", func(w Writer) { d.LedgerAdd(w, "post_ledger", "b1", 1000) }),
		one("LedgerPrune", func(w Writer) { d.LedgerPrune(w, "post_ledger", 1000) }),
	)
	out = append(out, many("CreateDeltaTable", d.CreateDeltaTable(claps, "bigint"))...)
	out = append(out,
		one("DeltaBatchEnd", func(w Writer) { d.DeltaBatchEnd(w, claps, 10, 500) }),
		one("AppendRows", func(w Writer) { d.AppendRows(w, claps, keys, []int64{4, 5, 6}) }),
	)
	if b := d.SlotStorage(posts); b != nil {
		out = append(out, one("SlotStorage", b))
	}
	out = append(out, many("InstallCountTriggers", d.InstallCountTriggers(count))...)
	out = append(out, many("InstallCountTriggers, slot table with a surrogate key", d.InstallCountTriggers(entCount))...)
	out = append(out, many("DropCountTriggers", d.DropCountTriggers(count))...)
	out = append(out, many("InstallCountTriggers, through a join table", d.InstallCountTriggers(tagCount))...)
	out = append(out, many("InstallCountTriggers, a running total", d.InstallCountTriggers(folderBytes))...)
	out = append(out, many("InstallCountTriggers, two levels", d.InstallCountTriggers(sectionPages))...)
	out = append(out, many("DropCountTriggers, through a join table", d.DropCountTriggers(tagCount))...)
	out = append(out,
		one("CountedRows", func(w Writer) { d.CountedRows(w, []Count{count}, d.ChildKeyIn(count, keys), true) }),
		one("CountedRows, join rows by their pair", func(w Writer) {
			d.CountedRows(w, []Count{tagCount}, d.ChildKeyIn(tagCount, []any{Pair{int64(1), int64(2)}, Pair{int64(3), int64(4)}}), true)
		}),
		one("InsertJoinRow", func(w Writer) { d.InsertJoinRow(w, tagCount, Pair{int64(1), int64(2)}) }),
		one("DeleteJoinRows", func(w Writer) { d.DeleteJoinRows(w, tagCount, []any{Pair{int64(1), int64(2)}}) }),
		one("KeysWhere", func(w Writer) { d.KeysWhere(w, "posts", "id", cond, true) }),
		one("CountTriggersOf", func(w Writer) { d.CountTriggersOf(w, count) }),
		one("TableExists", func(w Writer) { d.TableExists(w, "app.posts") }),
		one("ExistingParents", func(w Writer) { d.ExistingParents(w, count, keys) }),
		one("RecountBatch", func(w Writer) { d.RecountBatch(w, count, false, int64(9), 500, cond) }),
		one("RecountBatch with the column", func(w Writer) { d.RecountBatch(w, count, true, nil, 500, cond) }),
		one("RecountBatch, a running total", func(w Writer) { d.RecountBatch(w, folderBytes, false, nil, 500, cond) }),
		one("RecountBatch, two levels", func(w Writer) { d.RecountBatch(w, sectionPages, false, nil, 500, cond) }),
		one("CountExistingAll", func(w Writer) { d.CountExistingAll(w, count, false) }),
		one("CountExistingAll with the column, ent's layout", func(w Writer) { d.CountExistingAll(w, entCount, true) }),
		one("CountTriggersMarked", func(w Writer) { d.CountTriggersMarked(w, count, "hotcounter:0123456789abcdef") }),
		one("CountTriggersMarked, two levels", func(w Writer) { d.CountTriggersMarked(w, sectionPages, "hotcounter:0123456789abcdef") }),
		one("ProbeStorage", func(w Writer) { d.ProbeStorage(w, posts) }),
		one("KeyUnique", func(w Writer) { d.KeyUnique(w, "posts", "id") }),
		one("ColumnOwners", func(w Writer) { d.ColumnOwners(w, posts, int64(9), 500) }),
		one("LockColumns", func(w Writer) { d.LockColumns(w, posts, keys) }),
		one("ZeroNullColumns", func(w Writer) { d.ZeroNullColumns(w, posts, keys) }),
		one("NullOwners", func(w Writer) { d.NullOwners(w, posts, nil, 500) }),
		one("TableTotal", func(w Writer) { d.TableTotal(w, "post_likes_slots") }),
		one("TablesAmong", func(w Writer) { d.TablesAmong(w, []string{"post_likes_slots", "post_likes_deltas"}) }),
		one("Savepoint", func(w Writer) { Savepoint(w, "hc_increment") }),
		one("RollbackTo", func(w Writer) { RollbackTo(w, "hc_increment") }),
		one("Release", func(w Writer) { Release(w, "hc_increment") }),
	)
	if u, ok := d.OnUpserts(); ok {
		out = append(out,
			one("IncrementWhere", func(w Writer) { u.IncrementWhere(w, posts, 7, 1, cond) }),
			one("AppendWhere", func(w Writer) { u.AppendWhere(w, claps, 1, cond) }),
			one("AddCounts", func(w Writer) { u.AddCounts(w, count, keys, []int64{1, -1, 2}) }),
			one("CrowdedOwners", func(w Writer) { u.CrowdedOwners(w, posts, int64(9), 500) }),
		)
		out = append(out, many("Fold", u.Fold(posts, keys))...)
		out = append(out, many("FoldDeltas", u.FoldDeltas(claps, 10, 20))...)
		compaction := u.Compact(posts, keys)
		for _, c := range []struct {
			name  string
			build func(Writer)
		}{{"Compact: gather", compaction.Gather}, {"Compact: remove", compaction.Remove}} {
			if c.build != nil {
				out = append(out, one(c.name, c.build))
			}
		}
		out = append(out, many("Compact", compaction.Queries)...)
	}
	if l, ok := d.OnRowLocks(); ok {
		out = append(out,
			one("LockParentsForSet", func(w Writer) { l.LockParentsForSet(w, posts, keys) }),
			one("LockParentsForClear", func(w Writer) { l.LockParentsForClear(w, count, keys) }),
			one("LockAcrossForUpdate", func(w Writer) { l.LockAcrossForUpdate(w, tagCount, keys) }),
			one("SetColumnDefault", func(w Writer) { l.SetColumnDefault(w, posts) }),
		)
	}
	if pg, ok := d.OnPostgres(); ok {
		out = append(out,
			one("CitusInstalled", pg.CitusInstalled),
			one("Distributed", func(w Writer) { pg.Distributed(w, "posts") }),
			one("CitusIncrementFreeSlot", func(w Writer) { pg.CitusIncrementFreeSlot(w, posts, 7, 1, int64(1)) }),
			one("SessionSlot", func(w Writer) { d.SessionSlot(w, 16) }),
			one("AddCountsAt", func(w Writer) { pg.Upserts.AddCountsAt(w, count, 17, keys, []int64{1, -1, 2}) }),
			one("DistributeBeside", func(w Writer) { pg.DistributeBeside(w, posts) }),
			one("IncrementFreeSlot", func(w Writer) { pg.IncrementFreeSlot(w, posts, 7, 1, d.KeyIn(posts, keys[:1])) }),
			one("IncrementFreeSlot, lowest first", func(w Writer) { pg.IncrementFreeSlot(w, posts, -1, 1, d.KeyIn(posts, keys[:1])) }),
			one("IncrementOwnSlot", func(w Writer) { pg.IncrementOwnSlot(w, posts, 16, 7, 1, cond) }),
			one("IncrementReturningTotals", func(w Writer) {
				pg.IncrementReturningTotals(w, posts, 7, 1, d.KeyIn(posts, keys[:1]), Sources{Column: true, Tables: []string{posts.Slots, posts.Other}})
			}),
			one("TakeFromFreeSlot", func(w Writer) { pg.TakeFromFreeSlot(w, posts, int64(1), 2) }),
			one("TableSize", func(w Writer) { pg.TableSize(w, posts.Slots) }),
			one("OldestHolder", func(w Writer) { pg.OldestHolder(w, "1234") }),
			one("JITOff", pg.JITOff),
			one("SetJIT", func(w Writer) { pg.SetJIT(w, "on") }),
		)
	}
	if my, ok := d.OnMySQL(); ok {
		out = append(out,
			one("IncrementKeys", func(w Writer) { my.IncrementKeys(w, posts, keys, 7, 1) }),
			one("InsertSlots", func(w Writer) { my.InsertSlots(w, posts, keys, 7, 1) }),
			one("PickFreeSlot", func(w Writer) { my.PickFreeSlot(w, posts, int64(1), 7, false) }),
			one("PickFreeSlot below", func(w Writer) { my.PickFreeSlot(w, posts, int64(1), 7, true) }),
			one("LockParents", func(w Writer) { my.LockParents(w, posts, keys) }),
			one("LockSlots", func(w Writer) { my.LockSlots(w, posts, int64(1)) }),
			one("SlotNumbers", func(w Writer) { my.SlotNumbers(w, posts, int64(1)) }),
			one("LockSlot", func(w Writer) { my.LockSlot(w, posts, int64(1), 3) }),
			one("AddToColumns", func(w Writer) { my.AddToColumns(w, posts, keys, []int64{4, 5, 6}) }),
			one("ZeroSlot", func(w Writer) { my.ZeroSlot(w, posts, int64(1), 7) }),
			one("ClaimedSlot", my.ClaimedSlot),
			one("TryClaim", func(w Writer) { my.TryClaim(w, 3) }),
			one("AddToOwnSlot", func(w Writer) { my.AddToOwnSlot(w, posts, 19, keys, []int64{4, 5, 6}) }),
			one("OwnSlotRows", func(w Writer) { my.OwnSlotRows(w, posts, 16, keys, false) }),
			one("OwnSlotRows, surrogate key", func(w Writer) { my.OwnSlotRows(w, entPosts, 16, keys, false) }),
			one("OwnSlotRows, locked", func(w Writer) { my.OwnSlotRows(w, posts, 16, keys, true) }),
			one("AddBySlot", func(w Writer) { my.AddBySlot(w, posts, 19, keys, []int64{4, 5, 6}) }),
			one("AddByRowID", func(w Writer) { my.AddByRowID(w, entPosts, keys, []int64{4, 5, 6}) }),
			one("NoLockWait", my.NoLockWait),
			one("RestoreLockWait", my.RestoreLockWait),
			one("DeltaOwners", func(w Writer) { my.DeltaOwners(w, claps, 10, 20) }),
			one("LockDeltas", func(w Writer) { my.LockDeltas(w, claps, 10, 20, keys) }),
			one("DeleteDeltas", func(w Writer) { my.DeleteDeltas(w, claps, keys) }),
			one("ServerVersion", my.ServerVersion),
			one("CascadeTrigger", my.CascadeTrigger(tagCount)),
			one("DeleteCascades", func(w Writer) { my.DeleteCascades(w, tagCount) }),
		)
	}
	if lite, ok := d.OnSQLite(); ok {
		out = append(out,
			one("CountTriggersNaming", func(w Writer) { lite.CountTriggersNaming(w, "categories") }),
			one("DropTrigger", func(w Writer) { lite.DropTrigger(w, "hc_category_object_count_slots_ins") }),
			one("LegacyAlterTable", lite.LegacyAlterTable),
			one("SetLegacyAlterTable", func(w Writer) { lite.SetLegacyAlterTable(w, true) }),
			one("IndexesOn", func(w Writer) { lite.IndexesOn(w, "posts") }),
			one("ForeignKeysOn", lite.ForeignKeysOn),
			one("SetForeignKeys", func(w Writer) { lite.SetForeignKeys(w, false) }),
			one("Recreate trigger", func(w Writer) { lite.Recreate(w, `CREATE TRIGGER "t" AFTER INSERT ON "objects" BEGIN SELECT 1; END`) }),
			one("Recreate index", func(w Writer) { lite.Recreate(w, `CREATE UNIQUE INDEX "ix" ON "posts" ("title")`) }),
			one("Recreate kept as written", func(w Writer) { lite.Recreate(w, `CREATE INDEX IF NOT EXISTS "ix" ON "posts" ("title")`) }),
		)
	}
	return out
}

func TestGoldenSQL(t *testing.T) {
	for _, name := range []string{"postgres", "citus", "mysql", "sqlite"} {
		t.Run(name, func(t *testing.T) {
			d, err := For(strings.Replace(name, "citus", "postgres", 1))
			if err != nil {
				t.Fatal(err)
			}
			if name == "citus" {
				d = d.OnCitus()
			}
			quote := `"`
			if d.MySQL() {
				quote = "`"
			}
			var out strings.Builder
			fmt.Fprintf(&out, "-- Every statement of internal/countersql for %s. Generated by\n-- go test ./internal/countersql -update: review the diff.\n", name)
			for _, s := range statements(d) {
				w := &goldenWriter{quote: quote}
				s.build(w)
				fmt.Fprintf(&out, "\n-- %s\n%s;\n", s.name, w.b.String())
				if len(w.args) > 0 {
					fmt.Fprintf(&out, "-- args: %v\n", w.args)
				}
			}
			path := filepath.Join("testdata", name+".sql")
			if *update {
				if err := os.MkdirAll("testdata", 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(out.String()), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test ./internal/countersql -update)", err)
			}
			if got := out.String(); got != string(want) {
				t.Errorf("the SQL of %s changed; if that is intended, run go test ./internal/countersql -update and review the diff of %s\n%s",
					name, path, firstDifference(string(want), got))
			}
		})
	}
}

// firstDifference shows the first line where two texts differ.
func firstDifference(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < max(len(w), len(g)); i++ {
		var a, b string
		if i < len(w) {
			a = w[i]
		}
		if i < len(g) {
			b = g[i]
		}
		if a != b {
			return fmt.Sprintf("line %d:\n  was: %s\n  now: %s", i+1, a, b)
		}
	}
	return ""
}
