package entcounter

import (
	"strings"
	"testing"

	"entgo.io/ent/entc"
	"entgo.io/ent/entc/gen"
)

// The extension's check runs on the graph entc loads from a schema package.
func TestExtensionReportsBadDeclarations(t *testing.T) {
	for _, tc := range []struct {
		dir  string
		want []string
	}{
		{"./testdata/missing", []string{"Post.likes", "type PostLikesSlot struct{ ent.Schema }", `entcounter.SlotsOf(Post.Type, "likes")`}},
		{"./testdata/badslots", []string{"Post.likes", "slots=0 is out of range"}},
	} {
		t.Run(tc.dir, func(t *testing.T) {
			g, err := entc.LoadGraph(tc.dir, &gen.Config{})
			if err != nil {
				t.Fatalf("load %s: %v", tc.dir, err)
			}
			_, err = defsOf(g)
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

func TestSnake(t *testing.T) {
	for in, want := range map[string]string{"Post": "post", "BlogPost": "blog_post", "HTTPLog": "http_log", "A": "a"} {
		if got := snake(in); got != want {
			t.Errorf("snake(%q) = %q, want %q", in, got, want)
		}
	}
}
