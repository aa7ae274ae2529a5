package driver_test

import (
	"testing"

	"github.com/hotcounter/hotcounter/internal/driver"
)

// For pairs each database's dialect with its own driver, as a value: the
// MySQL driver refuses compaction where PostgreSQL's and SQLite's run it,
// each chooses the isolation of the library's own transactions, and
// PostgreSQL's dialect on Citus keeps a driver of its own. A name of no
// database is an error, never a dialect without a driver.
func TestForPairsEachDialectWithItsDatabasesDriver(t *testing.T) {
	for _, c := range []struct {
		name     string
		compacts bool
	}{{"postgres", true}, {"pgx", true}, {"sqlite", true}, {"sqlite3", true}, {"mysql", false}} {
		d, err := driver.For(c.name)
		if err != nil {
			t.Fatalf("For(%q): %v", c.name, err)
		}
		if d.Driver == nil {
			t.Fatalf("For(%q) has no driver", c.name)
		}
		_, err = d.Driver.Compaction()
		if compacts := err == nil; compacts != c.compacts {
			t.Errorf("For(%q): compaction allowed %v (%v), want %v", c.name, compacts, err, c.compacts)
		}
	}
	pg, _ := driver.For("postgres")
	// Own transactions at READ COMMITTED: PostgreSQL's always (its
	// statements are written for it, whatever the session's default),
	// MySQL's when asked, SQLite's never (no levels to choose).
	for _, c := range []struct {
		name      string
		asked, rc bool
	}{{"postgres", false, true}, {"postgres", true, true}, {"mysql", false, false}, {"mysql", true, true}, {"sqlite", false, false}, {"sqlite", true, false}} {
		d, _ := driver.For(c.name)
		if got := d.Driver.ReadCommitted(c.asked); got != c.rc {
			t.Errorf("For(%q).Driver.ReadCommitted(%v) = %v, want %v", c.name, c.asked, got, c.rc)
		}
	}
	citus := pg.OnCitus()
	if !citus.Citus() || citus.Driver == nil || pg.Citus() {
		t.Errorf("OnCitus: citus %v (driver %v), plain %v; want a Citus dialect with its driver beside the plain one", citus.Citus(), citus.Driver, pg.Citus())
	}
	if back := citus.WithoutCitus(); back.Citus() || back.Driver == nil {
		t.Errorf("WithoutCitus: citus %v, driver %v", back.Citus(), back.Driver)
	}
	if lite, _ := driver.For("sqlite"); lite.OnCitus().Citus() {
		t.Error("SQLite's dialect OnCitus says Citus")
	}
	if d, err := driver.For("oracle"); err == nil {
		t.Errorf("For(oracle) = %v, want an error", d)
	}
}
