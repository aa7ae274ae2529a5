package gormcounter

import (
	"context"
	"database/sql"
	"errors"

	"gorm.io/gorm"

	"github.com/hotcounter/hotcounter/internal/engine"
)

// The MySQL/MariaDB write path lives in internal/engine, shared with
// entcounter; this file adapts GORM to it.

// gormSession is an engine.Session over a *gorm.DB: the caller's
// transaction, if it has one, or its pool.
type gormSession struct{ gormConn }

func (s gormSession) InTx() bool {
	_, inTx := s.db.Statement.ConnPool.(gorm.TxCommitter)
	return inTx
}

func (s gormSession) Begin(ctx context.Context, readCommitted bool, fn func(engine.Session) error) error {
	p, err := pluginOf(s.db)
	if err != nil {
		return err
	}
	var opts []*sql.TxOptions
	if p.dialect.Driver.ReadCommitted(readCommitted) {
		opts = append(opts, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	}
	return session(s.db.WithContext(ctx), "").Transaction(func(tx *gorm.DB) error {
		return fn(gormSession{gormConn{db: tx, table: s.table}})
	}, opts...)
}

// ParentGone recognises the foreign key failure as GORM's TranslateError
// reports it (the driver's own error is recognised by the engine).
func (gormSession) ParentGone(err error) bool { return errors.Is(err, gorm.ErrForeignKeyViolated) }

// primaryKeyOnly returns the key of the one parent an update targets when
// nothing but that key selects it: a model value with its primary key set,
// no Where clause, and no soft-delete condition.
func primaryKeyOnly(stmt *gorm.Statement) (any, bool) {
	if !singleTarget(stmt) || len(stmt.Schema.PrimaryFields) != 1 {
		return nil, false
	}
	if _, where := stmt.Clauses["WHERE"]; where {
		return nil, false
	}
	if len(stmt.Schema.QueryClauses) > 0 && !stmt.Unscoped {
		return nil, false
	}
	key, _ := stmt.Schema.PrimaryFields[0].ValueOf(stmt.Context, stmt.ReflectValue)
	return key, true
}
