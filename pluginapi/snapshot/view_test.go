package snapshot

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// clock is a clock the test moves by hand.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// Many callers at once share one fetch; a snapshot within maxAge is
// served without fetching, an older one is refreshed.
func TestGetCoalescesAndAges(t *testing.T) {
	c := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	var fetches atomic.Int32
	release := make(chan struct{})
	v := New(func(context.Context) (map[string]string, error) {
		fetches.Add(1)
		<-release
		return map[string]string{"a": "running"}, nil
	}, c.now, time.Minute)
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if got, err := v.Get(t.Context(), time.Second); err != nil || got["a"] != "running" {
				t.Errorf("Get = %v, %v", got, err)
			}
		}()
	}
	time.Sleep(10 * time.Millisecond) // let the callers queue on the one fetch (not an assertion)
	close(release)
	wg.Wait()
	if n := fetches.Load(); n != 1 {
		t.Errorf("%d fetches for 20 callers at once, want 1", n)
	}
	if _, err := v.Get(t.Context(), time.Second); err != nil || fetches.Load() != 1 {
		t.Errorf("a fresh snapshot was fetched again (%d fetches, %v)", fetches.Load(), err)
	}
	c.add(2 * time.Second)
	if _, err := v.Get(t.Context(), time.Second); err != nil || fetches.Load() != 2 {
		t.Errorf("an old snapshot was not refreshed (%d fetches, %v)", fetches.Load(), err)
	}
}

// The overlay: a launch not yet visible shows for the window; a change
// newer than the snapshot wins; Uncertain forces a refresh.
func TestOverlay(t *testing.T) {
	c := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	cloud := map[string]string{"old": "running"}
	var mu sync.Mutex
	v := New(func(context.Context) (map[string]string, error) {
		mu.Lock()
		defer mu.Unlock()
		out := map[string]string{}
		for k, s := range cloud {
			out[k] = s
		}
		return out, nil
	}, c.now, time.Minute)
	ctx := t.Context()
	if _, err := v.Get(ctx, time.Hour); err != nil {
		t.Fatal(err)
	}
	c.add(time.Second)
	v.Launched("new", "pending")
	v.Changed("old", "terminating")
	got, _ := v.Get(ctx, time.Hour)
	if got["new"] != "pending" || got["old"] != "terminating" {
		t.Errorf("overlay not applied: %v", got)
	}
	if !v.RecentlyLaunched("new") || v.RecentlyLaunched("old") {
		t.Error("RecentlyLaunched wrong")
	}
	if s, ok := v.Lookup("new"); !ok || s != "pending" {
		t.Errorf("Lookup(new) = %q, %v", s, ok)
	}
	// A refresh that does not see the launch keeps it for the window.
	c.add(time.Second)
	v.Uncertain()
	got, _ = v.Get(ctx, time.Hour)
	if got["new"] != "pending" {
		t.Errorf("a launch within the window vanished: %v", got)
	}
	c.add(2 * time.Minute)
	v.Uncertain()
	got, _ = v.Get(ctx, time.Hour)
	if _, ok := got["new"]; ok {
		t.Errorf("a launch the cloud never showed outlived the window: %v", got)
	}
}

// A failed refresh fails the callers that needed it; a cancelled caller
// returns its context's error.
func TestGetErrors(t *testing.T) {
	boom := errors.New("boom")
	v := New(func(context.Context) (map[string]string, error) { return nil, boom }, time.Now, time.Minute)
	if _, err := v.Get(t.Context(), time.Second); !errors.Is(err, boom) {
		t.Errorf("Get = %v, want the fetch's error", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := v.Get(ctx, time.Second); !errors.Is(err, context.Canceled) {
		t.Errorf("Get with a cancelled context = %v", err)
	}
}

// NextLaunch's channel closes at the next Launched or Uncertain, not at
// a Changed or a refresh, and each launch closes the channel taken before
// it only.
func TestNextLaunch(t *testing.T) {
	closed := func(ch <-chan struct{}) bool {
		select {
		case <-ch:
			return true
		default:
			return false
		}
	}
	tests := []struct {
		name string
		do   func(v *View[string])
		want bool
	}{
		{name: "Launched", do: func(v *View[string]) { v.Launched("i-1", "pending") }, want: true},
		{name: "Uncertain", do: func(v *View[string]) { v.Uncertain() }, want: true},
		{name: "Changed", do: func(v *View[string]) { v.Changed("i-1", "terminating") }},
		{name: "a refresh", do: func(v *View[string]) { _, _ = v.Get(t.Context(), 0) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := New(func(context.Context) (map[string]string, error) { return map[string]string{}, nil }, time.Now, time.Minute)
			ch := v.NextLaunch()
			if again := v.NextLaunch(); again != ch {
				t.Error("two NextLaunch before any launch gave two channels")
			}
			tt.do(v)
			if got := closed(ch); got != tt.want {
				t.Errorf("closed = %v, want %v", got, tt.want)
			}
			if next := v.NextLaunch(); tt.want && closed(next) {
				t.Error("the channel taken after the launch is closed already")
			}
		})
	}
}
