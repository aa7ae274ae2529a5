package entrt

import (
	"testing"
	"time"
)

// Two reads share a key only when they send the same arguments: times at
// the same wall clock in different zones are different instants, and an
// argument whose text need not say all of it shares nothing.
func TestReadKeySharesOnlyWhatIsSentAlike(t *testing.T) {
	at := time.Date(2026, 12, 6, 9, 0, 0, 0, time.FixedZone("", 3600))
	other := time.Date(2026, 12, 6, 9, 0, 0, 0, time.FixedZone("", 5*3600))
	q := "SELECT id FROM posts WHERE id = ? AND delete_time > ?"
	k1, ok1 := readKey(q, []any{7, at})
	k2, ok2 := readKey(q, []any{7, other})
	k3, _ := readKey(q, []any{7, at.In(time.UTC)})
	if !ok1 || !ok2 || k1 == k2 {
		t.Errorf("times an hour apart share a key: %q, %q", k1, k2)
	}
	if k1 == k3 {
		t.Errorf("one instant in two zones, sent as two values, shares a key")
	}
	if a, _ := readKey(q, []any{int64(7), "x"}); a == mustKey(t, q, []any{7, "x"}) {
		t.Error("an int64 and an int share a key")
	}
	if _, ok := readKey(q, []any{struct{ A int }{1}}); ok {
		t.Error("a struct argument is shared")
	}
	if a, b := mustKey(t, q, []any{[16]byte{1}}), mustKey(t, q, []any{[16]byte{1}}); a != b {
		t.Error("two equal byte arrays do not share a key")
	}
}

func mustKey(t *testing.T, q string, args []any) string {
	t.Helper()
	k, ok := readKey(q, args)
	if !ok {
		t.Fatalf("%v not shared", args)
	}
	return k
}
