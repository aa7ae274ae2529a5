package spec

import (
	"errors"
	"strings"
	"testing"

	"github.com/hotcounter/hotcounter"
)

func TestTagOptionsParse(t *testing.T) {
	def := Options{Slots: DefaultSlots}
	cases := []struct {
		in   string
		want Options
	}{
		{"", Options{Slots: 16, Mode: Sum}},
		{"slots=64,rollup", Options{Slots: 64, Mode: Rollup}},
		{" slots = 4 , sum ", Options{Slots: 4, Mode: Sum}},
		{"ROLLUP", Options{Slots: 16, Mode: Rollup}},
		{"precreate", Options{Slots: 16, Mode: Sum, Precreate: On}},
		{"precreate=false,slots=2", Options{Slots: 2, Mode: Sum, Precreate: Off}},
		{"slots=1", Options{Slots: 1, Mode: Sum}},
		{"slots=1024", Options{Slots: 1024, Mode: Sum}},
		{"slots=64,skiplocked", Options{Slots: 64, Mode: Sum, SkipLocked: true}},
		{"rollup,SkipLocked", Options{Slots: 16, Mode: Rollup, SkipLocked: true}},
		{"counts=Objects", Options{Slots: 16, Mode: Sum, Counts: "Objects"}},
		{"counts=Objects,rollup,hooks", Options{Slots: 16, Mode: Rollup, Counts: "Objects", Hooks: true}},
		{"counts=Files,total=size", Options{Slots: 16, Mode: Sum, Counts: "Files", Total: "size"}},
		{"counts=Objects, where=status IN ('a', 'b'), x = 1", Options{Slots: 16, Mode: Sum, Counts: "Objects", Where: "status IN ('a', 'b'), x = 1"}},
		{"slots=4,counts = Objects,WHERE = n > 0", Options{Slots: 4, Mode: Sum, Counts: "Objects", Where: "n > 0"}},
		{"guarded", Options{Slots: 16, Mode: Sum, Guarded: true}},
		{"slots=8,guarded,precreate", Options{Slots: 8, Mode: Sum, Guarded: true, Precreate: On}},
		{"slots=auto", Options{Slots: 16, Auto: true, Mode: Sum}},
		{"slots=AUTO,max=64,rollup", Options{Slots: 64, Auto: true, Mode: Rollup}},
		{"max=4,slots=auto", Options{Slots: 4, Auto: true, Mode: Sum}},
	}
	for _, c := range cases {
		got, err := ParseList(c.in, def)
		if err != nil || got != c.want {
			t.Errorf("ParseList(%q) = %+v, %v; want %+v", c.in, got, err, c.want)
		}
	}
	if got, _ := ParseList("", Options{Slots: 8}); got.Slots != 8 {
		t.Errorf("the default slot count is not used: %+v", got)
	}
}

func TestParseListRejects(t *testing.T) {
	cases := map[string]string{
		"slots=0":                          "slots=0",
		"slots=-1":                         "slots=-1",
		"slots=1025":                       "slots=1025",
		"slots=x":                          "slots=x",
		"slots":                            "needs a number",
		"max=8":                            "max= bounds slots=auto",
		"slots=auto,max=0":                 "slots=auto,max=0 is out of range",
		"slots=auto,max=x":                 "max=x is not a number",
		"slots=auto,append":                "append counter has no slot rows",
		"slots=auto,precreate":             "precreate makes every slot row",
		"slots=auto,skiplocked":            "use one or the other",
		"slots=auto,guarded":               "give slots=N",
		"slots=auto,counts=Objects":        "give slots=N",
		"slots=":                           "needs a number",
		"fast":                             `"fast"`,
		"sum,rollup":                       "more than one",
		"append,rollup":                    "more than one",
		"append,precreate":                 "precreate",
		"append,skiplocked":                "skiplocked",
		"rollup=yes":                       "takes no value",
		"rollup,precreate":                 "precreate",
		"precreate=maybe":                  "precreate=maybe",
		"precreate=":                       "precreate=",
		"skiplocked=true":                  "takes no value",
		"guarded,rollup":                   "guarded applies to sum counters",
		"guarded,counts=Objects":           "guarded applies to sum counters",
		"guarded=yes":                      "takes no value",
		"slots=4,unknown=":                 `"unknown="`,
		"where=a = 1":                      "add counts=",
		"hooks":                            "add counts=",
		"counts=":                          "counts needs",
		"total=size":                       "add counts=",
		"counts=Files,total=":              "total needs",
		"counts=Files,total=size,hooks":    "remove hooks",
		"counts=Objects,append":            "not append",
		"counts=Objects,skiplocked":        "remove skiplocked",
		"counts=Objects,where=":            "where= needs",
		"counts=X,where=a=1; DROP TABLE x": "without ';'",
		"slots=4,slots=8":                  "slots given twice",
		"rollup,rollup":                    "rollup given twice",
		"slots=auto,slots=8":               "slots given twice",
		"hooks=yes":                        "takes no value",
	}
	for in, says := range cases {
		_, err := ParseList(in, Options{Slots: DefaultSlots})
		if !errors.Is(err, hotcounter.ErrInvalidCounter) || !strings.Contains(err.Error(), says) {
			t.Errorf("ParseList(%q) error = %v; want hotcounter.ErrInvalidCounter saying %s", in, err, says)
		}
	}
}

func TestPrecreateIsOnBySumModeAndTheDatabaseDefault(t *testing.T) {
	for _, c := range []struct {
		o        Options
		def, yes bool
	}{
		{Options{Mode: Sum}, true, true},
		{Options{Mode: Sum}, false, false},
		{Options{Mode: Sum, Precreate: Off}, true, false},
		{Options{Mode: Sum, Precreate: On}, false, true},
		{Options{Mode: Rollup}, true, false},
		{Options{Mode: Append}, true, false},
	} {
		if got := c.o.PrecreateOn(c.def); got != c.yes {
			t.Errorf("%+v.PrecreateOn(%v) = %v", c.o, c.def, got)
		}
	}
}

func TestKeepColumnIsForSumCounters(t *testing.T) {
	ok := Options{Slots: 16, KeepColumn: true}
	if err := ok.Validate(); err != nil {
		t.Fatalf("a sum counter that keeps its column: %v", err)
	}
	for _, o := range []Options{
		{Slots: 16, KeepColumn: true, Mode: Rollup},
		{Slots: 16, KeepColumn: true, Mode: Append},
		{Slots: 16, KeepColumn: true, Counts: "Objects"},
	} {
		if err := o.Validate(); !errors.Is(err, hotcounter.ErrInvalidCounter) {
			t.Errorf("%+v: got %v, want hotcounter.ErrInvalidCounter", o, err)
		}
	}
}

// An ent declaration's errors name entcounter's options, not GORM's tag
// words.
func TestEntErrorsNameEntOptions(t *testing.T) {
	cases := []struct {
		o    Options
		says string
	}{
		{Options{Slots: 0}, "Slots(0) is out of range"},
		{Options{Slots: 4096, Auto: true}, "AutoSlots(4096) is out of range"},
		{Options{Slots: 16, Where: "status = 'open'"}, "Where, Total and ByHooks apply to a count of child rows: add Counts(<edge>)"},
		{Options{Slots: 16, Mode: Rollup, Precreate: On}, "Precreate() applies to sum counters"},
		{Options{Slots: 16, Counts: "files", Total: "size", Hooks: true}, `Total("size") is kept by triggers: remove ByHooks()`},
		{Options{Slots: 16, Counts: "items", SkipLocked: true}, "remove SkipLocked()"},
		{Options{Slots: 16, Auto: true, Guarded: true}, "AutoSlots: a guarded counter spreads its stock over a fixed number of rows: give Slots(n)"},
	}
	for _, c := range cases {
		err := c.o.ValidateAs(EntNames)
		if !errors.Is(err, hotcounter.ErrInvalidCounter) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%+v: %v; want hotcounter.ErrInvalidCounter saying %s", c.o, err, c.says)
		}
		for _, word := range []string{"slots=", "counts=", "where=", "total=", "precreate ", "skiplocked", "hooks"} {
			if err != nil && strings.Contains(err.Error(), word) {
				t.Errorf("%+v: %v speaks GORM's tag word %q", c.o, err, word)
			}
		}
	}
}
