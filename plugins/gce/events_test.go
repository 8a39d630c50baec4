package gce

import (
	"context"
	"testing"
	"time"

	"github.com/kipcell/kip/pluginapi"
	"github.com/kipcell/kip/pluginapi/kit"
	"github.com/kipcell/kip/pluginapi/snapshot"
)

// watch runs WatchEvents on p until the test ends and returns its events.
func watch(t *testing.T, p *provider) <-chan *pluginapi.Event {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	events := make(chan *pluginapi.Event, 100)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = p.WatchEvents(ctx, &pluginapi.WatchEventsRequest{}, func(e *pluginapi.Event) error {
			select {
			case events <- e:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
	}()
	t.Cleanup(func() { cancel(); <-done })
	return events
}

// waitEvent returns the first event that matches, failing after a while.
func waitEvent(t *testing.T, events <-chan *pluginapi.Event, what string, match func(*pluginapi.Event) bool) *pluginapi.Event {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case e := <-events:
			if match(e) {
				return e
			}
		case <-deadline:
			t.Fatalf("no %s event", what)
		}
	}
}

// A Spot instance Compute Engine stops or deletes without the plugin
// asking is an interruption; one the plugin deleted is not; announced
// host maintenance is a maintenance event with the window's start as the
// deadline, once.
func TestWatchEvents(t *testing.T) {
	f := newFakeCompute(t)
	ctx := t.Context()
	p := configured(t, testConfig(f), func(p *provider) { p.SnapshotAge = time.Millisecond })
	spot := func(cell string) string {
		req := launchRequest(cell)
		req.CapacityType = pluginapi.CapacitySpot
		resp, err := p.Launch(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Instance.ID
	}
	preempted, deleted, gone := spot("kip-preempted"), spot("kip-deleted"), spot("kip-gone")
	onDemand, err := p.Launch(ctx, launchRequest("kip-maint"))
	if err != nil {
		t.Fatal(err)
	}
	// The watcher's first poll is its baseline: wait until it has listed
	// the instances before changing them.
	before := f.callCount("instances.aggregatedList")
	events := watch(t, p)
	for deadline := time.Now().Add(10 * time.Second); f.callCount("instances.aggregatedList") == before; {
		if time.Now().After(deadline) {
			t.Fatal("WatchEvents never polled")
		}
		time.Sleep(time.Millisecond)
	}

	if _, err := p.Terminate(ctx, &pluginapi.TerminateRequest{ID: deleted}); err != nil {
		t.Fatal(err)
	}
	f.set(preempted, func(in *fakeInstance) { in.status = "STOPPING" })
	f.mu.Lock()
	delete(f.instances, gone)
	f.mu.Unlock()
	start := "2026-12-01T03:00:00Z"
	f.set(onDemand.Instance.ID, func(in *fakeInstance) {
		in.body["resourceStatus"] = map[string]any{"upcomingMaintenance": map[string]any{
			"type": "SCHEDULED", "maintenanceStatus": "PENDING", "windowStartTime": start, "windowEndTime": "2026-12-01T04:00:00Z", "canReschedule": true}}
	})

	got := map[string]bool{}
	for len(got) < 3 {
		e := waitEvent(t, events, "interruption or maintenance", func(e *pluginapi.Event) bool {
			return e.Type == pluginapi.EventInterruption || e.Type == pluginapi.EventMaintenance
		})
		key := string(e.Type) + " " + e.InstanceID
		if got[key] {
			t.Errorf("%s sent twice", key)
		}
		got[key] = true
		if e.InstanceID == deleted {
			t.Errorf("the plugin's own deletion is an interruption: %+v", e)
		}
		if e.Type == pluginapi.EventMaintenance && (e.InstanceID != onDemand.Instance.ID || e.Deadline.Format(time.RFC3339) != start) {
			t.Errorf("maintenance event %+v", e)
		}
	}
	for _, want := range []string{"interruption " + preempted, "interruption " + gone, "maintenance " + onDemand.Instance.ID} {
		if !got[want] {
			t.Errorf("no %s event (got %v)", want, got)
		}
	}
}

// While an instance boots, the watcher polls every pollFast until it has
// seen one boot, then sleeps until shortly before a boot as quick as the
// quickest it saw may have ended, then polls every pollBoot; while an
// instance it did not delete is terminating it polls every pollFast, and
// pollSlow when nothing changes.
func TestWatcherPollsBootsWhenTheyMayBeRunning(t *testing.T) {
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	p := &provider{Base: &kit.Base{Now: func() time.Time { return now }, PollFast: time.Second, PollSlow: time.Minute, PollBoot: time.Second / 2}}
	cfg := &config{deleting: snapshot.NewDeletions(p.Now)}
	w := newWatcher(p, cfg, func(*pluginapi.Event) error { return nil })
	inst := func(state pluginapi.InstanceState, launched time.Time) map[string]gceInstance {
		return map[string]gceInstance{"us-central1-a/kip-1": {Instance: pluginapi.Instance{
			ID: "us-central1-a/kip-1", CellID: "kip-1", State: state, LaunchedAt: launched}}}
	}
	launched := now
	if got := w.next(inst(pluginapi.StatePending, launched)); got != time.Second {
		t.Errorf("no boot seen: next = %v, want pollFast", got)
	}
	// The first boot, seen 21 s after its launch.
	if err := w.changes.Diff(inst(pluginapi.StatePending, launched)); err != nil {
		t.Fatal(err)
	}
	if err := w.changes.Diff(inst(pluginapi.StatePending, launched)); err != nil {
		t.Fatal(err)
	}
	now = now.Add(21 * time.Second)
	if err := w.changes.Diff(inst(pluginapi.StateRunning, launched)); err != nil {
		t.Fatal(err)
	}
	if d, ok := p.Boots.Quickest(); !ok || d != 21*time.Second {
		t.Fatalf("boot recorded = %v, %v; want 21s", d, ok)
	}
	for _, tt := range []struct {
		name string
		snap map[string]gceInstance
		want time.Duration
	}{
		{"running", inst(pluginapi.StateRunning, launched), time.Minute},
		// Launched now: the next look is at 21 s less a boot poll and a
		// second, then every boot poll.
		{"a new boot", inst(pluginapi.StatePending, now), 19*time.Second + time.Second/2},
		{"the boot may have ended", inst(pluginapi.StatePending, now.Add(-20*time.Second)), time.Second / 2},
		{"terminating", inst(pluginapi.StateTerminating, launched), time.Second},
	} {
		if got := w.next(tt.snap); got != tt.want {
			t.Errorf("%s: next = %v, want %v", tt.name, got, tt.want)
		}
	}
	// An instance the plugin deletes itself is no preemption to watch for.
	cfg.deleting.Add("us-central1-a/kip-1")
	if got := w.next(inst(pluginapi.StateTerminating, launched)); got != time.Minute {
		t.Errorf("terminating, deleted by the plugin: next = %v, want pollSlow", got)
	}
}

// A Launch wakes a watcher in its slow sleep (no instance booting): the
// new instance is reported long before pollSlow, as the aws plugin's
// watcher does (snapshot.View.Poll); before, it waited out the sleep.
func TestWatchEventsWakesOnLaunch(t *testing.T) {
	f := newFakeCompute(t)
	p := configured(t, testConfig(f), func(p *provider) {
		p.PollFast, p.PollSlow, p.SnapshotAge = 10*time.Millisecond, time.Hour, 10*time.Millisecond
	})
	before := f.callCount("instances.aggregatedList")
	events := watch(t, p)
	for f.callCount("instances.aggregatedList") == before { // the first poll; then an hour's sleep
		time.Sleep(time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond) // into the sleep (not an assertion)
	start := time.Now()
	resp, err := p.Launch(t.Context(), launchRequest("kip-woken"))
	if err != nil {
		t.Fatal(err)
	}
	waitEvent(t, events, "the new instance", func(e *pluginapi.Event) bool {
		return e.Type == pluginapi.EventStateChange && e.InstanceID == resp.Instance.ID
	})
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("the new instance reported %v after its launch, want well within pollSlow", took)
	}
}
