package boottime

import (
	"testing"
	"time"
)

// Quickest is the shortest of the last Memory boots: none before the
// first, and an old quick boot is forgotten once Memory boots followed.
func TestQuickest(t *testing.T) {
	var b Times
	if d, ok := b.Quickest(); ok {
		t.Errorf("empty Times: Quickest = %v, true; want none", d)
	}
	b.Add(5 * time.Second)
	b.Add(20 * time.Second)
	if d, ok := b.Quickest(); !ok || d != 5*time.Second {
		t.Errorf("Quickest = %v, %v; want 5s", d, ok)
	}
	for range Memory {
		b.Add(30 * time.Second)
	}
	if d, ok := b.Quickest(); !ok || d != 30*time.Second {
		t.Errorf("after %d slower boots, Quickest = %v, %v; want 30s (the 5s and 20s ones forgotten)", Memory, d, ok)
	}
}
