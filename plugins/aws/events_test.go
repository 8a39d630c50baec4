package aws

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/kipcell/kip/pluginapi"
)

// watch runs WatchEvents until the test ends and returns its events.
func watch(t *testing.T, p *provider) <-chan *pluginapi.Event {
	t.Helper()
	events := make(chan *pluginapi.Event, 100)
	done := make(chan error, 1)
	go func() {
		done <- p.WatchEvents(t.Context(), &pluginapi.WatchEventsRequest{}, func(e *pluginapi.Event) error {
			events <- e
			return nil
		})
	}()
	// t.Context() ends just before the Cleanups.
	t.Cleanup(func() {
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("WatchEvents ended with %v, want context.Canceled", err)
		}
	})
	return events
}

// waitEvent returns the first event matching want, failing after 10s.
func waitEvent(t *testing.T, events <-chan *pluginapi.Event, what string, want func(*pluginapi.Event) bool) *pluginapi.Event {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case e := <-events:
			if want(e) {
				return e
			}
		case <-deadline:
			t.Fatalf("no %s event within 10s", what)
		}
	}
}

func TestWatchEventsStateChangesAndSpotInterruption(t *testing.T) {
	f := newFakeEC2(t)
	p := configured(t, testConfig(f))
	events := watch(t, p)
	for f.callCount("DescribeInstances") == 0 { // the first poll only remembers
		time.Sleep(time.Millisecond)
	}
	req := launchRequest("cell-spot")
	req.CapacityType = pluginapi.CapacitySpot
	launched, err := p.Launch(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	id := launched.Instance.ID
	e := waitEvent(t, events, "running", func(e *pluginapi.Event) bool {
		return e.Type == pluginapi.EventStateChange && e.InstanceID == id && e.State == pluginapi.StateRunning
	})
	if e.CellID != "cell-spot" || e.Time.IsZero() {
		t.Errorf("state change = %+v, want cell-spot's with a time", e)
	}

	f.setState(id, "shutting-down", reasonSpotTermination)
	e = waitEvent(t, events, "interruption", func(e *pluginapi.Event) bool { return e.Type == pluginapi.EventInterruption })
	if e.InstanceID != id || e.CellID != "cell-spot" || e.Deadline.IsZero() {
		t.Errorf("interruption = %+v, want cell-spot's with a deadline", e)
	}
	e = waitEvent(t, events, "terminated", func(e *pluginapi.Event) bool {
		return e.Type == pluginapi.EventStateChange && e.InstanceID == id && e.State == pluginapi.StateTerminated
	})
	if e.Reason != "spot interruption (Server.SpotInstanceTermination)" {
		t.Errorf("terminated event reason = %q", e.Reason)
	}
	// Once only.
	select {
	case e := <-events:
		if e.Type == pluginapi.EventInterruption {
			t.Errorf("a second interruption event: %+v", e)
		}
	case <-time.After(50 * time.Millisecond):
	}
}

func TestWatchEventsMaintenance(t *testing.T) {
	f := newFakeEC2(t)
	id := f.add("running", cellTags(testCluster, "cell-1"))
	other := f.add("running", cellTags("other", "cell-2"))
	notBefore := time.Date(2026, 7, 1, 10, 0, 0, 0, time.UTC)
	f.scheduleEvent(id, "system-reboot", notBefore)
	f.scheduleEvent(other, "instance-stop", notBefore)
	p := configured(t, testConfig(f))
	events := watch(t, p)
	e := waitEvent(t, events, "maintenance", func(e *pluginapi.Event) bool { return e.Type == pluginapi.EventMaintenance })
	if e.InstanceID != id || e.CellID != "cell-1" || !e.Deadline.Equal(notBefore) || e.Reason != "system-reboot: The instance is scheduled for system-reboot" {
		t.Errorf("maintenance = %+v", e)
	}
	// Polled again, the same event is not sent again; the other
	// cluster's never is.
	calls := f.callCount("DescribeInstanceStatus")
	for f.callCount("DescribeInstanceStatus") < calls+3 {
		time.Sleep(time.Millisecond)
	}
	select {
	case e := <-events:
		t.Errorf("unexpected event %+v", e)
	case <-time.After(50 * time.Millisecond):
	}
	r := f.requests("DescribeInstanceStatus")[0]
	if r.Get("Filter.1.Name") != "event.code" || len(list(r, "Filter.1.Value")) != 5 {
		t.Errorf("DescribeInstanceStatus request = %v, want a filter on the 5 maintenance event codes", r)
	}
}

// Polls that fail are retried; the stream does not end.
func TestWatchEventsSurvivesFailedPolls(t *testing.T) {
	f := newFakeEC2(t)
	id := f.add("pending", cellTags(testCluster, "cell-1"))
	f.bootPolls = 100
	p := configured(t, testConfig(f))
	events := watch(t, p)
	for f.callCount("DescribeInstances") == 0 {
		time.Sleep(time.Millisecond)
	}
	f.fail("DescribeInstances", codeRequestLimitExceeded, 503, 3)
	f.setState(id, "running", "")
	waitEvent(t, events, "running", func(e *pluginapi.Event) bool { return e.InstanceID == id && e.State == pluginapi.StateRunning })
}

// A Launch wakes a watcher in its slow sleep (no instance booting): the
// new instance is seen pending, then running, long before pollSlow; and
// a launch that failed with an unknown outcome wakes it too.
func TestWatchEventsWakesOnLaunch(t *testing.T) {
	tests := []struct {
		name string
		// launch launches (or tries to) and returns the instance to
		// expect running.
		launch func(t *testing.T, f *fakeEC2, p *provider) string
	}{
		{name: "launched", launch: func(t *testing.T, _ *fakeEC2, p *provider) string {
			resp, err := p.Launch(t.Context(), launchRequest("cell-1"))
			if err != nil {
				t.Fatal(err)
			}
			return resp.Instance.ID
		}},
		{name: "answer lost", launch: func(t *testing.T, f *fakeEC2, p *provider) string {
			// EC2 failed the call, but an instance exists (as when the
			// answer was lost): the watcher must look.
			f.fail("RunInstances", "InternalError", 500, 1)
			id := f.add("running", cellTags(testCluster, "cell-1"))
			if _, err := p.Launch(t.Context(), launchRequest("cell-1")); err == nil {
				t.Fatal("Launch succeeded, want the injected error")
			}
			return id
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeEC2(t)
			p := configured(t, testConfig(f), func(p *provider) {
				p.PollFast, p.PollSlow, p.statusEvery = 10*time.Millisecond, time.Hour, time.Hour
				p.SnapshotAge = 10 * time.Millisecond
			})
			events := watch(t, p)
			for f.callCount("DescribeInstances") == 0 { // the first poll; then an hour's sleep
				time.Sleep(time.Millisecond)
			}
			time.Sleep(50 * time.Millisecond) // into the sleep (not an assertion)
			start := time.Now()
			id := tt.launch(t, f, p)
			waitEvent(t, events, "running", func(e *pluginapi.Event) bool {
				return e.Type == pluginapi.EventStateChange && e.InstanceID == id && e.State == pluginapi.StateRunning
			})
			if took := time.Since(start); took > 5*time.Second {
				t.Errorf("running seen %v after the launch, want well within pollSlow", took)
			}
		})
	}
}

// The poll interval is slow while nothing changes: no instance pending or
// terminating.
func TestWatchEventsPollsSlowlyWhenSteady(t *testing.T) {
	f := newFakeEC2(t)
	f.add("running", cellTags(testCluster, "cell-1"))
	var intervals []time.Duration
	p := configured(t, testConfig(f), func(p *provider) {
		p.PollFast, p.PollSlow, p.statusEvery = time.Second, time.Minute, time.Hour
	})
	ctx, cancel := context.WithCancel(t.Context())
	p.Sleep = func(ctx context.Context, d time.Duration) error {
		intervals = append(intervals, d)
		if len(intervals) == 3 {
			cancel()
		}
		return ctx.Err()
	}
	clock := newFakeClock()
	p.Now = clock.Now
	p.cfg.Load().view.SetClock(clock.Now)
	err := p.WatchEvents(ctx, &pluginapi.WatchEventsRequest{}, func(*pluginapi.Event) error { return nil })
	if !errors.Is(err, context.Canceled) {
		t.Errorf("WatchEvents = %v", err)
	}
	if len(intervals) != 3 || intervals[0] != time.Minute {
		t.Errorf("poll intervals = %v, want a minute each", intervals)
	}
}

// While an instance boots, the watcher polls every pollFast until it has
// seen one boot, then sleeps until shortly before a boot as quick as the
// quickest it saw may have ended; an instance shutting down is not
// waited on.
func TestWatchEventsPollsBootsWhenTheyMayBeRunning(t *testing.T) {
	f := newFakeEC2(t)
	clock := newFakeClock()
	p := configured(t, testConfig(f), func(p *provider) {
		p.PollFast, p.PollSlow, p.PollBoot, p.statusEvery = time.Second, time.Minute, time.Second/2, time.Hour
		p.SnapshotAge = time.Second / 4 // every poll of the test calls EC2
		p.Now = clock.Now
	})
	p.cfg.Load().view.SetClock(clock.Now)
	f.bootPolls = 1000 // the steps say when instances run
	first := f.add("pending", cellTags(testCluster, "cell-1"))
	f.setLaunched(first, clock.Now())

	// Each step runs before the poll that follows a sleep, and says which
	// sleep (the one before it) it expects.
	var second string
	steps := []struct {
		want time.Duration
		then func()
	}{
		{time.Second, func() {}}, // no boot seen: poll fast
		{time.Second, func() { clock.Advance(18 * time.Second) }},
		{time.Second, func() { f.setState(first, "running", "") }}, // seen at launch + 21 s
		{time.Minute, func() { // steady
			second = f.add("pending", cellTags(testCluster, "cell-2"))
			f.setLaunched(second, clock.Now())
		}},
		// Launched just now, and boots take 21 s: the next look is at
		// 21 s less a boot poll and EC2's one-second rounding, then
		// every boot poll.
		{19*time.Second + time.Second/2, func() {}},
		{time.Second / 2, func() { f.setState(second, "shutting-down", "") }},
		{time.Minute, nil},
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	n := 0
	p.Sleep = func(ctx context.Context, d time.Duration) error {
		if n >= len(steps) {
			t.Fatalf("more polls than steps")
		}
		if d != steps[n].want {
			t.Errorf("sleep %d = %v, want %v", n, d, steps[n].want)
		}
		clock.Advance(d)
		if steps[n].then == nil {
			cancel()
		} else {
			steps[n].then()
		}
		n++
		return ctx.Err()
	}
	if err := p.WatchEvents(ctx, &pluginapi.WatchEventsRequest{}, func(*pluginapi.Event) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Errorf("WatchEvents = %v", err)
	}
	if n != len(steps) {
		t.Errorf("%d polls, want %d", n, len(steps))
	}
}
