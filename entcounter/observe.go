package entcounter

import (
	"fmt"
	"reflect"

	"entgo.io/ent"

	"github.com/hotcounter/hotcounter"
	"github.com/hotcounter/hotcounter/internal/engine"
	"github.com/hotcounter/hotcounter/internal/observe"
)

// HotKeys returns the k rows with the most increments, among all counters
// and the plain fields counted by [Configure]'s hook, over the last one to
// two windows, hottest (highest Rate) first. An increment is counted for
// its row when it names one: UpdateOneID(id).AddX(n), or a Buffer's
// Increment. It fails when [Configure] turned the counting off, as
// gormcounter.HotKeys does.
func HotKeys(src Source, k int) ([]hotcounter.HotKey, error) {
	keys, err := src.HotCounter().Observer().HotKeys(k)
	if err != nil {
		return nil, fmt.Errorf("entcounter: HotKeys: %w", err)
	}
	return keys, nil
}

// countPlainAdds counts the adds of an UpdateOne mutation to fields that
// are not counters.
func countPlainAdds(o *observe.Observer, m ent.Mutation) {
	fields := m.AddedFields()
	if len(fields) == 0 {
		return
	}
	id, ok := mutationID(m)
	if !ok {
		return
	}
	src, generated := m.(Source)
	table := m.Type()
	if generated {
		if t, ok := src.HotCounter().Tables[m.Type()]; ok {
			table = t
		}
	}
	for _, f := range fields {
		if generated {
			if _, isCounter := src.HotCounter().Def(m.Type(), f); isCounter {
				continue
			}
		}
		o.CountWrite(table, f, engine.KeyText(id), false)
	}
}

// mutationID is the id of the row a mutation updates: generated mutations
// have ID() (T, bool) with the schema's id type.
func mutationID(m ent.Mutation) (any, bool) {
	if h, ok := m.(interface{ HotCounterID() (any, bool) }); ok {
		return h.HotCounterID()
	}
	method := reflect.ValueOf(m).MethodByName("ID")
	if !method.IsValid() || method.Type().NumIn() != 0 || method.Type().NumOut() != 2 || method.Type().Out(1).Kind() != reflect.Bool {
		return nil, false
	}
	out := method.Call(nil)
	return out[0].Interface(), out[1].Bool()
}
