package entrt

import (
	"context"

	"entgo.io/ent"
	"entgo.io/ent/dialect"
	entsql "entgo.io/ent/dialect/sql"
)

// Own marks entcounter's own interceptors, which Intercepted does not count.
type Own interface{ HotCounterOwn() }

// Intercepted reports whether inters, the query interceptors of a client's
// schema, hold one that is not entcounter's own: the user's interceptors
// may hide rows, so that an update of one row by id must first read it
// through them.
func Intercepted(inters []ent.Interceptor) bool {
	for _, i := range inters {
		if _, own := i.(Own); !own {
			return true
		}
	}
	return false
}

// Written reports whether m still writes one of its schema's counters when
// ent is about to send it: entcounter's hooks have taken out what they saw,
// so a hook that ent ran after them (the schema's own Hooks) wrote it.
func Written(r Runtime, m ent.Mutation) bool {
	for _, d := range r.Defs {
		if d.Type == m.Type() && Touched(m, d.Field) {
			return true
		}
	}
	return false
}

// Touched reports whether the mutation adds to, sets or clears field.
func Touched(m ent.Mutation, field string) bool {
	_, added := m.AddedField(field)
	_, set := m.Field(field)
	return added || set || m.FieldCleared(field)
}

// Late is set by entcounter: it runs the counter hooks of the counters that
// m writes around save, the generated update's own write.
var Late func(ctx context.Context, r Runtime, m ent.Mutation, save func(context.Context) (ent.Value, error)) (ent.Value, error)

// OnlyTraversers reports whether every interceptor of every list in inters
// is a Traverser (ent's TraverseFunc, as ent's soft-delete mixin writes
// its filter) or entcounter's own: then a query's interceptors change
// what it selects, which its rendered SQL shows, not how it runs.
func OnlyTraversers(inters ...[]ent.Interceptor) bool {
	for _, list := range inters {
		for _, i := range list {
			_, own := i.(Own)
			if _, trv := i.(ent.Traverser); !own && !trv {
				return false
			}
		}
	}
	return true
}

// OneServer reports whether d sends every statement to one database: ent's
// own SQL driver, or ent's debug driver around it. A read outside a
// transaction then goes where the write goes; a driver of the
// application's own may send it to a replica.
func OneServer(d dialect.Driver) bool {
	for {
		switch v := d.(type) {
		case *dialect.DebugDriver:
			d = v.Driver
		case *entsql.Driver:
			return true
		default:
			return false
		}
	}
}
