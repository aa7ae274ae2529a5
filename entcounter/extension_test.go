package entcounter

import (
	"reflect"
	"strings"
	"testing"

	"entgo.io/ent/entc"
	"entgo.io/ent/entc/gen"
)

// A counter whose slot table schema the schema package does not declare
// gets one generated: the table SlotsOf would declare.
func TestExtensionGeneratesTheSlotSchemasNotDeclared(t *testing.T) {
	g, err := entc.LoadGraph("./testdata/missing", &gen.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if g, err = withSlotSchemas(g); err != nil {
		t.Fatal(err)
	}
	defs, err := defsOf(g)
	if err != nil {
		t.Fatal(err)
	}
	var slot *gen.Type
	for _, n := range g.Nodes {
		if n.Name == "PostLikesSlot" {
			slot = n
		}
	}
	if slot == nil || slot.Table() != "post_likes_slots" || len(defs) != 1 || defs[0].SlotTable != "post_likes_slots" {
		t.Fatalf("generated slot schema %v, counters %v; want PostLikesSlot on post_likes_slots", slot, defs)
	}
	var cols []string
	for _, f := range slot.Fields {
		cols = append(cols, f.StorageKey())
	}
	if got := strings.Join(cols, ","); got != "slot,n,post_id" && got != "post_id,slot,n" {
		t.Fatalf("PostLikesSlot's columns %s, want post_id, slot and n", got)
	}
}

// The extension's check runs on the graph entc loads from a schema package.
func TestExtensionReportsBadDeclarations(t *testing.T) {
	for _, tc := range []struct {
		dir  string
		want []string
	}{
		{"./testdata/badslots", []string{"Post.likes", "Slots(0) is out of range"}},
		{"./testdata/badwhere", []string{"Shelf.open_count", "subquery"}},
		{"./testdata/badwherecolumn", []string{"Shelf.open_count", "names state", "books", "status, shelf_id"}},
		{"./testdata/bidihooks", []string{"friend_count", "bidirectional M2M edge friends", "kept by triggers"}},
		{"./testdata/twice", []string{"Post.likes: invalid counter declaration: Slots given twice", "Post.views: invalid counter declaration: Slots and AutoSlots both given",
			"Post.shares: invalid counter declaration: Precreate and NoPrecreate both given"}},
		{"./testdata/orphan", []string{"PostLikesSlot", `SlotsOf(Post.Type, "likes")`, "Post does not declare"}},
		{"./testdata/nilopt", []string{"Post.likes", "option 2 of 2 is nil"}},
		{"./testdata/edgeschemahooks", []string{"Post.like_count", "edge schema Like is kept by triggers", "remove ByHooks()",
			"Post.likes_seen", "a count kept by hooks needs Like to have a single id field"}},
		{"./testdata/bytesid", []string{"Blob.reads", "Blob's id", "counters support integer, string and UUID ids"}},
		{"./testdata/appendmismatch", []string{"Story.claps is an Append counter", "StoryClapsSlot declares a slot table", `SlotsOf(Story.Type, "claps")`, "remove the schema"}},
	} {
		t.Run(tc.dir, func(t *testing.T) {
			g, err := entc.LoadGraph(tc.dir, &gen.Config{})
			if err != nil {
				t.Fatalf("load %s: %v", tc.dir, err)
			}
			if g, err = withSlotSchemas(g); err == nil {
				_, err = defsOf(g)
			}
			if err == nil {
				t.Fatal("the extension accepted the schema")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

func TestTypeNamesBecomeSnakeCaseAsEntWritesThem(t *testing.T) {
	for in, want := range map[string]string{"Post": "post", "BlogPost": "blog_post", "HTTPLog": "http_log", "A": "a"} {
		if got := snake(in); got != want {
			t.Errorf("snake(%q) = %q, want %q", in, got, want)
		}
	}
}

// SlotsOf and the extension name a slot table alike, as GORM would (the
// singular of the parent table), also for irregular plurals, and the owner
// key takes the type of an id declared in a mixin.
func TestExtensionAndSlotsOfAgreeOnNames(t *testing.T) {
	g, err := entc.LoadGraph("./testdata/names", &gen.Config{})
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	defs, err := defsOf(g)
	if err != nil {
		t.Fatalf("the extension refused the schema: %v", err)
	}
	got := map[string]string{}
	for _, d := range defs {
		got[d.Type] = d.SlotTable + " " + d.Owner
	}
	want := map[string]string{
		"Selfie": "selfy_likes_slots selfy_id", // jinzhu/inflection's singular of "selfies", as GORM has it
		"Media":  "medium_likes_slots medium_id",
		"Badge":  "badge_awarded_slots badge_id",
	}
	for typ, w := range want {
		if got[typ] != w {
			t.Errorf("%s: slot table and owner %q, want %q", typ, got[typ], w)
		}
	}
	for _, n := range g.Nodes {
		if n.Name == "BadgeAwardedSlot" {
			for _, f := range n.Fields {
				if f.Name == "badge_id" && f.Type.String() != "string" {
					t.Errorf("badge_id is a %s, want string (Badge's id)", f.Type)
				}
			}
		}
	}
}

// A client generated without the extension does not compile where
// entcounter takes one, and the compiler names the first method of Source
// it lacks: that name says what to do.
func TestTheCompilerNamesTheExtensionForAClientGeneratedWithoutIt(t *testing.T) {
	src := reflect.TypeOf((*Source)(nil)).Elem()
	if first := src.Method(0).Name; first != "GeneratedByEntcounterExtension" {
		t.Fatalf("the first method of Source is %s: a client without the extension would be told it misses that, not the extension", first)
	}
}

// SlotsOf given something other than a schema's Type method fails
// generation with ent's error for the field, naming SlotsOf and what to
// pass, as ent reports a field's error (Descriptor.Err), not as a panic of
// the mixin.
func TestSlotsOfAnOwnerThatIsNotASchemaFailsGeneration(t *testing.T) {
	_, err := entc.LoadGraph("./testdata/badowner", &gen.Config{})
	if err == nil || !strings.Contains(err.Error(), `SlotsOf(Post, "likes")`) || !strings.Contains(err.Error(), "Type method") || strings.Contains(err.Error(), "panic") {
		t.Fatalf("loading a SlotsOf(\"Post\", ...): %v, want an error naming SlotsOf and the Type method", err)
	}
}
