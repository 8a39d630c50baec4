package azure

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/kipcell/kip/pluginapi"
)

// eventLog collects a watch's events.
type eventLog struct {
	mu     sync.Mutex
	events []pluginapi.Event
}

func (l *eventLog) send(e *pluginapi.Event) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, *e)
	return nil
}

// waitFor waits until an event matching ok arrived, and returns it.
func (l *eventLog) waitFor(t *testing.T, what string, ok func(pluginapi.Event) bool) pluginapi.Event {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		l.mu.Lock()
		for _, e := range l.events {
			if ok(e) {
				l.mu.Unlock()
				return e
			}
		}
		l.mu.Unlock()
		time.Sleep(2 * time.Millisecond)
	}
	t.Fatalf("no %s event in 10s", what)
	return pluginapi.Event{}
}

func (l *eventLog) count(ok func(pluginapi.Event) bool) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, e := range l.events {
		if ok(e) {
			n++
		}
	}
	return n
}

// A Spot VM Azure evicts (Deleting, then gone, without the plugin's
// delete) is an interruption; a Spot VM the plugin terminates is not.
func TestWatchEventsSpotEviction(t *testing.T) {
	f := newFakeARM(t)
	p := configured(t, f, testConfig(f), func(p *provider) { p.SnapshotAge = 0 })
	for _, cell := range []string{"kip-evicted", "kip-ended"} {
		req := launchRequest(cell)
		req.CapacityType = pluginapi.CapacitySpot
		if _, err := p.Launch(t.Context(), req); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(t.Context())
	log := &eventLog{}
	done := make(chan error, 1)
	go func() { done <- p.WatchEvents(ctx, &pluginapi.WatchEventsRequest{}, log.send) }()
	defer func() {
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("WatchEvents ended with %v", err)
		}
	}()
	// Wait for the first poll: a state change after it is reported.
	for f.callCount("VirtualMachines_List") < 3 {
		time.Sleep(time.Millisecond)
	}
	if _, err := p.Terminate(t.Context(), &pluginapi.TerminateRequest{ID: "kip-ended"}); err != nil {
		t.Fatal(err)
	}
	f.evict("kip-evicted")
	e := log.waitFor(t, "interruption", func(e pluginapi.Event) bool { return e.Type == pluginapi.EventInterruption })
	if e.InstanceID != "kip-evicted" || e.Reason != evictionReason {
		t.Errorf("interruption %+v; want kip-evicted, %q", e, evictionReason)
	}
	f.finishDeletes()
	log.waitFor(t, "kip-ended terminated", func(e pluginapi.Event) bool {
		return e.InstanceID == "kip-ended" && e.State == pluginapi.StateTerminated
	})
	log.waitFor(t, "kip-evicted terminated", func(e pluginapi.Event) bool {
		return e.InstanceID == "kip-evicted" && e.State == pluginapi.StateTerminated
	})
	if n := log.count(func(e pluginapi.Event) bool { return e.Type == pluginapi.EventInterruption }); n != 1 {
		t.Errorf("%d interruptions; want 1 (kip-evicted's)", n)
	}
	desc, err := p.Describe(t.Context(), &pluginapi.DescribeRequest{IDs: []string{"kip-evicted"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(desc.Instances) != 0 {
		t.Errorf("Describe of the evicted, deleted VM answered %+v", desc.Instances)
	}
}

// A Launch wakes a watcher in its slow sleep (no VM booting): the new VM
// is reported long before pollSlow, as the aws plugin's watcher does
// (snapshot.View.Poll); before, it waited out the sleep.
func TestWatchEventsWakesOnLaunch(t *testing.T) {
	f := newFakeARM(t)
	p := configured(t, f, testConfig(f), func(p *provider) {
		p.PollFast, p.PollSlow, p.SnapshotAge = 10*time.Millisecond, time.Hour, 10*time.Millisecond
	})
	ctx, cancel := context.WithCancel(t.Context())
	log := &eventLog{}
	done := make(chan error, 1)
	go func() { done <- p.WatchEvents(ctx, &pluginapi.WatchEventsRequest{}, log.send) }()
	defer func() {
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("WatchEvents ended with %v", err)
		}
	}()
	for f.callCount("VirtualMachines_List") == 0 { // the first poll; then an hour's sleep
		time.Sleep(time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond) // into the sleep (not an assertion)
	start := time.Now()
	resp, err := p.Launch(t.Context(), launchRequest("kip-woken"))
	if err != nil {
		t.Fatal(err)
	}
	log.waitFor(t, "the new VM", func(e pluginapi.Event) bool {
		return e.Type == pluginapi.EventStateChange && e.InstanceID == resp.Instance.ID
	})
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("the new VM reported %v after its launch, want well within pollSlow", took)
	}
}
