package gormcounter

import (
	"fmt"
	"reflect"
	"strings"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/hotcounter/hotcounter"
)

// HotKeys returns the k rows with the most increments, among all counters
// and the plain columns incremented through GORM, over the last one to two
// windows ([hotcounter.HotKeysConfig.Window]), hottest (highest Rate)
// first, as entcounter.HotKeys does for an ent client. It fails when db
// has no plugin, or when the plugin's Config turned the counting off.
//
// An increment is counted for its row when the statement names one row by
// its primary key: db.Model(&post) with the key set, or a Where on the
// primary key alone (Where("id = ?", id)). Plain columns are counted when
// they are incremented with UpdateColumn, Update or Updates and
// gorm.Expr("col + ?", n), so that a table whose hot column is not a counter
// yet shows which field to declare and which rows are hot. Raw SQL (db.Exec)
// is not seen. Memory stays bounded whatever the number of rows.
func HotKeys(db *gorm.DB, k int) ([]hotcounter.HotKey, error) {
	p, err := pluginOf(db)
	if err != nil {
		return nil, err
	}
	keys, err := p.obs.HotKeys(k)
	if err != nil {
		return nil, fmt.Errorf("gormcounter: HotKeys: %w", err)
	}
	return keys, nil
}

// countPlainIncrements counts the increments of plain columns (not
// counters) in an update: gorm.Expr("col + ?", n) assigned to col.
func (p *Plugin) countPlainIncrements(db *gorm.DB) {
	stmt := db.Statement
	if db.Error != nil || stmt.Schema == nil || !p.obs.Counting() {
		return
	}
	dest := reflect.ValueOf(stmt.Dest)
	for dest.Kind() == reflect.Pointer {
		dest = dest.Elem()
	}
	if dest.Kind() != reflect.Map || dest.Type().Key().Kind() != reflect.String {
		return
	}
	m, _ := p.model(db, stmt.Schema)
	iter := dest.MapRange()
	for iter.Next() {
		name := iter.Key().String()
		if m.lookup(name) != nil {
			continue // a counter: counted where it is incremented
		}
		f := stmt.Schema.LookUpField(name)
		if f == nil || f.DBName == "" {
			continue
		}
		var e clause.Expr
		switch v := iter.Value().Interface().(type) {
		case clause.Expr:
			e = v
		case *clause.Expr:
			if v == nil {
				continue
			}
			e = *v
		default:
			continue
		}
		named := func(n string) bool { b := bareName(n); return b == f.Name || strings.EqualFold(b, f.DBName) }
		if _, ok := parseIncrementExpr(e, named); ok {
			if key, ok := rowKey(stmt); ok {
				p.obs.CountWrite(parentTable(stmt), f.DBName, key, false)
			}
		}
	}
}

// rowKey is the primary key, as text, of the one row a statement names:
// by its model value, or by a Where on the primary key alone.
func rowKey(stmt *gorm.Statement) (string, bool) {
	s := stmt.Schema
	if singleTarget(stmt) {
		if _, where := stmt.Clauses["WHERE"]; !where {
			parts := make([]string, len(s.PrimaryFields))
			for i, f := range s.PrimaryFields {
				v, _ := f.ValueOf(stmt.Context, stmt.ReflectValue)
				parts[i] = fmt.Sprint(v)
			}
			return strings.Join(parts, ", "), true
		}
	}
	if len(s.PrimaryFields) != 1 || primaryKeyCondition(stmt) != nil {
		return "", false
	}
	c, ok := stmt.Clauses["WHERE"]
	if !ok {
		return "", false
	}
	where, _ := c.Expression.(clause.Where)
	if len(where.Exprs) != 1 {
		return "", false
	}
	pk := s.PrimaryFields[0]
	isKey := func(n string) bool { b := bareName(n); return b == pk.Name || strings.EqualFold(b, pk.DBName) }
	switch e := where.Exprs[0].(type) {
	case clause.Eq:
		if col, ok := e.Column.(clause.Column); ok && isKey(col.Name) {
			return fmt.Sprint(e.Value), true
		}
		if col, ok := e.Column.(string); ok && isKey(col) {
			return fmt.Sprint(e.Value), true
		}
	case clause.Expr:
		sql := strings.TrimSpace(e.SQL)
		if len(e.Vars) == 1 && strings.HasSuffix(sql, "?") {
			lhs := strings.TrimSpace(strings.TrimSuffix(sql, "?"))
			if strings.HasSuffix(lhs, "=") && isKey(strings.TrimSpace(strings.TrimSuffix(lhs, "="))) {
				return fmt.Sprint(e.Vars[0]), true
			}
		}
	}
	return "", false
}
