package gormcounter

import (
	"context"
	"errors"
	"strings"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/hotcounter/hotcounter"
	"github.com/hotcounter/hotcounter/internal/countersql"
	"github.com/hotcounter/hotcounter/internal/engine"
)

// A dry run (gorm.Session{DryRun: true}, db.ToSQL) of an update that
// writes counters sends nothing and shows the statements it would send:
// the counters' writes run against a session that records them. A query
// the write would read its keys with returns no row in a dry run, so what
// follows it (on MySQL and MariaDB, the writes of an increment by
// condition) depends on rows a dry run does not read.

// dryRunKey carries a dry run's recorded statements from rewriteUpdate to
// the update's end.
const dryRunKey = "gormcounter:dry_run"

// recorded is one statement a dry run would have sent.
type recorded struct {
	sql  string
	vars []any
}

// dryRun is an engine.Session that records statements and runs none. An
// Exec reports one row written, as if every write found its row; a query
// returns the rows keys names (the parents a write names by their primary
// key) in its first column, or none.
type dryRun struct {
	db   *gorm.DB
	sent *[]recorded
	keys []any
	inTx bool // inside a transaction the write would open (Begin)
}

var _ engine.Session = dryRun{}

func (d dryRun) record(build func(countersql.Writer)) {
	s := &gorm.Statement{DB: d.db, Context: d.db.Statement.Context, Clauses: map[string]clause.Clause{}}
	build(builderWriter{s})
	*d.sent = append(*d.sent, recorded{sql: s.SQL.String(), vars: s.Vars})
}

func (d dryRun) Exec(_ context.Context, build func(countersql.Writer)) (int64, error) {
	d.record(build)
	return 1, nil
}

func (d dryRun) Query(_ context.Context, build func(countersql.Writer)) (engine.Rows, error) {
	d.record(build)
	return &keyRows{keys: d.keys}, nil
}

func (d dryRun) InTx() bool { return d.inTx }

// Begin runs fn as the write would run it in a transaction of its own,
// which chooses its statements as a caller's transaction does (on MySQL
// and MariaDB, the session's own slot rows).
func (d dryRun) Begin(_ context.Context, _ bool, fn func(engine.Session) error) error {
	d.inTx = true
	return fn(d)
}

func (dryRun) ParentGone(error) bool { return false }

// keyRows returns one row per key, the key in its first column.
type keyRows struct {
	keys []any
	at   int
}

func (r *keyRows) Next() bool { r.at++; return r.at <= len(r.keys) }

func (r *keyRows) Scan(dest ...any) error {
	if len(dest) > 0 {
		if p, ok := dest[0].(*any); ok {
			*p = r.keys[r.at-1]
		}
	}
	return nil
}

func (r *keyRows) Close() error { return nil }
func (r *keyRows) Err() error   { return nil }

// dryRunIncrement records the statements of one counter write of a dry run.
func (p *Plugin) dryRunIncrement(db *gorm.DB, inc increment, where clause.Where) error {
	stmt := db.Statement
	t := inc.c.table
	t.Parent = parentTable(stmt)
	var sent []recorded
	if v, ok := stmt.Settings.Load(dryRunKey); ok {
		sent = v.([]recorded)
	}
	_, inTx := stmt.ConnPool.(gorm.TxCommitter)
	s := dryRun{db: db, sent: &sent, inTx: inTx}
	ctx := stmt.Context
	key, byKey := primaryKeyOnly(stmt)
	if byKey && !inc.take {
		s.keys = []any{key}
	}
	var err error
	switch {
	case inc.take:
		// Its reads return nothing in a dry run: what it shows is the take
		// from one row, and the gathering a refusal would follow.
		if err = engine.Take(ctx, s, p.dialect, t, inc.c.opts.Slots, key, inc.delta); errors.Is(err, hotcounter.ErrInsufficient) || errors.Is(err, engine.ErrNotFound) {
			err = nil
		}
	case inc.set:
		var target engine.Target
		if target, err = p.store().DryTarget(inc.c.engine(), inc.c.widths); err == nil {
			target.Table = t
			keys := []any{key}
			if !byKey {
				keys, err = engine.QueryKeys(ctx, s, func(w countersql.Writer) { p.dialect.SelectKeys(w, t, whereCond(where)) })
			}
			if err == nil {
				_, err = engine.Set(ctx, s, p.dialect, target, keys, inc.delta)
			}
		}
	case inc.c.opts.Guarded && byKey && inc.delta > 0:
		err = engine.Restock(ctx, s, p.dialect, t, inc.c.opts.Slots, key, inc.delta)
	default:
		in := engine.Increment{Table: t, Mode: inc.c.opts.Mode, Slots: inc.c.opts.Slots, Widths: inc.c.widths, Delta: inc.delta}
		if byKey {
			in.Key = key
		} else {
			in.Cond = whereCond(where)
		}
		_, err = engine.Apply(ctx, s, p.dialect, in)
	}
	stmt.Settings.Store(dryRunKey, sent)
	return err
}

// showDryRun puts a dry run's recorded statements in the statement's SQL,
// after the parent's own UPDATE if GORM built one: one statement keeps its
// placeholders and Vars; several are written out with their values (each
// numbers its placeholders from 1).
func showDryRun(db *gorm.DB) {
	v, ok := db.Statement.Settings.LoadAndDelete(dryRunKey)
	if !ok {
		return
	}
	stmt := db.Statement
	sent := v.([]recorded)
	if stmt.SQL.Len() > 0 {
		sent = append([]recorded{{sql: stmt.SQL.String(), vars: stmt.Vars}}, sent...)
	}
	stmt.SQL.Reset()
	stmt.Vars = nil
	if len(sent) == 1 {
		stmt.SQL.WriteString(sent[0].sql)
		stmt.Vars = sent[0].vars
		return
	}
	texts := make([]string, len(sent))
	for i, r := range sent {
		texts[i] = db.Dialector.Explain(r.sql, r.vars...)
	}
	stmt.SQL.WriteString(strings.Join(texts, ";\n"))
}
