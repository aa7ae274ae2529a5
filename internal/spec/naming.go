package spec

import (
	"sync"

	"github.com/jinzhu/inflection"
)

// singulars remembers inflection.Singular's answers: a side table's name
// starts with its parent table's name in the singular, and every migration
// and every parse of a model asks again for the same few tables' (ent's
// migration asks for every table of the schema). inflection tries its
// rules' regular expressions in turn on every call: under -race that was
// 14 of the integration tests' 346 CPU-seconds. The words are the
// application's table names, a bounded set.
var singulars sync.Map // string -> string

// Singular returns inflection.Singular(word), computed once per word. Rules
// added to inflection (AddSingular, AddIrregular, ...) after a word's first
// use do not change what it returns for that word: add them before the
// first migration or model parse, as GORM's own schema cache requires.
func Singular(word string) string {
	if s, ok := singulars.Load(word); ok {
		return s.(string)
	}
	s := inflection.Singular(word)
	singulars.Store(word, s)
	return s
}
