package cells

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kipcell/kip/pluginapi"
	pluginfake "github.com/kipcell/kip/pluginapi/fake"
)

// gatedLister answers each List once the test releases it, with the
// number of the List as the instances' cell ID.
type gatedLister struct {
	mu      sync.Mutex
	calls   int
	release chan struct{}
	started chan struct{}
	err     error
}

func (g *gatedLister) List(ctx context.Context, _ *pluginapi.ListRequest) (*pluginapi.ListResponse, error) {
	g.mu.Lock()
	g.calls++
	n := g.calls
	g.mu.Unlock()
	g.started <- struct{}{}
	select {
	case <-g.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if g.err != nil {
		return nil, g.err
	}
	return &pluginapi.ListResponse{Instances: []pluginapi.Instance{{CellID: fmt.Sprint(n)}}}, nil
}

// Callers that come while a List is under way share the next one, never
// the one under way (it may predate a Launch they saw answered); the
// first caller gets the first.
func TestSharedListWaitsForAFreshList(t *testing.T) {
	g := &gatedLister{release: make(chan struct{}), started: make(chan struct{}, 10)}
	var s sharedList
	type answer struct {
		list string
		err  error
	}
	call := func() chan answer {
		out := make(chan answer, 1)
		go func() {
			resp, err := s.list(t.Context(), g)
			if err != nil {
				out <- answer{err: err}
				return
			}
			out <- answer{list: resp.Instances[0].CellID}
		}()
		return out
	}
	first := call()
	<-g.started // List 1 under way
	var later []chan answer
	for range 20 {
		later = append(later, call())
	}
	time.Sleep(20 * time.Millisecond) // let them queue (not an assertion)
	g.release <- struct{}{}           // List 1 answers
	if a := <-first; a.list != "1" || a.err != nil {
		t.Errorf("first caller = %+v, want List 1", a)
	}
	<-g.started // List 2, for the 20
	g.release <- struct{}{}
	for i, ch := range later {
		if a := <-ch; a.list != "2" || a.err != nil {
			t.Errorf("caller %d = %+v, want List 2", i, a)
		}
	}
	g.mu.Lock()
	calls := g.calls
	g.mu.Unlock()
	if calls != 2 {
		t.Errorf("%d Lists for 21 callers, want 2", calls)
	}
	// Idle again: the next caller starts its own List at once.
	next := call()
	<-g.started
	close(g.release)
	if a := <-next; a.list != "3" {
		t.Errorf("a caller after the rounds = %+v, want List 3", a)
	}
}

// A failed List fails the callers it answers; a caller whose context
// ends stops waiting, and the List goes on for the others.
func TestSharedListErrors(t *testing.T) {
	boom := errors.New("boom")
	g := &gatedLister{release: make(chan struct{}), started: make(chan struct{}, 10), err: boom}
	var s sharedList
	ctx, cancel := context.WithCancel(t.Context())
	gone := make(chan error, 1)
	go func() {
		_, err := s.list(ctx, g)
		gone <- err
	}()
	<-g.started
	cancel()
	if err := <-gone; !errors.Is(err, context.Canceled) {
		t.Errorf("a cancelled caller = %v, want context.Canceled", err)
	}
	other := make(chan error, 1)
	go func() {
		_, err := s.list(t.Context(), g)
		other <- err
	}()
	time.Sleep(10 * time.Millisecond) // queued behind the List under way (not an assertion)
	close(g.release)
	if err := <-other; !errors.Is(err, boom) {
		t.Errorf("a caller of a failed List = %v, want its error", err)
	}
}

// Terminating a pod's cell looks for instances of the pod's other launches
// (a List) only when one may exist: a cell whose Launch answered at once,
// on the pod's first cell ID, has none, and costs no List; one whose
// Launch failed once (the answer may have been lost) does, and a stray
// instance of the pod found there is terminated.
func TestTerminateListsOnlyAfterAnUnansweredLaunch(t *testing.T) {
	tests := []struct {
		name       string
		failLaunch bool
		wantList   bool
	}{
		{name: "launch answered", failLaunch: false, wantList: false},
		{name: "a launch failed first", failLaunch: true, wantList: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarnessSetup(t, setup{config: func(c *Config) { c.GCInterval = time.Hour }})
			h.start(t)
			if tt.failLaunch {
				h.plugin.FailNext("Launch", pluginapi.NewTransient("connection reset"))
			}
			id := h.runningPod(t, "web", "uid-web")
			// An instance of the pod under another cell ID, as a lost
			// answer of an earlier attempt would leave.
			other := pluginfake.New(pluginfake.WithStore(h.plugin.Store()))
			if _, err := other.Configure(t.Context(), &pluginapi.ConfigureRequest{ClusterID: "test"}); err != nil {
				t.Fatal(err)
			}
			stray, err := other.Launch(t.Context(), &pluginapi.LaunchRequest{CellID: cellIDAttempt("uid-web", 1), NodeName: "kip",
				PodUID: "uid-web", InstanceType: "fake.small", CapacityType: pluginapi.CapacityOnDemand})
			if err != nil {
				t.Fatal(err)
			}
			lists := h.plugin.Calls("List")
			pod, err := h.m.GetPod(t.Context(), "default", "web")
			if err != nil {
				t.Fatal(err)
			}
			if err := h.m.DeletePod(t.Context(), pod); err != nil {
				t.Fatal(err)
			}
			eventually(t, "pod forgotten", func() bool {
				_, err := h.m.GetPod(t.Context(), "default", "web")
				return err != nil
			})
			if listed := h.plugin.Calls("List") > lists; listed != tt.wantList {
				t.Errorf("terminating listed = %v, want %v", listed, tt.wantList)
			}
			var left []string
			for _, inst := range h.plugin.Store().Instances() {
				if inst.State != pluginapi.StateTerminated {
					left = append(left, inst.ID)
				}
			}
			want := []string{stray.Instance.ID} // no List: the stray is the collector's
			if tt.wantList {
				want = nil
			}
			if strings.Join(left, ",") != strings.Join(want, ",") || slices.Contains(left, id) {
				t.Errorf("instances left = %v, want %v", left, want)
			}
		})
	}
}

// gatedDescriber answers each Describe once released, with the instances
// it knows among the IDs asked, and records the IDs of each call.
type gatedDescriber struct {
	mu      sync.Mutex
	asked   [][]string
	known   map[string]bool
	release chan struct{}
	started chan struct{}
}

func (g *gatedDescriber) Describe(_ context.Context, req *pluginapi.DescribeRequest) (*pluginapi.DescribeResponse, error) {
	g.mu.Lock()
	g.asked = append(g.asked, slices.Sorted(slices.Values(req.IDs)))
	g.mu.Unlock()
	g.started <- struct{}{}
	<-g.release
	resp := &pluginapi.DescribeResponse{}
	for _, id := range req.IDs {
		if g.known[id] {
			resp.Instances = append(resp.Instances, pluginapi.Instance{ID: id, State: pluginapi.StateRunning})
		}
	}
	return resp, nil
}

// Cells that look while a Describe is under way share the next one, of
// all their IDs (each once); each gets its own instance, or nil for one
// the plugin does not know.
func TestSharedDescribeBatchesTheIDs(t *testing.T) {
	g := &gatedDescriber{known: map[string]bool{"i-0": true, "i-1": true, "i-2": true}, release: make(chan struct{}), started: make(chan struct{}, 10)}
	var d sharedDescribe
	type answer struct {
		id   string
		inst *pluginapi.Instance
		err  error
	}
	answers := make(chan answer, 10)
	call := func(id string) {
		go func() {
			inst, err := d.describe(t.Context(), g, id)
			answers <- answer{id, inst, err}
		}()
	}
	call("i-0")
	<-g.started
	for _, id := range []string{"i-1", "i-2", "i-1", "i-gone"} {
		call(id)
	}
	time.Sleep(20 * time.Millisecond) // let them queue (not an assertion)
	close(g.release)
	for range 5 {
		a := <-answers
		switch {
		case a.err != nil:
			t.Errorf("describe(%s) = %v", a.id, a.err)
		case a.id == "i-gone" && a.inst != nil:
			t.Errorf("describe(i-gone) = %+v, want nil", a.inst)
		case a.id != "i-gone" && (a.inst == nil || a.inst.ID != a.id):
			t.Errorf("describe(%s) = %+v, want its instance", a.id, a.inst)
		}
	}
	want := [][]string{{"i-0"}, {"i-1", "i-2", "i-gone"}}
	g.mu.Lock()
	defer g.mu.Unlock()
	if fmt.Sprint(g.asked) != fmt.Sprint(want) {
		t.Errorf("Describes = %v, want %v", g.asked, want)
	}
}
