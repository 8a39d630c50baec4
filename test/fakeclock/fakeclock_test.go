package fakeclock

import (
	"sync"
	"testing"
	"time"
)

func TestAdvance(t *testing.T) {
	start := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	c := New(start)
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() { c.Advance(time.Hour); _ = c.Now() })
	}
	wg.Wait()
	if got, want := c.Now(), start.Add(10*time.Hour); !got.Equal(want) {
		t.Errorf("Now after ten hours = %s, want %s", got, want)
	}
}
