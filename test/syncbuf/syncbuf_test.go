package syncbuf

import (
	"strings"
	"sync"
	"testing"
)

// Writers and a reader at once (under -race): every write is there, whole.
func TestConcurrentWritesAndReads(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				_, _ = b.Write([]byte("ab\n"))
				_ = b.String()
			}
		})
	}
	wg.Wait()
	if got := b.String(); strings.Count(got, "ab\n") != 800 || len(got) != 2400 {
		t.Errorf("%d bytes, %d writes whole; want 800", len(got), strings.Count(got, "ab\n"))
	}
}
