package snapshot

import (
	"testing"
	"time"
)

// A deletion is remembered until DeletionMemory has passed and the next
// Add prunes it; other instances are unknown.
func TestDeletions(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	d := NewDeletions(func() time.Time { return now })
	d.Add("i-1")
	if !d.Has("i-1") || d.Has("i-2") {
		t.Fatalf("after Add(i-1): Has(i-1) %v, Has(i-2) %v; want true, false", d.Has("i-1"), d.Has("i-2"))
	}
	now = now.Add(DeletionMemory + time.Second)
	d.Add("i-2")
	if d.Has("i-1") || !d.Has("i-2") {
		t.Errorf("an hour later: Has(i-1) %v, Has(i-2) %v; want false, true", d.Has("i-1"), d.Has("i-2"))
	}
}
