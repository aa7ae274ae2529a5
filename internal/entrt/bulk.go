package entrt

import "sync"

// Bulk is one CreateBulk of n rows, as entcounter's hook sees it: the hook
// of each row hands it the row's starting value of a sum counter, and the
// hook of the last row to finish (ent runs the hooks of a bulk's rows one
// inside the other, the first row's outermost) writes the starting values
// and pre-created slot rows of all n at once, as GORM's Create of a batch
// does, instead of a transaction per row.
type Bulk struct {
	n  int
	mu sync.Mutex
	by map[string]*bulkStarts // by counter field
}

type bulkStarts struct {
	rows   int // rows added or skipped
	keys   []any
	values []int64
}

// NewBulk returns the Bulk of a CreateBulk of n rows.
func NewBulk(n int) *Bulk { return &Bulk{n: n, by: map[string]*bulkStarts{}} }

// Add records that the row key starts the counter field at v. Once every
// row of the bulk has been added or skipped for field, it returns the keys
// and values added, and last true; before that, nothing and false.
func (b *Bulk) Add(field string, key any, v int64) (keys []any, values []int64, last bool) {
	return b.row(field, func(s *bulkStarts) { s.keys, s.values = append(s.keys, key), append(s.values, v) })
}

// Skip records that a row of the bulk does not write field (a hook reset
// it): it returns as Add does.
func (b *Bulk) Skip(field string) (keys []any, values []int64, last bool) {
	return b.row(field, func(*bulkStarts) {})
}

func (b *Bulk) row(field string, add func(*bulkStarts)) (keys []any, values []int64, last bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.by[field]
	if s == nil {
		s = &bulkStarts{}
		b.by[field] = s
	}
	add(s)
	if s.rows++; s.rows < b.n {
		return nil, nil, false
	}
	delete(b.by, field)
	return s.keys, s.values, true
}
