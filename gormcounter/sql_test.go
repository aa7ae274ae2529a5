package gormcounter

import (
	"testing"

	"github.com/glebarez/sqlite"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"
	"gorm.io/gorm/logger"
)

// A combined increment may render its condition after its caller's call
// has returned (a retry of the statement that carries it): the condition
// it renders is the one the caller passed, whatever the caller does to
// its slices afterwards.
func TestFrozenConditionKeepsTheArgumentsOfTheCall(t *testing.T) {
	db, err := gorm.Open(sqlite.Open("file::memory:"), &gorm.Config{Logger: logger.Discard, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	ids := []int{1, 2}
	names := []any{"a", []string{"b", "c"}}
	where := clause.Where{Exprs: []clause.Expression{
		clause.Expr{SQL: "id IN ?", Vars: []any{ids}},
		clause.Or(clause.IN{Column: "name", Values: names}),
	}}
	render := func(w clause.Where) (string, []any) {
		s := &gorm.Statement{DB: db, Clauses: map[string]clause.Clause{}}
		w.Build(s)
		return s.SQL.String(), s.Vars
	}
	wantSQL, wantVars := render(where)
	kept := frozen(where)
	ids[0], ids[1] = 7, 8
	names[0] = "z"
	names[1].([]string)[0] = "y"
	gotSQL, gotVars := render(kept)
	if gotSQL != wantSQL || len(gotVars) != len(wantVars) {
		t.Fatalf("the frozen condition renders %q %v, want %q %v", gotSQL, gotVars, wantSQL, wantVars)
	}
	for i := range wantVars {
		if gotVars[i] != wantVars[i] {
			t.Fatalf("the frozen condition renders %v after the caller changed its slices, want %v", gotVars, wantVars)
		}
	}
	if changedSQL, changedVars := render(where); changedVars[0] == wantVars[0] {
		t.Fatalf("the caller's own condition did not change (%q %v): the test changes nothing", changedSQL, changedVars)
	}
}
