package gormcounter

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
	"sync"

	"gorm.io/gorm"
	"gorm.io/gorm/schema"

	"github.com/hotcounter/hotcounter/internal/countersql"
	"github.com/hotcounter/hotcounter/internal/engine"
	"github.com/hotcounter/hotcounter/internal/spec"
)

// Counts of child rows: `gorm:"counter:counts=Objects"` on Category.ObjectCount
// makes the counter the number of Object rows whose CategoryID is the
// category's key, through the has-many relation Objects. See countersql.Count
// for the storage and the lock order.

// countOf is what a count counter needs besides its storage, resolved once.
type countOf struct {
	rel  *schema.Relationship
	once sync.Once
	spec countersql.Count
	err  error
}

// MaxHookRows bounds the child rows that one statement may touch under a
// count kept by hooks: the hook restricts the statement to the rows it read
// and locked, by key. Triggers have no bound.
const MaxHookRows = engine.MaxHookRows

// resolveCount finds the has-many relation that a counts= declaration names.
func resolveCount(s *schema.Schema, opts spec.Options, key *schema.Field) (*countOf, error) {
	s.Relationships.Mux.RLock()
	defer s.Relationships.Mux.RUnlock()
	var rel *schema.Relationship
	var hasMany []string
	for name, r := range s.Relationships.Relations {
		if r.Type == schema.HasMany {
			hasMany = append(hasMany, name)
		}
		if strings.EqualFold(name, opts.Counts) {
			rel = r
		}
	}
	sort.Strings(hasMany)
	switch {
	case rel == nil:
		return nil, fmt.Errorf("%w: counts=%s: %s has no relation %s (has-many relations: %s); add a field such as %s []%s",
			spec.ErrInvalid, opts.Counts, s.Name, opts.Counts, strings.Join(hasMany, ", "), opts.Counts, strings.TrimSuffix(opts.Counts, "s"))
	case rel.Type != schema.HasMany:
		return nil, fmt.Errorf("%w: counts=%s: %s.%s is a %s relation; a count needs has many", spec.ErrInvalid, opts.Counts, s.Name, rel.Name, rel.Type)
	case rel.Polymorphic != nil:
		return nil, fmt.Errorf("%w: counts=%s: polymorphic relations are not counted", spec.ErrInvalid, opts.Counts)
	case len(rel.References) != 1 || rel.References[0].PrimaryKey != key:
		return nil, fmt.Errorf("%w: counts=%s: the relation must reference %s's primary key through one foreign key", spec.ErrInvalid, opts.Counts, s.Name)
	case opts.Hooks && rel.FieldSchema.PrioritizedPrimaryField == nil:
		return nil, fmt.Errorf("%w: counts=%s,hooks: %s needs one primary key for hooks to find the rows a write touches",
			spec.ErrInvalid, opts.Counts, rel.FieldSchema.Name)
	}
	return &countOf{rel: rel}, nil
}

var deletedAtType = reflect.TypeOf(gorm.DeletedAt{})

// countSpec returns c's count, resolving the child's columns once (after
// the child's own counters are settled: a sum counter has no column).
func (p *Plugin) countSpec(db *gorm.DB, c *counter) (countersql.Count, error) {
	co := c.count
	co.once.Do(func() {
		child := co.rel.FieldSchema
		if _, err := p.model(db, child); err != nil {
			co.err = err
			return
		}
		s := countersql.Count{
			Table:     c.table,
			SlotCount: c.opts.Slots,
			Child:     child.Table,
			Ref:       co.rel.References[0].ForeignKey.DBName,
			Columns:   columnsOf(child),
			Where:     c.opts.Where,
		}
		if pf := child.PrioritizedPrimaryField; pf != nil {
			s.ChildKey = pf.DBName
		}
		for _, f := range child.Fields {
			if f.FieldType == deletedAtType && f.DBName != "" {
				s.SoftDelete = f.DBName
			}
		}
		co.spec = s
	})
	return co.spec, co.err
}

// columnsOf returns the columns a table of s has: its fields with a column
// that migrations create (not read-only `->;-:migration` fields, not sum
// counters).
func columnsOf(s *schema.Schema) []string {
	var out []string
	seen := map[string]bool{}
	for _, f := range s.Fields {
		if f.DBName == "" || f.IgnoreMigration || seen[f.DBName] {
			continue
		}
		seen[f.DBName] = true
		out = append(out, f.DBName)
	}
	return out
}

// registerCount records a count under its child table, so that writes to
// the child find it (hooks) and migrating the child installs its triggers.
func (p *Plugin) registerCount(c *counter) {
	p.countsMu.Lock()
	defer p.countsMu.Unlock()
	if p.counts == nil {
		p.counts = map[string][]*counter{}
	}
	child := c.count.rel.FieldSchema.Table
	for _, have := range p.counts[child] {
		if have.table.Slots == c.table.Slots {
			return
		}
	}
	list := append(p.counts[child][:len(p.counts[child]):len(p.counts[child])], c)
	// One order for every writer: slot tables are locked in this order.
	sort.Slice(list, func(i, j int) bool { return list[i].table.Slots < list[j].table.Slots })
	p.counts[child] = list
}

// countsOn returns the counts registered on a child table.
func (p *Plugin) countsOn(table string) []*counter {
	p.countsMu.Lock()
	defer p.countsMu.Unlock()
	return p.counts[table]
}

// countsBefore is where a hooked write leaves the rows it read before the
// write (a countState).
const countsBefore = "gormcounter:counts_before"

// startedTx marks a statement for which the hooks opened the transaction.
const startedTx = "gormcounter:started_transaction"
