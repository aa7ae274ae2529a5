package gormcounter

import (
	"context"
	"reflect"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
	"gorm.io/gorm/schema"
	"gorm.io/plugin/dbresolver"

	"github.com/hotcounter/hotcounter/internal/countersql"
	"github.com/hotcounter/hotcounter/internal/engine"
)

// builderWriter lets countersql write into a GORM statement: identifiers are
// quoted and arguments bound by the dialect GORM is using.
type builderWriter struct{ b clause.Builder }

func (w builderWriter) WriteString(s string) { w.b.WriteString(s) }
func (w builderWriter) Ident(name string)    { w.b.WriteQuoted(name) }
func (w builderWriter) Arg(v any)            { w.b.AddVar(w.b, v) }

// sqlExpr is a statement written by countersql, usable wherever GORM takes a
// clause.Expression.
type sqlExpr func(countersql.Writer)

func (e sqlExpr) Build(b clause.Builder) { e(builderWriter{b}) }

// session returns a fresh statement on db's connection (the caller's
// transaction, if any) and context, with table as the current table. It is
// marked for the primary (dbresolver.Write): the library's reads decide
// writes (a recount's difference, what a take may sell, what a pass folds,
// what a migration creates), and a replica's lag would make them wrong.
// Outside dbresolver the mark does nothing; in a transaction neither.
func session(db *gorm.DB, table string) *gorm.DB {
	return onTable(db.Session(&gorm.Session{NewDB: true}).Clauses(dbresolver.Write), table)
}

// sameSource returns a fresh statement on the connection pool that db's
// statement ran on, which dbresolver does not switch: the fill of a load
// reads the counters where the load read its rows (a replica, unless the
// load asked for the primary), so that both show one moment of one
// database.
func sameSource(db *gorm.DB, table string) *gorm.DB {
	tx := db.Session(&gorm.Session{NewDB: true})
	if _, inTx := tx.Statement.ConnPool.(gorm.TxCommitter); !inTx && tx.Statement.ConnPool != nil {
		tx.Statement.ConnPool = pinnedPool{tx.Statement.ConnPool}
	}
	return onTable(tx, table)
}

// detach returns a fresh session of db for work that may go on after the
// caller's GORM call has returned: a write combined with others runs on a
// goroutine of the group's own, which may outlive the call that led it.
// Its statement is a copy made now, on the caller's goroutine; sessions
// derived from db itself would copy db's statement later, while GORM
// resets it for the caller's next call.
func detach(db *gorm.DB) *gorm.DB {
	ctx := db.Statement.Context
	if ctx == nil {
		ctx = context.Background()
	}
	return db.Session(&gorm.Session{NewDB: true, Context: ctx})
}

// onTable makes table, if any, tx's current table.
func onTable(tx *gorm.DB, table string) *gorm.DB {
	if table != "" {
		return tx.Table(table)
	}
	return tx
}

// pinnedPool is a connection pool that dbresolver leaves alone: it switches
// pools only outside transactions, and a pool that can commit is one.
// Commit and Rollback do nothing: the statements run in autocommit.
type pinnedPool struct{ gorm.ConnPool }

func (pinnedPool) Commit() error   { return nil }
func (pinnedPool) Rollback() error { return nil }

// execSQL runs a statement written by countersql through GORM, so that it is
// logged, traced, translated and run in the caller's transaction like any other.
func execSQL(db *gorm.DB, table string, build func(countersql.Writer)) *gorm.DB {
	return session(db, table).Exec("?", sqlExpr(build))
}

// querySQL prepares a query written by countersql; call Rows or Scan on the
// result. table, if any, is the current table of the caller's conditions.
func querySQL(db *gorm.DB, table string, build func(countersql.Writer)) *gorm.DB {
	return session(db, table).Raw("?", sqlExpr(build))
}

// gormConn runs countersql statements for the shared engine through GORM.
type gormConn struct {
	db    *gorm.DB
	table string // the current table of conditions the statements embed
	// schema, if set, is the model of those conditions: GORM needs it to
	// render clause.PrimaryKey (as in db.Delete(&Photo{}, 7)).
	schema *schema.Schema
	// follow makes the statements read where db's statement read
	// (sameSource), not on the primary: the fill of a load.
	follow bool
}

func (c gormConn) session(ctx context.Context) *gorm.DB {
	open := session
	if c.follow {
		open = sameSource
	}
	tx := open(c.db.WithContext(ctx), c.table)
	if c.schema != nil {
		tx.Statement.Schema = c.schema
	}
	return tx
}

func (c gormConn) Exec(ctx context.Context, build func(countersql.Writer)) (int64, error) {
	r := c.session(ctx).Exec("?", sqlExpr(build))
	return r.RowsAffected, r.Error
}

func (c gormConn) Query(ctx context.Context, build func(countersql.Writer)) (engine.Rows, error) {
	return c.session(ctx).Raw("?", sqlExpr(build)).Rows()
}

// frozen returns a copy of where whose slices, at any depth of its
// expressions and their arguments, are copies: what a write that may run
// after its caller's call returned renders, whatever the caller then does
// with its own slices. Pointers are shared (a subquery's *gorm.DB).
func frozen(where clause.Where) clause.Where {
	return frozenValue(reflect.ValueOf(where)).Interface().(clause.Where)
}

func frozenValue(v reflect.Value) reflect.Value {
	switch v.Kind() {
	case reflect.Slice:
		if v.IsNil() {
			return v
		}
		c := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
		for i := range v.Len() {
			c.Index(i).Set(frozenValue(v.Index(i)))
		}
		return c
	case reflect.Array:
		c := reflect.New(v.Type()).Elem()
		for i := range v.Len() {
			c.Index(i).Set(frozenValue(v.Index(i)))
		}
		return c
	case reflect.Struct:
		c := reflect.New(v.Type()).Elem()
		c.Set(v) // unexported fields as they are
		for i := range v.NumField() {
			if c.Field(i).CanSet() {
				c.Field(i).Set(frozenValue(v.Field(i)))
			}
		}
		return c
	case reflect.Interface:
		if v.IsNil() {
			return v
		}
		c := reflect.New(v.Type()).Elem()
		c.Set(frozenValue(v.Elem()))
		return c
	}
	return v
}

// whereCond renders a GORM WHERE as a countersql condition.
func whereCond(where clause.Where) func(countersql.Writer) {
	return func(w countersql.Writer) {
		if len(where.Exprs) == 0 {
			w.WriteString("1=1")
			return
		}
		where.Build(w.(builderWriter).b)
	}
}
