package gormcounter

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
	"gorm.io/gorm/schema"

	"github.com/hotcounter/hotcounter"
	"github.com/hotcounter/hotcounter/internal/countersql"
	"github.com/hotcounter/hotcounter/internal/engine"
)

// increment is one counter delta taken out of an update, or an
// assignment of a total.
type increment struct {
	c     *counter
	delta int64
	take  bool // a Take of delta from a guarded counter
	// floor: a decrease of an unsigned counter, written as a take of
	// delta (> 0) from its slot rows, refused when less is left.
	floor bool
	set   bool // an assignment: delta is the new total
}

// rewriteUpdate runs before GORM saves associations and updates. It takes
// every counter assignment out of the update (from an Updates/UpdateColumn
// map and from a SET clause), checks that each is an increment, and writes
// each as one slot upsert over the rows the update targets, in the caller's
// transaction. The rest of the update proceeds as GORM would run it. When
// nothing else is left, neither the parent row nor the model's associations
// are written: an increment touches its slot rows and nothing more.
func (p *Plugin) rewriteUpdate(db *gorm.DB) {
	stmt := db.Statement
	if db.Error != nil || stmt.Schema == nil {
		return
	}
	m, err := p.model(db, stmt.Schema)
	if err != nil {
		db.AddError(err)
		return
	}
	incs, others, err := takeIncrements(stmt, m)
	if err != nil {
		db.AddError(err)
		return
	}
	if len(incs) == 0 {
		return
	}
	where, ok := targetConditions(db)
	if !ok && !db.AllowGlobalUpdate {
		db.AddError(fmt.Errorf("gormcounter: write %s: %w: name the rows (db.Model(&post) with its key set, or Where), "+
			"or allow it for every row with db.Session(&gorm.Session{AllowGlobalUpdate: true})", incs[0].c.name(), gorm.ErrMissingWhereClause))
		return
	}
	var affected int64
	var key string
	keyed := false
	if p.obs.Counting() {
		key, keyed = rowKey(stmt)
	}
	for _, inc := range incs {
		if db.DryRun {
			if err := p.dryRunIncrement(db, inc, where); err != nil {
				db.AddError(fmt.Errorf("gormcounter: dry run of %s: %w", inc.c.name(), err))
				return
			}
			continue
		}
		start := time.Now()
		n, err := p.increment(db, inc, where)
		p.obs.Increment(stmt.Context, parentTable(stmt), inc.c.field.DBName, time.Since(start), err)
		if err != nil {
			var short *hotcounter.Shortage
			switch {
			case inc.floor && errors.Is(err, engine.ErrNotFound):
				continue // no such row: nothing to decrease, as an UPDATE would find none
			case inc.floor && errors.As(err, &short):
				db.AddError(fmt.Errorf("gormcounter: %s: %w: a decrease of %d would take it below zero (%d left); nothing was written",
					inc.c.name(), hotcounter.ErrOverflow, inc.delta, short.Left))
			case inc.floor:
				db.AddError(fmt.Errorf("gormcounter: decrease %s by %d: %w", inc.c.name(), inc.delta, err))
			case inc.take && errors.Is(err, engine.ErrNotFound):
				db.AddError(fmt.Errorf("gormcounter: take %d from %s: %w (%w)", inc.delta, inc.c.name(), gorm.ErrRecordNotFound, err))
			case inc.take:
				db.AddError(fmt.Errorf("gormcounter: take %d from %s: %w", inc.delta, inc.c.name(), err))
			case inc.set:
				db.AddError(fmt.Errorf("gormcounter: set %s to %d: %w", inc.c.name(), inc.delta, err))
			default:
				// A write that failed on the counter's own missing table says
				// what makes it (hotcounter.ErrNotMigrated).
				if named := p.store().NameMissing(stmt.Context, gormConn{db: db.Session(&gorm.Session{NewDB: true})}, inc.c.engine(), err); named != err {
					db.AddError(named)
					return
				}
				db.AddError(fmt.Errorf("gormcounter: increment %s: %w", inc.c.name(), err))
			}
			return
		}
		affected = max(affected, n)
		if keyed {
			p.obs.CountWrite(parentTable(stmt), inc.c.field.DBName, key, true)
		}
	}
	if others == 0 {
		stmt.Settings.Store(skipParentUpdate, true)
		// GORM would save loaded associations (writing their rows, and the
		// parent's foreign keys) even for an update of counters alone.
		stmt.Omits = append(stmt.Omits[:len(stmt.Omits):len(stmt.Omits)], clause.Associations)
		db.RowsAffected = affected
	}
}

// skipDefaultTransaction runs before GORM opens its default transaction
// for an update. When the update writes one counter and nothing else, on a
// model without BeforeSave, BeforeUpdate, AfterUpdate or AfterSave hooks
// (or with them skipped), outside the caller's transaction, GORM opens
// none: the increment is written as Increment writes it, its own statement
// (retried on a serialization failure or deadlock, combined with
// concurrent increments of the row), where the transaction would hold a
// connection for nothing and turn a SERIALIZABLE conflict into the
// caller's error. Any other update is left to GORM's transaction, atomic
// with the rest.
func (p *Plugin) skipDefaultTransaction(db *gorm.DB) {
	stmt := db.Statement
	if db.Error != nil || db.DryRun || db.Config.SkipDefaultTransaction || stmt.Schema == nil {
		return
	}
	if _, inTx := stmt.ConnPool.(gorm.TxCommitter); inTx {
		return
	}
	if s := stmt.Schema; !stmt.SkipHooks && (s.BeforeSave || s.BeforeUpdate || s.AfterUpdate || s.AfterSave) {
		return
	}
	if _, set := stmt.Clauses["SET"]; set {
		return
	}
	dest, ok := stmt.Dest.(map[string]any)
	if !ok || len(dest) != 1 {
		return
	}
	m, err := p.model(db, stmt.Schema)
	if err != nil || m == nil {
		return
	}
	for name, v := range dest {
		c := m.lookup(name)
		if c == nil {
			return
		}
		if inc, ok, err := incrementOf(stmt, c, v); err != nil || !ok || inc.set {
			return
		}
	}
	cfg := *db.Config
	cfg.SkipDefaultTransaction = true
	db.Config = &cfg
}

// takeIncrements takes the counter assignments out of an update's map (or
// pointer to one) and SET clause, in counter order, and returns them with
// the number of other assignments left for GORM. An assignment that is not
// an increment, or any assignment to a count of child rows, is an error
// naming the counter.
func takeIncrements(stmt *gorm.Statement, m *model) (incs []increment, others int, err error) {
	take := func(c *counter, v any) error {
		inc, ok, err := incrementOf(stmt, c, v)
		if ok {
			incs = append(incs, inc)
		}
		return err
	}
	fromDest, err := takeFromDest(stmt, m, take)
	if err != nil {
		return nil, 0, err
	}
	fromSet, err := takeFromSet(stmt, m, take)
	if err != nil {
		return nil, 0, err
	}
	sort.SliceStable(incs, func(i, j int) bool { return incs[i].c.index < incs[j].c.index })
	return incs, fromDest + fromSet, nil
}

// incrementOf is the write that the value v assigned to counter c asks
// for (ok), if the update writes c's column at all: a take, an assignment
// of the total or an increment; or the error naming c of a value the
// counter does not take.
func incrementOf(stmt *gorm.Statement, c *counter, v any) (inc increment, ok bool, err error) {
	if !updatesColumn(stmt, c) {
		return increment{}, false, nil // left out by Select or Omit, as GORM leaves it out
	}
	if c.count != nil {
		return increment{}, false, fmt.Errorf("gormcounter: %s: %w: it counts %s rows and changes only when they do (gormcounter.Recount corrects it)",
			c.name(), hotcounter.ErrNotIncrement, c.count.rel.FieldSchema.Name)
	}
	if tv, ok := v.(takeValue); ok {
		if !c.opts.Guarded {
			return increment{}, false, fmt.Errorf("gormcounter: Take %s: %w: declare it `gorm:\"counter:guarded\"`", c.name(), hotcounter.ErrNotGuarded)
		}
		return increment{c: c, delta: tv.amount, take: true}, true, nil
	}
	if total, ok := toInt64(v); ok {
		// An explicit value: the new total, as ent's SetX makes it.
		if c.opts.Guarded {
			return increment{}, false, fmt.Errorf("gormcounter: %s: %w: an assignment could take the stock down; Increment restocks and gormcounter.Take sells",
				c.name(), hotcounter.ErrNegativeGuarded)
		}
		if !fitsField(c.field.FieldType, total) {
			return increment{}, false, fmt.Errorf("gormcounter: %s: %w: an assignment of %d is beyond what a %s holds; nothing was written",
				c.name(), hotcounter.ErrOverflow, total, c.field.FieldType)
		}
		return increment{c: c, delta: total, set: true}, true, nil
	}
	delta, err := c.parseIncrement(v)
	if err != nil {
		return increment{}, false, err
	}
	if c.opts.Guarded && delta < 0 {
		return increment{}, false, fmt.Errorf("gormcounter: %s: %w: a decrease of %d could take it below zero; use gormcounter.Take, which refuses when less is left",
			c.name(), hotcounter.ErrNegativeGuarded, -delta)
	}
	if c.unsigned() && delta < 0 {
		if err := c.decreaseAllowed(); err != nil {
			return increment{}, false, err
		}
		return increment{c: c, delta: -delta, take: true, floor: true}, true, nil
	}
	return increment{c: c, delta: delta}, true, nil
}

// takeFromDest hands take the counter assignments of the update's
// destination (a map, a pointer to one, or a struct whose counters the
// caller selected by name), takes a map's out of it, and returns the
// number of other assignments left for GORM.
func takeFromDest(stmt *gorm.Statement, m *model, take func(*counter, any) error) (others int, err error) {
	dest, isMap := stmt.Dest.(map[string]any)
	if pm, ok := stmt.Dest.(*map[string]any); ok && pm != nil {
		dest, isMap = *pm, true
	}
	switch {
	case isMap:
		return takeFromMap(stmt, m, dest, take)
	case stmt.Dest != nil && m != nil && len(stmt.Selects) > 0:
		// Updates(struct) leaves counters alone (a whole-row write would
		// erase concurrent increments), unless the caller selected one by
		// name: then the struct's value is an assignment of the total.
		rv := reflect.Indirect(reflect.ValueOf(stmt.Dest))
		for _, name := range stmt.Selects {
			if c := m.lookup(name); c != nil {
				if rv.Kind() != reflect.Struct || rv.Type() != m.schema.ModelType {
					return 0, fmt.Errorf("gormcounter: %s: %w: an update from a %s cannot set it; assign a value with Update", c.name(), hotcounter.ErrNotIncrement, rv.Type())
				}
				v, _ := c.field.ValueOf(stmt.Context, rv)
				if err := take(c, v); err != nil {
					return 0, err
				}
			}
		}
	}
	return 1, nil
}

// takeFromMap hands take the counter entries of the update map dest and
// leaves GORM a copy without them (stmt.Dest); an Increment or Take of a
// field that is not a counter is an error naming it.
func takeFromMap(stmt *gorm.Statement, m *model, dest map[string]any, take func(*counter, any) error) (others int, err error) {
	var rest map[string]any
	for k, v := range dest {
		c := m.lookup(k)
		if c == nil {
			if err := notACounter(stmt, v); err != nil {
				return 0, err
			}
			continue
		}
		if err := take(c, v); err != nil {
			return 0, err
		}
		if rest == nil {
			rest = make(map[string]any, len(dest))
			for k2, v2 := range dest {
				rest[k2] = v2
			}
		}
		delete(rest, k)
	}
	if rest == nil {
		return len(dest), nil
	}
	stmt.Dest = rest
	return len(rest), nil
}

// notACounter is the error of an Increment or a Take (v) of a field that
// is no counter, if v is one.
func notACounter(stmt *gorm.Statement, v any) error {
	if iv, ok := v.(incrementValue); ok {
		if stmt.Schema.LookUpField(iv.field) == nil {
			return fmt.Errorf("gormcounter: Increment %s.%s: %s has no field or column %q (%w)", stmt.Schema.Name, iv.field, stmt.Schema.Name, iv.field, hotcounter.ErrNotCounter)
		}
		return fmt.Errorf("gormcounter: Increment %s.%s: %w (tag it `gorm:\"counter\"`)", stmt.Schema.Name, iv.field, hotcounter.ErrNotCounter)
	}
	if tv, ok := v.(takeValue); ok {
		if stmt.Schema.LookUpField(tv.field) == nil {
			return fmt.Errorf("gormcounter: Take %s.%s: %s has no field or column %q (%w)", stmt.Schema.Name, tv.field, stmt.Schema.Name, tv.field, hotcounter.ErrNotCounter)
		}
		return fmt.Errorf("gormcounter: Take %s.%s: %w (tag it `gorm:\"counter:guarded\"`)", stmt.Schema.Name, tv.field, hotcounter.ErrNotCounter)
	}
	return nil
}

// takeFromSet hands take the counter assignments of the update's SET
// clause and removes them from it, and returns the number of others.
func takeFromSet(stmt *gorm.Statement, m *model, take func(*counter, any) error) (others int, err error) {
	cl, ok := stmt.Clauses["SET"]
	if !ok || m == nil {
		return 0, nil
	}
	set, ok := cl.Expression.(clause.Set)
	if !ok {
		return 0, nil
	}
	kept := make(clause.Set, 0, len(set))
	for _, a := range set {
		c := m.lookup(a.Column.Name)
		if c == nil {
			kept = append(kept, a)
			continue
		}
		if err := take(c, a.Value); err != nil {
			return 0, err
		}
	}
	if len(kept) != len(set) {
		if len(kept) == 0 {
			// An empty SET would render "SET id = id" and lock the parent row.
			delete(stmt.Clauses, "SET")
		} else {
			cl.Expression = kept
			stmt.Clauses["SET"] = cl
		}
	}
	return len(kept), nil
}

// increment writes one counter's increment of the rows that where selects
// (see engine.Apply), sharing a statement with concurrent increments of the
// same rows where it may (see combineKey), and returns how many parents it
// incremented.
func (p *Plugin) increment(db *gorm.DB, inc increment, where clause.Where) (int64, error) {
	stmt := db.Statement
	parent := parentTable(stmt)
	t := inc.c.table
	t.Parent = parent
	if inc.set {
		return p.set(db, inc.c, t, where, inc.delta)
	}
	if inc.floor {
		return p.decrease(db, inc, t, where)
	}
	if inc.c.opts.Guarded {
		if key, ok := primaryKeyOnly(stmt); ok {
			return p.guarded(db, inc, t, key, where)
		}
		if inc.take {
			return 0, fmt.Errorf("gormcounter: Take %s: name one row by its primary key (db.Model(&item)), with no other condition", inc.c.name())
		}
	}
	in := engine.Increment{Table: t, Mode: inc.c.opts.Mode, Slots: inc.c.opts.Slots, Widths: inc.c.widths,
		SkipLocked: inc.c.opts.SkipLocked && singleTarget(stmt), Guarded: inc.c.opts.Guarded}
	if key, ok := primaryKeyOnly(stmt); ok {
		in.Key = key
	} else {
		in.Cond = whereCond(where)
	}
	// A combined write may run on another goroutine after this call has
	// returned (for callers that shared its statement): it must not touch
	// db, which the caller owns. It gets a session of its own and what it
	// needs of db's statement, read now.
	s := gormSession{gormConn{db: detach(db), table: parent}}
	write := func(ctx context.Context, delta int64) (int64, error) {
		in := in
		in.Delta = delta
		return engine.Apply(ctx, s, p.dialect, in)
	}
	in.Delta = inc.delta
	if in.Combines(!sharedPool(db)) {
		if key, ok := p.combineKey(db, inc.c, parent, where); ok {
			if in.Cond != nil {
				// The condition is rendered by the statement that carries
				// the increment, and again by each retry of it, maybe after
				// this call has returned: it must not read slices the
				// caller may reuse (Where("id IN ?", ids)).
				in.Cond = whereCond(frozen(where))
			}
			return p.combined.Do(stmt.Context, key, inc.delta, write)
		}
	}
	return write(stmt.Context, inc.delta)
}

// set makes total the value of counter c of the rows that where selects
// (see engine.Set), in db's transaction or one of its own, and returns how
// many rows it set.
func (p *Plugin) set(db *gorm.DB, c *counter, t countersql.Table, where clause.Where, total int64) (int64, error) {
	stmt := db.Statement
	ctx := stmt.Context
	s := gormSession{gormConn{db: db.Session(&gorm.Session{NewDB: true}), table: t.Parent}}
	target, err := p.target(ctx, s.gormConn, c, t)
	if err != nil {
		return 0, err
	}
	var keys []any
	if key, ok := primaryKeyOnly(stmt); ok {
		keys = []any{key}
	} else if keys, err = engine.QueryKeys(ctx, s, func(w countersql.Writer) { p.dialect.SelectKeys(w, t, whereCond(where)) }); err != nil {
		return 0, err
	}
	return engine.Set(ctx, s, p.dialect, target, keys, total)
}

// target is counter c, stored in t, as engine.Start and engine.Set write it.
func (p *Plugin) target(ctx context.Context, conn gormConn, c *counter, t countersql.Table) (engine.Target, error) {
	// Where its values live is probed and kept under the counter's own
	// table, as increments and loads keep it; the statement's table (db.Table,
	// a schema-qualified name) is what it writes.
	target, err := p.store().Target(ctx, conn, c.engine(), c.widths)
	target.Table = t
	return target, err
}

// combineKey names what an increment of counter c writes, for p.combined:
// the pool it runs on, the counter, and the parent rows (the SQL and
// arguments of their condition). ok is false where the increment must be a
// statement of its own for GORM's reasons (engine.Increment.Combines gives
// the rest): inside a transaction (the caller's, or GORM's default one
// around an update) or on a dedicated connection (db.Connection), in a dry
// run, with combining turned off, with a logger that is not a pointer, or
// where the condition holds an argument that is not a plain value. Callers that combine share the first
// one's statement: its *gorm.DB (same pool, counter, table, condition and
// logger, by the key) and its context values.
func (p *Plugin) combineKey(db *gorm.DB, c *counter, parent string, where clause.Where) (string, bool) {
	// (With InFlight < 0 the group would run each call alone: no key to
	// build.)
	if p.cfg.InFlight < 0 || db.DryRun || !sharedPool(db) {
		return "", false
	}
	s := session(db, parent).Statement
	whereCond(where)(builderWriter{s})
	var k strings.Builder
	fmt.Fprintf(&k, "%p\x00%p\x00%s\x00%s", db.Statement.ConnPool, c, parent, s.SQL.String())
	// The statement is logged by the first caller's logger: callers with
	// other loggers (a Debug() session) get statements of their own.
	if lg := reflect.ValueOf(db.Logger); lg.Kind() == reflect.Pointer {
		fmt.Fprintf(&k, "\x00%s:%x", lg.Type(), lg.Pointer())
	} else {
		return "", false
	}
	for _, v := range s.Vars {
		if v == nil {
			k.WriteString("\x00nil")
			continue
		}
		// The value itself, never its String method, and its type by
		// package path: equal keys must mean equal arguments.
		rv := reflect.ValueOf(v)
		k.WriteString("\x00" + rv.Type().PkgPath() + "." + rv.Type().String() + ":")
		switch {
		case rv.Kind() == reflect.String:
			k.WriteString(strconv.Quote(rv.String()))
		case rv.Kind() == reflect.Bool:
			k.WriteString(strconv.FormatBool(rv.Bool()))
		case rv.CanInt():
			k.WriteString(strconv.FormatInt(rv.Int(), 10))
		case rv.CanUint():
			k.WriteString(strconv.FormatUint(rv.Uint(), 10))
		case rv.CanFloat():
			k.WriteString(strconv.FormatFloat(rv.Float(), 'g', -1, 64))
		default:
			return "", false
		}
	}
	return k.String(), true
}

// sharedPool reports whether db's statements run on the connection pool,
// not in a transaction nor on a dedicated connection (db.Connection):
// only there may increments share statements.
func sharedPool(db *gorm.DB) bool {
	switch db.Statement.ConnPool.(type) {
	case *sql.DB, *gorm.PreparedStmtDB:
		return true
	}
	return false
}

// singleTarget reports whether an update's model value names one parent by
// its whole primary key (Model(&post)), so it matches one row at most. Only
// such increments take a free slot (skiplocked); increments of several
// parents use the plain upsert, which locks slot rows in key order.
func singleTarget(stmt *gorm.Statement) bool {
	rv := stmt.ReflectValue
	if rv.Kind() != reflect.Struct || rv.Type() != stmt.Schema.ModelType || len(stmt.Schema.PrimaryFields) == 0 {
		return false
	}
	for _, f := range stmt.Schema.PrimaryFields {
		if _, zero := f.ValueOf(stmt.Context, rv); zero {
			return false
		}
	}
	return true
}

// updatesColumn reports whether an update with the statement's Select and
// Omit would write the counter.
func updatesColumn(stmt *gorm.Statement, c *counter) bool {
	for _, o := range stmt.Omits {
		if c.namedBy(o) {
			return false
		}
	}
	if len(stmt.Selects) == 0 {
		return true
	}
	for _, s := range stmt.Selects {
		if s == "*" || c.namedBy(s) {
			return true
		}
	}
	return false
}

// parentTable is the table an update targets, schema-qualified when the
// model's table is (GORM keeps the qualifier only in TableExpr).
func parentTable(stmt *gorm.Statement) string {
	if full := stmt.Schema.Table; stmt.TableExpr != nil && strings.HasSuffix(full, "."+stmt.Table) {
		return full
	}
	return stmt.Table
}

// targetConditions returns the WHERE of the rows an update targets, as GORM
// would build it: the caller's conditions, the model's query clauses (soft
// delete's "deleted_at IS NULL", which wraps an OR in parentheses first),
// then the primary keys of the model value. ok is false where GORM would
// report ErrMissingWhereClause.
func targetConditions(db *gorm.DB) (where clause.Where, ok bool) {
	stmt := db.Statement
	scratch := &gorm.Statement{
		DB: db, Context: stmt.Context, Table: stmt.Table, TableExpr: stmt.TableExpr,
		Schema: stmt.Schema, Model: stmt.Model, Unscoped: stmt.Unscoped,
		ReflectValue: stmt.ReflectValue, Clauses: map[string]clause.Clause{},
	}
	if c, ok := stmt.Clauses["WHERE"]; ok {
		scratch.Clauses["WHERE"] = c
	}
	for _, c := range stmt.Schema.QueryClauses {
		scratch.AddClause(c)
	}
	if pk := primaryKeyCondition(stmt); pk != nil {
		scratch.AddClause(clause.Where{Exprs: []clause.Expression{pk}})
	}
	c, ok := scratch.Clauses["WHERE"]
	if !ok {
		return clause.Where{}, false
	}
	where, _ = c.Expression.(clause.Where)
	if _, softDelete := scratch.Clauses["soft_delete_enabled"]; softDelete {
		return where, len(where.Exprs) > 1
	}
	return where, len(where.Exprs) > 0
}

// primaryKeyCondition is the condition GORM adds for the primary keys of the
// model value (Model(&post), Model(&posts)), or nil when they are zero.
func primaryKeyCondition(stmt *gorm.Statement) clause.Expression {
	rv := stmt.ReflectValue
	s := stmt.Schema
	switch rv.Kind() {
	case reflect.Struct:
		if rv.Type() != s.ModelType {
			return nil
		}
		var eqs []clause.Expression
		for _, f := range s.PrimaryFields {
			if v, zero := f.ValueOf(stmt.Context, rv); !zero {
				eqs = append(eqs, clause.Eq{Column: clause.Column{Table: clause.CurrentTable, Name: f.DBName}, Value: v})
			}
		}
		if len(eqs) == 0 {
			return nil
		}
		return clause.And(eqs...)
	case reflect.Slice, reflect.Array:
		if rv.Len() == 0 {
			return nil
		}
		_, values := schema.GetIdentityFieldValuesMap(stmt.Context, rv, s.PrimaryFields)
		if len(values) == 0 {
			return nil
		}
		column, qvalues := schema.ToQueryValues(clause.CurrentTable, s.PrimaryFieldDBNames, values)
		return clause.IN{Column: column, Values: qvalues}
	}
	return nil
}

// incrementValue is what Increment assigns: the delta, with the field name
// kept for error messages. If it ever reaches SQL, the plugin was not there
// to take it out, and building it fails the statement.
type incrementValue struct {
	field string
	delta int64
}

func (v incrementValue) Build(b clause.Builder) { _ = b.AddError(unwritten(b, "Increment", v.field)) }

// unwritten is the error for an Increment or Take that reached SQL: the
// plugin is not registered, or the statement has no model (db.Table),
// whose fields name the counters.
func unwritten(b clause.Builder, call, field string) error {
	if stmt, ok := b.(*gorm.Statement); ok && stmt.DB != nil {
		if _, err := pluginOf(stmt.DB); err == nil && stmt.Schema == nil {
			return fmt.Errorf("gormcounter: %s(%q) on table %q: %w", call, field, stmt.Table, ErrNoModel)
		}
	}
	return fmt.Errorf("%s(%q): %w", call, field, errNotRegistered)
}

// parseIncrement returns the delta that v adds to the counter, or an error
// naming the counter if v is not an increment. Accepted: Increment's value;
// gorm.Expr("likes + ?", n), gorm.Expr("likes - ?", n), gorm.Expr("? + likes", n),
// gorm.Expr("likes + 3"); the gen form Expr{SQL: "?+?", Vars: [Column, n]}.
func (c *counter) parseIncrement(v any) (int64, error) {
	switch e := v.(type) {
	case incrementValue:
		return e.delta, c.deltaFits(e.delta)
	case clause.Expr:
		if d, ok := c.parseExpr(e); ok {
			return d, c.deltaFits(d)
		}
	case *clause.Expr:
		if e != nil {
			if d, ok := c.parseExpr(*e); ok {
				return d, c.deltaFits(d)
			}
		}
	}
	return 0, fmt.Errorf("gormcounter: %s: %w: %s; assign gorm.Expr(%q, n) (gorm.io/gen: %s.Add(n)) or call gormcounter.Increment",
		c.name(), hotcounter.ErrNotIncrement, describe(v), c.field.DBName+" + ?", c.field.Name)
}

func describe(v any) string {
	switch e := v.(type) {
	case clause.Expr:
		return fmt.Sprintf("gorm.Expr(%q, %v)", e.SQL, e.Vars)
	case *clause.Expr:
		if e != nil {
			return fmt.Sprintf("gorm.Expr(%q, %v)", e.SQL, e.Vars)
		}
	}
	return fmt.Sprintf("value %#v", v)
}

// parseExpr recognises "A + B" and "A - B" where one side is this counter's
// column (by name, possibly quoted or table-qualified, or as a clause.Column
// argument) and the other an integer (literal or argument). Subtraction needs
// the column on the left.
func (c *counter) parseExpr(e clause.Expr) (int64, bool) { return parseIncrementExpr(e, c.namedBy) }

// parseIncrementExpr is parseExpr for the column that named reports.
func parseIncrementExpr(e clause.Expr, named func(string) bool) (int64, bool) {
	s := strings.TrimSpace(e.SQL)
	opIdx := -1
	for i := 1; i < len(s); i++ { // skip a leading sign
		if s[i] == '+' || s[i] == '-' {
			if opIdx >= 0 {
				return 0, false
			}
			opIdx = i
		}
	}
	if opIdx < 0 {
		return 0, false
	}
	left, right := strings.TrimSpace(s[:opIdx]), strings.TrimSpace(s[opIdx+1:])
	vars := e.Vars
	next := func() (any, bool) {
		if len(vars) == 0 {
			return nil, false
		}
		v := vars[0]
		vars = vars[1:]
		return v, true
	}
	isColumn := func(tok string) bool {
		if tok == "?" {
			v, ok := next()
			if !ok {
				return false
			}
			col, ok := v.(clause.Column)
			return ok && named(col.Name)
		}
		return named(tok)
	}
	number := func(tok string) (int64, bool) {
		if tok == "?" {
			v, ok := next()
			if !ok {
				return 0, false
			}
			return toInt64(v)
		}
		n, err := strconv.ParseInt(tok, 10, 64)
		return n, err == nil
	}
	negative := s[opIdx] == '-'
	var delta int64
	// Read left to right so that ? arguments are consumed in order.
	if isColumn(left) {
		d, ok := number(right)
		if !ok {
			return 0, false
		}
		delta = d
	} else {
		vars = e.Vars
		if negative {
			return 0, false
		}
		d, ok := number(left)
		if !ok || !isColumn(right) {
			return 0, false
		}
		delta = d
	}
	if len(vars) != 0 {
		return 0, false
	}
	if negative {
		if delta == math.MinInt64 {
			return 0, false
		}
		delta = -delta
	}
	return delta, true
}

func toInt64(v any) (int64, bool) {
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return rv.Int(), true
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		u := rv.Uint()
		if u > math.MaxInt64 {
			return 0, false
		}
		return int64(u), true
	}
	return 0, false
}
