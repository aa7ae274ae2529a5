package engine

import (
	"testing"
	"time"
)

// clockWidths is a Widths with a clock the test moves.
func clockWidths(max int) (*Widths, *time.Time) {
	now := time.Unix(1_700_000_000, 0)
	ws := NewWidths(max, 5*time.Second)
	ws.now = func() time.Time { return now }
	return ws, &now
}

// overlapping runs n rounds of two statements of key in flight at once, the
// most one process's combining lets run, and returns the slots drawn.
func overlapping(ws *Widths, key any, n int) map[int]bool {
	seen := map[int]bool{}
	for range n {
		a, ra := ws.Acquire(key)
		b, rb := ws.Acquire(key)
		seen[a], seen[b] = true, true
		ra()
		rb()
	}
	return seen
}

func TestWidthsWidenWhileStatementsMeetOnASlot(t *testing.T) {
	ws, now := clockWidths(16)
	overlapping(ws, 7, 200)
	if w := ws.Width(7); w < 4 {
		t.Fatalf("after 200 rounds of two statements at once, without a window ending: width %d, want at least 4", w)
	}
	for range 20 { // window ends: each widens while more than 1 in 8 collide
		overlapping(ws, 7, 200)
		*now = now.Add(time.Second)
	}
	seen := overlapping(ws, 7, 400)
	if w := ws.Width(7); w < 8 || w > 16 {
		t.Fatalf("width %d after 20 s of two statements at once: want 8 or 16 (max 16)", w)
	}
	for s := range seen {
		if s < 0 || s >= 16 {
			t.Fatalf("slot %d drawn, outside 0..15", s)
		}
	}
	if w := ws.Width(8); w != 1 {
		t.Fatalf("another parent has width %d, want 1", w)
	}
}

func TestWidthsStayAtOneRowForLoneStatements(t *testing.T) {
	ws, now := clockWidths(16)
	for i := range 10_000 {
		slot, release := ws.Acquire(i % 100)
		if slot != 0 {
			t.Fatalf("a parent never written twice at once drew slot %d", slot)
		}
		release()
		*now = now.Add(time.Millisecond)
	}
	if n := len(ws.parents); n != 0 {
		t.Fatalf("%d parents hold state after statements that never overlapped", n)
	}
}

func TestWidthsNarrowOnlyAfterTheCooldown(t *testing.T) {
	ws, now := clockWidths(16)
	for ws.Width(1) < 16 {
		overlapping(ws, 1, 100)
		*now = now.Add(time.Second)
	}
	// Still hot: two statements in flight at once in every window keep the
	// width even when they seldom meet on a slot.
	for range 30 {
		overlapping(ws, 1, 20)
		*now = now.Add(time.Second)
	}
	if w := ws.Width(1); w != 16 {
		t.Fatalf("a parent written two at a time for 30 s narrowed to %d", w)
	}
	// Cold: one statement at a time.
	lone := func(d time.Duration) {
		for end := now.Add(d); now.Before(end); *now = now.Add(100 * time.Millisecond) {
			_, release := ws.Acquire(1)
			release()
		}
	}
	lone(4 * time.Second)
	if w := ws.Width(1); w != 16 {
		t.Fatalf("narrowed to %d before the 5 s cooldown ended", w)
	}
	lone(2 * time.Second)
	if w := ws.Width(1); w != 8 {
		t.Fatalf("width %d after one cooldown, want 8", w)
	}
	*now = now.Add(time.Hour) // left alone
	if w := ws.Width(1); w != 1 {
		t.Fatalf("width %d after an hour without writes, want 1", w)
	}
}

func TestWidthsForgetIdleParents(t *testing.T) {
	ws, now := clockWidths(16)
	for i := range 2000 {
		overlapping(ws, i, 20) // widens each: state kept
	}
	if n := len(ws.parents); n != 2000 {
		t.Fatalf("%d parents hold state, want 2000", n)
	}
	*now = now.Add(2 * time.Minute)
	ws.Acquire("new")
	if n := len(ws.parents); n != 1 {
		t.Fatalf("%d parents hold state after two idle minutes, want 1 (the new one)", n)
	}
	ws.Acquire([]byte("a key Go cannot compare")) // no panic
}
