package gormcounter

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
	"sync"

	"gorm.io/gorm"
	"gorm.io/gorm/schema"

	"github.com/hotcounter/hotcounter"
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
	rel *schema.Relationship
	// via is, for a count over two levels (counts=Children.Products), the
	// middle schema's has-many relation to the rows counted; rel reaches
	// the middle rows.
	via  *schema.Relationship
	once sync.Once
	spec countersql.Count
	err  error
}

// MaxHookRows bounds the child rows that one statement may touch under a
// count kept by hooks: the hook restricts the statement to the rows it read
// and locked, by key. Triggers have no bound.
const MaxHookRows = engine.MaxHookRows

// resolveCount finds the has-many or many-to-many relation that a counts=
// declaration names. A many-to-many count counts the rows of the join
// table that name the parent: Tag.PostCount over Posts
// `gorm:"many2many:post_tags"` is the number of post_tags rows whose
// tag_id is the tag's key.
func resolveCount(s *schema.Schema, opts spec.Options, key *schema.Field) (*countOf, error) {
	if first, second, ok := strings.Cut(opts.Counts, "."); ok {
		return resolveVia(s, opts, key, first, second)
	}
	s.Relationships.Mux.RLock()
	defer s.Relationships.Mux.RUnlock()
	var rel *schema.Relationship
	var countable []string
	for name, r := range s.Relationships.Relations {
		if r.Type == schema.HasMany || r.Type == schema.Many2Many {
			countable = append(countable, name)
		}
		if strings.EqualFold(name, opts.Counts) {
			rel = r
		}
	}
	sort.Strings(countable)
	switch {
	case rel == nil:
		return nil, fmt.Errorf("%w: counts=%s: %s has no relation %s (has-many and many-to-many relations: %s); add a field such as %s []%s",
			hotcounter.ErrInvalidCounter, opts.Counts, s.Name, opts.Counts, strings.Join(countable, ", "), opts.Counts, strings.TrimSuffix(opts.Counts, "s"))
	case rel.Type == schema.Many2Many:
		return resolveMany2Many(s, opts, key, rel)
	case rel.Type != schema.HasMany:
		return nil, fmt.Errorf("%w: counts=%s: %s.%s is a %s relation; a count needs has many or many to many", hotcounter.ErrInvalidCounter, opts.Counts, s.Name, rel.Name, rel.Type)
	case rel.Polymorphic != nil:
		return resolvePolymorphic(s, opts, key, rel)
	case len(rel.References) != 1 || rel.References[0].PrimaryKey != key:
		return nil, fmt.Errorf("%w: counts=%s: the relation must reference %s's primary key through one foreign key", hotcounter.ErrInvalidCounter, opts.Counts, s.Name)
	case opts.Hooks && rel.FieldSchema.PrioritizedPrimaryField == nil:
		return nil, fmt.Errorf("%w: counts=%s,hooks: %s needs one primary key for hooks to find the rows a write touches",
			hotcounter.ErrInvalidCounter, opts.Counts, rel.FieldSchema.Name)
	}
	return &countOf{rel: rel}, nil
}

// resolveVia resolves a count over two levels of has-many relations,
// counts=Children.Products: the Products of each of the parent's Children
// (a category's products through its sub-categories). Triggers keep it.
func resolveVia(s *schema.Schema, opts spec.Options, key *schema.Field, first, second string) (*countOf, error) {
	if opts.Hooks {
		return nil, fmt.Errorf("%w: counts=%s,hooks: a count over two levels is kept by triggers; remove hooks", hotcounter.ErrInvalidCounter, opts.Counts)
	}
	hasMany := func(in *schema.Schema, name string) (*schema.Relationship, error) {
		if in != s {
			in.Relationships.Mux.RLock()
			defer in.Relationships.Mux.RUnlock()
		}
		for n, r := range in.Relationships.Relations {
			if !strings.EqualFold(n, name) {
				continue
			}
			if r.Type != schema.HasMany || r.Polymorphic != nil || len(r.References) != 1 || r.References[0].PrimaryKey == nil {
				return nil, fmt.Errorf("%w: counts=%s: %s.%s must be a has-many relation through one foreign key", hotcounter.ErrInvalidCounter, opts.Counts, in.Name, n)
			}
			return r, nil
		}
		return nil, fmt.Errorf("%w: counts=%s: %s has no relation %s", hotcounter.ErrInvalidCounter, opts.Counts, in.Name, name)
	}
	s.Relationships.Mux.RLock()
	rel, err := hasMany(s, first)
	s.Relationships.Mux.RUnlock()
	if err != nil {
		return nil, err
	}
	if rel.References[0].PrimaryKey != key {
		return nil, fmt.Errorf("%w: counts=%s: %s.%s must reference %s's primary key", hotcounter.ErrInvalidCounter, opts.Counts, s.Name, rel.Name, s.Name)
	}
	via, err := hasMany(rel.FieldSchema, second)
	if err != nil {
		return nil, err
	}
	return &countOf{rel: rel, via: via}, nil
}

// resolvePolymorphic checks a count through a polymorphic has-many
// relation (`gorm:"polymorphic:Owner"`): the child rows whose owner type
// column holds the parent's polymorphic value and whose owner id is its
// key. A child that moves to an owner of another type leaves one count
// and enters the other.
func resolvePolymorphic(s *schema.Schema, opts spec.Options, key *schema.Field, rel *schema.Relationship) (*countOf, error) {
	var ids []*schema.Reference
	for _, r := range rel.References {
		if r.PrimaryKey != nil {
			ids = append(ids, r)
		}
	}
	switch {
	case len(ids) != 1 || ids[0].PrimaryKey != key || rel.Polymorphic.PolymorphicType == nil:
		return nil, fmt.Errorf("%w: counts=%s: the polymorphic relation must reference %s's primary key through one id column", hotcounter.ErrInvalidCounter, opts.Counts, s.Name)
	case opts.Hooks && rel.FieldSchema.PrioritizedPrimaryField == nil:
		return nil, fmt.Errorf("%w: counts=%s,hooks: %s needs one primary key for hooks to find the rows a write touches",
			hotcounter.ErrInvalidCounter, opts.Counts, rel.FieldSchema.Name)
	}
	return &countOf{rel: rel}, nil
}

// where returns the condition of a count: its where=, and for a
// polymorphic relation the owner type the parent's rows hold.
func (co *countOf) where(declared string) string {
	p := co.rel.Polymorphic
	if p == nil {
		return declared
	}
	owner := p.PolymorphicType.DBName + " = '" + strings.ReplaceAll(p.Value, "'", "''") + "'"
	if declared == "" {
		return owner
	}
	return owner + " AND (" + declared + ")"
}

// resolveMany2Many checks a count through a many-to-many relation: one
// join column for each side.
func resolveMany2Many(s *schema.Schema, opts spec.Options, key *schema.Field, rel *schema.Relationship) (*countOf, error) {
	var own, other []*schema.Reference
	for _, r := range rel.References {
		if r.OwnPrimaryKey {
			own = append(own, r)
		} else {
			other = append(other, r)
		}
	}
	switch {
	case len(own) != 1 || own[0].PrimaryKey != key || len(other) != 1:
		return nil, fmt.Errorf("%w: counts=%s: the join table %s must reference %s's primary key and %s's through one column each",
			hotcounter.ErrInvalidCounter, opts.Counts, rel.JoinTable.Table, s.Name, rel.FieldSchema.Name)
	}
	return &countOf{rel: rel}, nil
}

// child returns the table whose rows a count counts, its column that
// names the parent and, through a join table, the join's other reference.
// It is the child of a has-many relation, or the join table of a
// many-to-many one, read when the count is resolved: SetupJoinTable
// replaces the join table and its references.
func (co *countOf) child() (*schema.Schema, string, *countersql.Across) {
	if co.via != nil {
		return co.via.FieldSchema, co.via.References[0].ForeignKey.DBName, nil
	}
	if co.rel.JoinTable == nil {
		for _, r := range co.rel.References {
			if r.PrimaryKey != nil { // not a polymorphic relation's owner type
				return co.rel.FieldSchema, r.ForeignKey.DBName, nil
			}
		}
	}
	var ref string
	across := &countersql.Across{Table: co.rel.FieldSchema.Table}
	for _, r := range co.rel.References {
		if r.OwnPrimaryKey {
			ref = r.ForeignKey.DBName
		} else {
			across.Ref, across.Key = r.ForeignKey.DBName, r.PrimaryKey.DBName
		}
	}
	return co.rel.JoinTable, ref, across
}

var deletedAtType = reflect.TypeOf(gorm.DeletedAt{})

// countSpec returns c's count, resolving the child's columns once (after
// the child's own counters are settled: a sum counter has no column).
func (p *Plugin) countSpec(db *gorm.DB, c *counter) (countersql.Count, error) {
	co := c.count
	co.once.Do(func() {
		child, ref, across := co.child()
		if _, err := p.model(db, child); err != nil {
			co.err = err
			return
		}
		total := c.opts.Total
		if total != "" {
			f := child.LookUpField(total)
			if f == nil || f.DBName == "" {
				co.err = fmt.Errorf("gormcounter: %s: %w: total=%s: %s has no column %s", c.name(), hotcounter.ErrInvalidCounter, total, child.Name, total)
				return
			}
			total = f.DBName
		}
		columns := columnsOf(child)
		if bad := countersql.UnknownColumns(c.opts.Where, columns); len(bad) > 0 {
			co.err = fmt.Errorf("gormcounter: %s: %w: where=%s names %s, which the rows it counts (table %s) do not have; their columns: %s",
				c.name(), hotcounter.ErrInvalidCounter, c.opts.Where, strings.Join(bad, ", "), child.Table, strings.Join(columns, ", "))
			return
		}
		s := countersql.Count{
			Table:     c.table,
			SlotCount: c.opts.Slots,
			Child:     child.Table,
			Ref:       ref,
			Columns:   columns,
			Where:     co.where(c.opts.Where),
			Sum:       total,
			Across:    across,
		}
		if co.via != nil {
			s.Via = &countersql.Via{Table: co.rel.FieldSchema.Table, Key: co.via.References[0].PrimaryKey.DBName, Ref: co.rel.References[0].ForeignKey.DBName}
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
	child := c.count.childTable()
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

// childTable returns the table a count counts the rows of (see child).
func (co *countOf) childTable() string {
	s, _, _ := co.child()
	return s.Table
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
