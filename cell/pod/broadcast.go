package pod

import "sync"

// broadcaster copies a stream to its subscribers without ever blocking
// the writer: a subscriber that falls attachBuffer chunks behind is cut
// off.
type broadcaster struct {
	mu     sync.Mutex
	subs   map[*subscription]bool
	closed bool
}

// subscription is one reader of a broadcaster.
type subscription struct {
	b  *broadcaster
	ch chan []byte

	mu       sync.Mutex
	done     bool
	overflow bool
}

func newBroadcaster() *broadcaster { return &broadcaster{subs: map[*subscription]bool{}} }

// Write implements io.Writer; it never fails.
func (b *broadcaster) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.subs) == 0 {
		return len(p), nil
	}
	chunk := append([]byte(nil), p...)
	for s := range b.subs {
		select {
		case s.ch <- chunk:
		default:
			s.mu.Lock()
			s.overflow = true
			s.mu.Unlock()
			b.removeLocked(s)
		}
	}
	return len(p), nil
}

// subscribe returns a subscription receiving what is written from now on;
// its channel is closed by cancel or close.
func (b *broadcaster) subscribe() *subscription {
	s := &subscription{b: b, ch: make(chan []byte, attachBuffer)}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		close(s.ch)
		s.done = true
		return s
	}
	b.subs[s] = true
	return s
}

func (b *broadcaster) removeLocked(s *subscription) {
	if !b.subs[s] {
		return
	}
	delete(b.subs, s)
	s.mu.Lock()
	if !s.done {
		s.done = true
		close(s.ch)
	}
	s.mu.Unlock()
}

// close ends every subscription (the stream ended).
func (b *broadcaster) close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	for s := range b.subs {
		b.removeLocked(s)
	}
}

func (s *subscription) cancel() {
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	s.b.removeLocked(s)
}

func (s *subscription) overflowed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.overflow
}
