package integration_test

import (
	"bufio"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestCatalogReadsOnMariaDBReadOnlyTheirOwnDatabase checks every read of
// information_schema that the MySQL dialect writes (each one its golden
// file holds) against MariaDB's plan for it: none may make the server read
// every database. MariaDB narrows such a read to one database, or one
// table, only for conditions on constants in WHERE; a join's ON or a
// correlated condition makes it open the definition of every table on the
// server, which on a server of many databases (one per tenant, or a test
// suite's) costs a migration seconds of the server's CPU.
func TestCatalogReadsOnMariaDBReadOnlyTheirOwnDatabase(t *testing.T) {
	reads := catalogReads(t, "../internal/countersql/testdata/mysql.sql")
	if len(reads) < 5 {
		t.Fatalf("found %d reads of information_schema in the golden file, want the dialect's (at least 5)", len(reads))
	}
	eachDB(t, func(t *testing.T, e *env) {
		for name, q := range reads {
			rows, err := e.db.Raw("EXPLAIN " + q).Rows()
			if err != nil {
				t.Fatalf("%s: EXPLAIN %s: %v", name, q, err)
			}
			cols, err := rows.Columns()
			must(t, err)
			for rows.Next() {
				vals := make([]any, len(cols))
				ptrs := make([]any, len(cols))
				for i := range vals {
					ptrs[i] = &vals[i]
				}
				must(t, rows.Scan(ptrs...))
				for i, c := range cols {
					if extra, ok := vals[i].([]byte); ok && c == "Extra" && strings.Contains(string(extra), "Scanned all databases") {
						t.Errorf("%s reads every database (%s):\n%s", name, extra, q)
					}
				}
			}
			must(t, rows.Err())
			rows.Close()
		}
	}, on(my))
}

// catalogReads returns the statements of the golden file at path that read
// information_schema's tables of tables, columns, indexes, keys and
// triggers, by the name the file gives them, with their arguments written
// in as literals.
func catalogReads(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	must(t, err)
	defer f.Close()
	placeholder := regexp.MustCompile(`\$[0-9]+`)
	catalog := regexp.MustCompile(`(?i)information_schema\.(TABLES|COLUMNS|STATISTICS|TRIGGERS|KEY_COLUMN_USAGE|REFERENTIAL_CONSTRAINTS)\b`)
	reads := map[string]string{}
	var name, stmt string
	s := bufio.NewScanner(f)
	s.Buffer(nil, 1<<20)
	for s.Scan() {
		line := s.Text()
		switch {
		case strings.HasPrefix(line, "-- args: "):
			if stmt == "" {
				continue
			}
			args := strings.Fields(strings.Trim(strings.TrimPrefix(line, "-- args: "), "[]"))
			reads[name] = placeholder.ReplaceAllStringFunc(stmt, func(p string) string {
				i, err := strconv.Atoi(p[1:])
				if err != nil || i < 1 || i > len(args) {
					t.Fatalf("%s: %s has no argument in %q", name, p, line)
				}
				return "'" + args[i-1] + "'"
			})
		case strings.HasPrefix(line, "-- "):
			name, stmt = strings.TrimPrefix(line, "-- "), ""
		case catalog.MatchString(line):
			stmt = strings.TrimSuffix(line, ";")
			reads[name] = stmt
		default:
			stmt = ""
		}
	}
	must(t, s.Err())
	return reads
}
