package entrt

import "testing"

// A buffer's id converts to the schema's id type when it fits, and is
// refused, naming the schema, when it does not.
func TestKeyAsConvertsWhatFitsAndRefusesTheRest(t *testing.T) {
	if k, err := KeyAs[int]("Post", int64(7)); err != nil || k != 7 {
		t.Errorf("int64 7 as int: %v, %v", k, err)
	}
	if k, err := KeyAs[int32]("Post", uint(9)); err != nil || k != 9 {
		t.Errorf("uint 9 as int32: %v, %v", k, err)
	}
	type slug string
	if k, err := KeyAs[slug]("Page", "home"); err != nil || k != "home" {
		t.Errorf("string as a string type: %v, %v", k, err)
	}
	for _, id := range []any{int64(1 << 40), uint64(1 << 63), "7", nil} {
		if _, err := KeyAs[int32]("Post", id); err == nil {
			t.Errorf("%v (%T) as int32: no error", id, id)
		}
	}
}
