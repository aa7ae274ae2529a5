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
	by map[string]*bulkStarts // by counter (Def.Name)
}

type bulkStarts struct {
	keys   []any
	values []int64
}

// NewBulk returns the Bulk of a CreateBulk of n rows.
func NewBulk(n int) *Bulk { return &Bulk{n: n, by: map[string]*bulkStarts{}} }

// Add records that the row key starts counter at v. Once every row of the
// bulk has been added for counter, it returns their keys and values, and
// last true; before that, nothing and false.
func (b *Bulk) Add(counter string, key any, v int64) (keys []any, values []int64, last bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.by[counter]
	if s == nil {
		s = &bulkStarts{}
		b.by[counter] = s
	}
	s.keys, s.values = append(s.keys, key), append(s.values, v)
	if len(s.keys) < b.n {
		return nil, nil, false
	}
	delete(b.by, counter)
	return s.keys, s.values, true
}
