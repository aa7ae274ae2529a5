package gormcounter

import (
	"fmt"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"

	"gorm.io/gorm"
	"gorm.io/gorm/schema"

	"github.com/hotcounter/hotcounter"
	"github.com/hotcounter/hotcounter/internal/countersql"
	"github.com/hotcounter/hotcounter/internal/engine"
	"github.com/hotcounter/hotcounter/internal/spec"
)

// tagKey is the gorm tag key that declares a counter: `gorm:"counter"`.
const tagKey = "COUNTER"

// model is the counter view of one parsed GORM schema.
type model struct {
	schema   *schema.Schema
	key      *schema.Field // the single primary key
	counters []*counter    // in field order
}

// counter is one counter field of a model.
type counter struct {
	model *model
	index int // position in model.counters: fixes the order in which slot tables are written
	field *schema.Field
	opts  spec.Options
	table countersql.Table
	// precreate: all slot rows are inserted with the parent (see spec.Options.Precreate).
	precreate bool
	// count: the counter counts child rows (counts=), nil otherwise.
	count *countOf
	// widths: the width each parent has learned (slots=auto), nil otherwise.
	widths *engine.Widths
}

// deltaFits returns an error wrapping hotcounter.ErrOverflow for a delta beyond the
// range of the counter's int8, int16 or int32 field (for an unsigned
// field, beyond its span either way). A delta within it may still take a
// total out of the range, which a load then reports naming the counter
// (nameOverflow).
func (c *counter) deltaFits(delta int64) error {
	t := c.field.FieldType
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	bits := t.Bits()
	if bits >= 64 {
		return nil
	}
	lo, hi := -int64(1)<<(bits-1), int64(1)<<(bits-1)-1
	if t.Kind() >= reflect.Uint && t.Kind() <= reflect.Uintptr {
		hi = int64(1)<<bits - 1
		lo = -hi
	}
	if delta < lo || delta > hi {
		return fmt.Errorf("gormcounter: %s: %w: an increment of %d is beyond what a %s holds (%d to %d); nothing was written",
			c.name(), hotcounter.ErrOverflow, delta, t, lo, hi)
	}
	return nil
}

// unsigned reports whether the counter's field is an unsigned integer,
// which a decrease must not take below zero.
func (c *counter) unsigned() bool {
	t := c.field.FieldType
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t.Kind() >= reflect.Uint && t.Kind() <= reflect.Uintptr
}

// decreaseAllowed returns the error for a decrease of an unsigned counter
// that it cannot check against its floor as it writes: one kept in a
// rollup column or in appended deltas. A decrease of an unsigned sum
// counter is a take from its slot rows (increment.floor), refused when
// less is left.
func (c *counter) decreaseAllowed() error {
	if c.opts.Mode != spec.Sum {
		return fmt.Errorf("gormcounter: %s: %w: a decrease of an unsigned counter kept in a column (rollup or append) could take it below zero, "+
			"which that mode cannot check as it writes; nothing was written (declare it a sum counter, the default, or give it a signed type)", c.name(), hotcounter.ErrOverflow)
	}
	return nil
}

// bufferedDeltaFits is deltaFits for a write-behind buffer, which also
// refuses any decrease of a guarded or unsigned counter: the buffer
// acknowledges it before it could check the floor, and a flush cannot
// refuse what was acknowledged.
func (c *counter) bufferedDeltaFits(delta int64) error {
	switch {
	case delta < 0 && c.opts.Guarded:
		return fmt.Errorf("gormcounter: Buffer %s: %w: a buffer cannot check a decrease of %d against the stock; use gormcounter.Take",
			c.name(), hotcounter.ErrNegativeGuarded, -delta)
	case delta < 0 && c.unsigned():
		return fmt.Errorf("gormcounter: Buffer %s: %w: a buffer cannot check a decrease of %d of an unsigned counter against zero; "+
			"decrease it with gormcounter.Increment, which refuses one that would go below zero", c.name(), hotcounter.ErrOverflow, -delta)
	}
	return c.deltaFits(delta)
}

// name is how errors name the counter: Model.Field.
func (c *counter) name() string { return c.model.schema.Name + "." + c.field.Name }

// engineCounters returns counters as the engine takes them.
func engineCounters(counters []*counter) []engine.Counter {
	out := make([]engine.Counter, len(counters))
	for i, c := range counters {
		out[i] = c.engine()
	}
	return out
}

// engine returns c as the engine takes it.
func (c *counter) engine() engine.Counter {
	return engine.Counter{Name: c.name(), Column: c.field.DBName, Options: c.opts, Precreate: c.precreate, Count: c.count != nil, Table: c.table}
}

// lookup finds the counter a name refers to: its field name, or its column
// name in any case, possibly quoted or table-qualified.
func (m *model) lookup(name string) *counter {
	if m == nil {
		return nil
	}
	for _, c := range m.counters {
		if c.namedBy(name) {
			return c
		}
	}
	return nil
}

// namedBy reports whether a name refers to this counter: "Likes", "likes",
// "LIKES", `"likes"`, "posts.likes".
func (c *counter) namedBy(name string) bool {
	bare := bareName(name)
	return bare == c.field.Name || strings.EqualFold(bare, c.field.DBName)
}

// bareName strips quotes and a table qualifier: `"posts"."likes"` -> likes.
func bareName(n string) string {
	n = strings.TrimSpace(n)
	if strings.ContainsAny(n, "\"`") {
		n = strings.NewReplacer("\"", "", "`", "").Replace(n)
	}
	if i := strings.LastIndexByte(n, '.'); i >= 0 {
		n = n[i+1:]
	}
	return n
}

func (m *model) hasMode(mode spec.Mode) bool {
	for _, c := range m.counters {
		if c.opts.Mode == mode {
			return true
		}
	}
	return false
}

type modelEntry struct {
	own     sync.Once   // settles this schema's own fields
	graph   sync.Once   // settles every schema reachable through relationships
	settled atomic.Bool // own has run: m and err may be read without it
	m       *model
	err     error
}

// model returns the counters of s, settling s and every schema reachable from
// it on first sight. It returns (nil, nil) for a model without counters.
//
// Settling changes the shared, cached *schema.Field of each counter (so that
// GORM neither selects, inserts, updates nor migrates a sum counter's absent
// column); it happens once per schema, guarded by sync.Once, before any GORM
// callback reads those fields. Related schemas are settled too because a Joins
// on one model reads the columns of another.
func (p *Plugin) model(db *gorm.DB, s *schema.Schema) (*model, error) {
	e := p.entry(s)
	e.graph.Do(func() {
		seen := map[*schema.Schema]bool{s: true}
		queue := []*schema.Schema{s}
		for len(queue) > 0 {
			cur := queue[0]
			queue = queue[1:]
			ce := p.entry(cur)
			ce.own.Do(func() {
				ce.m, ce.err = p.settle(db, cur)
				ce.settled.Store(true)
			})
			for _, rs := range related(cur) {
				if !seen[rs] {
					seen[rs] = true
					if parsed(db, rs) {
						queue = append(queue, rs)
					}
				}
			}
		}
	})
	return e.m, e.err
}

// related returns the schemas that s's relationships point to. GORM adds to a
// schema's relations when it parses another model that has many of it, under
// Relationships.Mux: read them under it too.
func related(s *schema.Schema) []*schema.Schema {
	s.Relationships.Mux.RLock()
	defer s.Relationships.Mux.RUnlock()
	out := make([]*schema.Schema, 0, len(s.Relationships.Relations))
	for _, rel := range s.Relationships.Relations {
		if rel.FieldSchema != nil {
			out = append(out, rel.FieldSchema)
		}
	}
	return out
}

// parsed waits until GORM has finished parsing rs: a relationship can point
// to a schema that another goroutine is still parsing, and only the schema
// cache waits for it. It reports false if rs is not the cached schema of its
// type (a schema GORM parsed for a special table name), which is left alone.
func parsed(db *gorm.DB, rs *schema.Schema) bool {
	stmt := &gorm.Statement{DB: db}
	if err := stmt.Parse(reflect.New(rs.ModelType).Interface()); err != nil {
		return false
	}
	return stmt.Schema == rs
}

func (p *Plugin) entry(s *schema.Schema) *modelEntry {
	if v, ok := p.models.Load(s); ok {
		return v.(*modelEntry)
	}
	v, _ := p.models.LoadOrStore(s, &modelEntry{})
	return v.(*modelEntry)
}

// settledModels returns the models with counters that the plugin has
// settled so far: those of Config.Models, of AutoMigrate and of every
// statement run since.
func (p *Plugin) settledModels() []*model {
	var out []*model
	p.models.Range(func(_, v any) bool {
		if e := v.(*modelEntry); e.settled.Load() && e.m != nil {
			out = append(out, e.m)
		}
		return true
	})
	return out
}

// modelOf parses value (a model pointer) and returns its counters.
func (p *Plugin) modelOf(db *gorm.DB, value any) (*model, error) {
	stmt := &gorm.Statement{DB: db}
	if err := stmt.Parse(value); err != nil {
		return nil, fmt.Errorf("gormcounter: %w", err)
	}
	return p.model(db, stmt.Schema)
}

// settle reads the counter tags of s, validates them, names the storage, and
// sets how GORM treats each counter field.
func (p *Plugin) settle(db *gorm.DB, s *schema.Schema) (*model, error) {
	m := &model{schema: s}
	def := spec.Options{Slots: p.cfg.DefaultSlots, Mode: spec.Sum}
	for _, f := range s.Fields {
		if err := strayOptions(f); err != nil {
			return nil, fmt.Errorf("gormcounter: %s.%s: %w", s.Name, f.Name, err)
		}
		raw, ok := f.TagSettings[tagKey]
		if !ok {
			continue
		}
		if raw == tagKey { // bare `gorm:"counter"`
			raw = ""
		}
		opts, err := spec.ParseList(raw, def)
		if err != nil {
			return nil, fmt.Errorf("gormcounter: %s.%s: %w", s.Name, f.Name, err)
		}
		if err := checkField(s, f); err != nil {
			return nil, fmt.Errorf("gormcounter: %s.%s: %w", s.Name, f.Name, err)
		}
		if m.key == nil {
			if len(s.PrimaryFields) != 1 {
				return nil, fmt.Errorf("gormcounter: %s.%s: %w: the model needs exactly one primary key field, it has %d",
					s.Name, f.Name, hotcounter.ErrInvalidCounter, len(s.PrimaryFields))
			}
			m.key = s.PrimaryFields[0]
		}
		c := &counter{model: m, index: len(m.counters), field: f, opts: opts,
			precreate: opts.PrecreateOn(p.dialect.PrecreateByDefault())}
		if opts.Auto {
			c.widths = engine.NewWidths(opts.Slots, p.cfg.AutoCooldown)
		}
		slots, owner := storageNames(db.NamingStrategy, s.Table, f.DBName, "Slot")
		deltas, _ := storageNames(db.NamingStrategy, s.Table, f.DBName, "Deltas") // inflection has no plural of delta
		if opts.Mode == spec.Append {
			slots, deltas = deltas, slots
		}
		c.table = countersql.Table{
			Parent:    s.Table,
			ParentKey: m.key.DBName,
			Column:    f.DBName,
			Slots:     slots,
			Owner:     owner,
			Other:     deltas,
		}
		if opts.Counts != "" {
			if c.count, err = resolveCount(s, opts, m.key); err != nil {
				return nil, fmt.Errorf("gormcounter: %s.%s: %w", s.Name, f.Name, err)
			}
		}
		m.counters = append(m.counters, c)
	}
	if len(m.counters) == 0 {
		return nil, nil
	}
	for _, c := range m.counters {
		if c.count != nil {
			p.registerCount(c)
		}
	}
	for _, c := range m.counters {
		c.settleField()
	}
	return m, nil
}

// strayOptions refuses a counter option written as a GORM setting of its
// own: GORM splits a tag on ';', so `gorm:"counter;slots=4"` declares a
// counter of the default width and a SLOTS setting that nothing reads.
func strayOptions(f *schema.Field) error {
	for key := range f.TagSettings {
		word, _, _ := strings.Cut(key, "=")
		for _, w := range spec.Words {
			if strings.EqualFold(word, w) {
				opt := strings.ToLower(key)
				return fmt.Errorf("%w: %q is a GORM setting of its own here (GORM splits tags on ';'): write counter options after counter:, "+
					"separated by commas, as in `gorm:\"counter:%s\"`", hotcounter.ErrInvalidCounter, opt, opt)
			}
		}
	}
	return nil
}

// checkField rejects fields that cannot hold a counter.
func checkField(s *schema.Schema, f *schema.Field) error {
	if f.PrimaryKey {
		return fmt.Errorf("%w: a primary key cannot be a counter", hotcounter.ErrInvalidCounter)
	}
	if f.DBName == "" {
		return fmt.Errorf("%w: the field has no column (is it tagged \"-\"?)", hotcounter.ErrInvalidCounter)
	}
	switch f.FieldType.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return nil
	}
	if t := f.FieldType; t.Kind() == reflect.Pointer && t.Elem().Kind() >= reflect.Int && t.Elem().Kind() <= reflect.Uint64 {
		return fmt.Errorf("%w: a counter must be an integer field, not a pointer: a counter has no NULL (a row without increments loads 0), %s is %s; declare it %s",
			hotcounter.ErrInvalidCounter, f.Name, f.FieldType, f.FieldType.Elem())
	}
	return fmt.Errorf("%w: a counter must be an integer field, %s is %s", hotcounter.ErrInvalidCounter, f.Name, f.FieldType)
}

// settleField sets how GORM treats the counter field. Both modes: never
// updated from a struct (Save and Updates(struct) of an existing row leave
// counters alone: they would erase concurrent increments); a new row's
// value is its starting total (see checkStart). Sum mode: no parent column
// at all (not among the schema's columns, so never selected by name), but
// readable, so that a load of one row scans the total it selects beside
// the columns (see inlineTotals); its value goes to a slot once the row
// exists. Rollup mode: a NOT NULL DEFAULT 0 column that loads read and a
// create writes.
func (c *counter) settleField() {
	f := c.field
	f.Creatable = false
	f.Updatable = false
	if c.opts.Mode == spec.Sum {
		f.Readable = true
		f.IgnoreMigration = true
		s := c.model.schema
		names := make([]string, 0, len(s.DBNames))
		for _, n := range s.DBNames {
			if n != f.DBName {
				names = append(names, n)
			}
		}
		s.DBNames = names
		return
	}
	f.Readable = true
	f.NotNull = true
	f.HasDefaultValue = true
	f.DefaultValue = "0"
	// A new row's column takes its starting value (a count's starts at 0,
	// checked by checkStart): GORM inserts a field with a database default
	// when its value is not zero, and it keeps such a field out of the
	// columns an upsert's UpdateAll rewrites, as Save of an existing row
	// must leave the column alone.
	if c.count == nil {
		f.Creatable = true
		c.model.schema.FieldsWithDefaultDBValue = append(c.model.schema.FieldsWithDefaultDBValue, f)
	}
}

// storageNames names a counter's slot table (suffix Slot) or delta table
// (suffix Delta) and its owner column after the parent table, not the Go type, so that renaming a struct or mapping two
// structs to one table keeps one set of counts: posts.likes ->
// post_likes_slots (post_id). The naming strategy supplies its prefix,
// pluralization and case; a schema qualifier is kept.
func storageNames(ns schema.Namer, table, column, suffix string) (slots, owner string) {
	// GORM's own strategy without a replacer is a value whose names depend
	// on it alone: remembered, as its pluralization tries inflection's
	// regular expressions in turn (each model's parse asks for each
	// counter's names).
	strategy, plain := ns.(schema.NamingStrategy)
	if p, ok := ns.(*schema.NamingStrategy); ok && p != nil {
		strategy, plain = *p, true
	}
	plain = plain && strategy.NameReplacer == nil
	if !plain {
		return namesOfStorage(ns, table, column, suffix)
	}
	key := storageKey{strategy, table, column, suffix}
	storage.Lock()
	names, ok := storage.names[key]
	storage.Unlock()
	if !ok {
		names[0], names[1] = namesOfStorage(ns, table, column, suffix)
		storage.Lock()
		storage.names[key] = names
		storage.Unlock()
	}
	return names[0], names[1]
}

// storage remembers storageNames' answers for GORM's own naming strategy,
// by the strategy's value and the names asked about: a bounded set (the
// application's models and strategies). A typed map, so that a strategy
// that could not be a key would not compile.
var storage = struct {
	sync.Mutex
	names map[storageKey][2]string
}{names: map[storageKey][2]string{}}

type storageKey struct {
	strategy              schema.NamingStrategy
	table, column, suffix string
}

// namesOfStorage is storageNames, computed.
func namesOfStorage(ns schema.Namer, table, column, suffix string) (slots, owner string) {
	qualifier := ""
	if i := strings.LastIndexByte(table, '.'); i >= 0 {
		qualifier, table = table[:i+1], table[i+1:]
	}
	var prefix string
	switch n := ns.(type) {
	case schema.NamingStrategy:
		prefix = n.TablePrefix
	case *schema.NamingStrategy:
		prefix = n.TablePrefix
	}
	base := spec.Singular(strings.TrimPrefix(table, prefix))
	return qualifier + ns.TableName(camel(base)+camel(column)+suffix), ns.ColumnName("", camel(base)+"ID")
}

// camel turns a column name into the CamelCase that the naming strategy turns
// back into snake case: like_count -> LikeCount.
func camel(column string) string {
	var b strings.Builder
	for _, part := range strings.Split(column, "_") {
		if part == "" {
			continue
		}
		b.WriteString(strings.ToUpper(part[:1]) + part[1:])
	}
	return b.String()
}
