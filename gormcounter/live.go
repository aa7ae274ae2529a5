package gormcounter

import (
	"context"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

type liveKey struct{}

// WithLive returns a context under which loads fill rollup counters with
// their exact value (the folded column plus pending slots) instead of the
// cached column: db.WithContext(gormcounter.WithLive(ctx)).First(&post).
func WithLive(ctx context.Context) context.Context {
	return context.WithValue(ctx, liveKey{}, true)
}

func isLive(ctx context.Context) bool {
	v, _ := ctx.Value(liveKey{}).(bool)
	return v
}

// Live asks a query for exact rollup counters, for the statement and every
// Preload level under it:
//
//	db.Clauses(gormcounter.Live).First(&post)
//
// The exact value is read in one statement (column + pending slots), so a
// concurrent rollup pass is seen either wholly or not at all. It costs one
// grouped query per statement, like a sum counter. It is a constant, as
// dbresolver.Write is: no caller can change what it means for another.
const Live liveOption = "live"

// liveOption is the type of [Live]: a clause that changes how a statement
// is filled, not its SQL.
type liveOption string

var (
	_ gorm.StatementModifier = Live
	_ clause.Interface       = Live // so that gorm.io/gen's Clauses takes it
)

// ModifyStatement marks the statement's context, which Preload passes on.
func (liveOption) ModifyStatement(stmt *gorm.Statement) {
	ctx := stmt.Context
	if ctx == nil {
		ctx = context.Background()
	}
	stmt.Context = WithLive(ctx)
}

// Build writes nothing: Live changes how the statement is filled, not its SQL.
func (liveOption) Build(clause.Builder) {}

// Name names Live among a statement's clauses. GORM never stores it there:
// a clause that modifies the statement is applied, not kept.
func (liveOption) Name() string { return "HOTCOUNTER LIVE" }

// MergeClause does nothing (see Name).
func (liveOption) MergeClause(*clause.Clause) {}
