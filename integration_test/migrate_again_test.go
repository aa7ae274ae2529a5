package integration_test

import (
	"context"
	"regexp"
	"strings"
	"sync"
	"testing"

	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/hotcounter/hotcounter/entcounter"
	"github.com/hotcounter/hotcounter/integration_test/ent"
)

// ddl matches a statement that changes the schema.
var ddl = regexp.MustCompile(`(?i)^\s*(CREATE|DROP|ALTER|RENAME|COMMENT)\b`)

// ddlOf returns the statements among stmts that change the schema.
func ddlOf(stmts []string) []string {
	var out []string
	for _, s := range stmts {
		if ddl.MatchString(s) {
			out = append(out, s)
		}
	}
	return out
}

// TestMigratingAgainWithNothingChangedSendsNoDDL: a deploy runs the
// migration of a schema it already has; with nothing changed, neither
// AutoMigrate nor Schema.Create with WithCounters sends any statement
// that changes the schema (each would lock the table it names, and on
// MySQL/MariaDB commit on its own).
func TestMigratingAgainWithNothingChangedSendsNoDDL(t *testing.T) {
	t.Run("gorm", func(t *testing.T) {
		eachDB(t, func(t *testing.T, e *env) {
			models := []any{&FilePost{}, &FileComment{}, &FileTag{}}
			must(t, e.db.AutoMigrate(models...))
			rec := &recordingLogger{Interface: logger.Discard}
			must(t, e.db.Session(&gorm.Session{Logger: rec}).AutoMigrate(models...))
			if sent := ddlOf(rec.stmts); len(sent) > 0 {
				t.Errorf("the second AutoMigrate sent %d statements that change the schema:\n%s", len(sent), strings.Join(sent, "\n"))
			}
		})
	})
	t.Run("ent", func(t *testing.T) {
		eachDB(t, func(t *testing.T, e *env) {
			ctx := context.Background()
			ee := withEnt(t, e, false)
			must(t, entMigrate(ctx, ee.client, entcounter.WithCounters(ee.client)))
			var mu sync.Mutex
			var stmts []string
			again := ent.NewClient(ent.Driver(entDriverSending(e.kind, ee.sqlDB, func(s string) {
				mu.Lock()
				defer mu.Unlock()
				stmts = append(stmts, strings.TrimPrefix(s[strings.Index(s, "query=")+len("query="):], ""))
			})))
			must(t, entMigrate(ctx, again, entcounter.WithCounters(again)))
			if sent := ddlOf(stmts); len(sent) > 0 {
				t.Errorf("the second Schema.Create sent %d statements that change the schema:\n%s", len(sent), strings.Join(sent, "\n"))
			}
		})
	})
}
