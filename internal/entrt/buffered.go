package entrt

import (
	"context"
	"fmt"
	"reflect"

	"github.com/hotcounter/hotcounter/internal/engine"
)

// A write-behind buffer's add of an ent counter runs as the client's
// UpdateOneID(id).AddX(delta) (Runtime.Add), so that the client's hooks,
// the schema's privacy policy and its query interceptors decide it as
// they decide the same add sent to the database; under WithBuffered,
// entcounter's hook of the counter hands it to the buffer (Buffered.Sink)
// instead of writing it.

// Buffered is an add that goes to a write-behind buffer: the counter, the
// row, and where the add goes once the hooks let it through.
type Buffered struct {
	Type, Field string
	ID          any
	// Sink takes the add, with the row's key as the mutation holds it.
	Sink func(ctx context.Context, key any, delta int64) error
}

type bufferedKey struct{}

// WithBuffered returns a context under which entcounter's hook hands the
// add of b's counter of b's row to b.Sink.
func WithBuffered(ctx context.Context, b *Buffered) context.Context {
	return context.WithValue(ctx, bufferedKey{}, b)
}

// BufferedFor returns the buffered add ctx carries for the counter field
// of a mutation of schema typ whose row is id, if any: a mutation that a
// hook runs inside it (another row, another counter) is not buffered.
func BufferedFor(ctx context.Context, typ string, id any, hasID bool) (*Buffered, bool) {
	b, ok := ctx.Value(bufferedKey{}).(*Buffered)
	if !ok || !hasID || b.Type != typ || engine.KeyText(b.ID) != engine.KeyText(id) {
		return nil, false
	}
	return b, true
}

// KeyAs converts an id given to a buffer (any integer or string type) to
// the id type T of schema typ, or says it cannot.
func KeyAs[T any](typ string, id any) (T, error) {
	var zero T
	if k, ok := id.(T); ok {
		return k, nil
	}
	to := reflect.TypeOf(zero)
	v := reflect.ValueOf(id)
	isInt := to.Kind() >= reflect.Int && to.Kind() <= reflect.Int64
	var n int64
	switch {
	case !v.IsValid():
	case v.CanInt() && isInt:
		n = v.Int()
	case v.CanUint() && isInt && v.Uint() <= 1<<63-1:
		n = int64(v.Uint())
	case v.Kind() == reflect.String && to.Kind() == reflect.String:
		return v.Convert(to).Interface().(T), nil
	default:
		isInt = false
	}
	if out := reflect.New(to).Elem(); isInt && v.IsValid() && !out.OverflowInt(n) {
		out.SetInt(n)
		return out.Interface().(T), nil
	}
	return zero, fmt.Errorf("%s: id %v (%T) is not a %v", typ, id, id, to)
}
