package entcounter

import (
	"context"
	"fmt"

	"github.com/hotcounter/hotcounter"
	"github.com/hotcounter/hotcounter/internal/engine"
	"github.com/hotcounter/hotcounter/internal/writebehind"
)

// SchemaSQL returns, without writing anything to the database, every
// statement the client's counters need beyond what ent's own migration
// writes (the slot and delta tables are ent schemas, in ent's files): per
// counter, PostgreSQL's fillfactor on its slot table, the slot rows of the
// parents that exist where slot rows are pre-created (MySQL/MariaDB by
// default), and for a count kept by triggers its triggers (and functions)
// and one statement that counts the children that exist. Down removes the
// triggers.
//
//	script, err := entcounter.SchemaSQL(ctx, client)
//	os.WriteFile("migrations/20261206000002_counters.sql", []byte(script.UpSQL()), 0o644)
//
// It goes in a file after the one ent writes (migrate.NamedDiff), which
// creates the tables it names. Every Up statement can run again on a
// database that has them, changing nothing. On PostgreSQL the client
// reads, once, under ctx, whether the database has the Citus extension
// (whose count triggers take another form); a client whose database it
// cannot reach gets PostgreSQL's statements. Nothing else is sent.
// docs/migrations.md walks through NamedDiff, Atlas's ent:// and goose.
func SchemaSQL(ctx context.Context, src Source) (hotcounter.Script, error) {
	r := src.HotCounter()
	st, err := r.Store(ctx)
	if err != nil {
		return hotcounter.Script{}, err
	}
	parts := make([]engine.SchemaPart, 0, len(r.Defs))
	for _, d := range r.Defs {
		part := engine.SchemaPart{Counter: d.Counter(st.Dialect)}
		if d.Count != nil {
			cs := d.CountSpec()
			part.Count = &cs
			part.Counter.Options.Hooks = d.Count.Hooks
			// ent's M2M join tables delete with either side (ON DELETE
			// CASCADE on both keys).
			part.Cascades = cs.Across != nil
		}
		parts = append(parts, part)
	}
	script, err := st.Schema(parts)
	if err != nil {
		return hotcounter.Script{}, fmt.Errorf("entcounter: %w", err)
	}
	return script, nil
}

// BufferSchemaSQL returns, without writing anything (it reads what
// SchemaSQL reads), the statements of the table in which a write-behind
// buffer of cfg records the batches it applied (cfg.Ledger,
// hotcounter_ledger by default) and its index: Up creates them if they do
// not exist, Down drops the table. NewBuffer
// creates the table when it is missing; one that a migration file made is
// used as it is, so the application's role needs no right to create
// tables.
//
//	script, err := entcounter.BufferSchemaSQL(ctx, client, hotcounter.BufferConfig{})
func BufferSchemaSQL(ctx context.Context, src Source, cfg hotcounter.BufferConfig) (hotcounter.Script, error) {
	st, err := src.HotCounter().Store(ctx)
	if err != nil {
		return hotcounter.Script{}, err
	}
	script, err := st.LedgerSchema(writebehind.Ledger(cfg))
	if err != nil {
		return hotcounter.Script{}, fmt.Errorf("entcounter: %w", err)
	}
	return script, nil
}
