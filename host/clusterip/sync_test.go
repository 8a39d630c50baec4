package clusterip

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	cellapi "github.com/kipcell/kip/cell/api"
)

// agent is a scripted Applier: each call is recorded and answered by the
// next of errs (nil: accept, answering the request's table and revision),
// then accepted. A call can be held until the test releases it.
type agent struct {
	mu    sync.Mutex
	calls []*cellapi.ServicesUpdate
	errs  []error
	// hold, when set, blocks each call until a value is received.
	hold chan struct{}
	// seen gets every request as the call begins.
	seen chan *cellapi.ServicesUpdate
}

func newAgent(errs ...error) *agent {
	return &agent{errs: errs, seen: make(chan *cellapi.ServicesUpdate, 100)}
}

func (a *agent) ApplyServices(ctx context.Context, req *cellapi.ServicesUpdate) (cellapi.ServicesApplied, error) {
	a.seen <- req
	if a.hold != nil {
		select {
		case <-a.hold:
		case <-ctx.Done():
			return cellapi.ServicesApplied{}, ctx.Err()
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.calls = append(a.calls, req)
	if len(a.errs) > 0 {
		err := a.errs[0]
		a.errs = a.errs[1:]
		if err != nil {
			return cellapi.ServicesApplied{}, err
		}
	}
	return cellapi.ServicesApplied{Table: req.Table, Revision: req.Revision}, nil
}

// next waits for the next call.
func (a *agent) next(t *testing.T) *cellapi.ServicesUpdate {
	t.Helper()
	select {
	case req := <-a.seen:
		return req
	case <-time.After(5 * time.Second):
		t.Fatal("no ApplyServices call")
		return nil
	}
}

// shape is what a test checks of a request.
type shape struct {
	Rev, Base uint64
	Services  []string
	Removed   []string
}

func shapeOf(req *cellapi.ServicesUpdate) shape {
	return shape{Rev: req.Revision, Base: req.BaseRevision, Services: keys(req), Removed: req.Removed}
}

func svcEntry(name string, ip string) *cellapi.Service {
	return &cellapi.Service{Namespace: "default", Name: name, ClusterIPs: []string{ip}}
}

func opts() SyncOptions {
	return SyncOptions{Backoff: func(int) time.Duration { return time.Millisecond }}
}

// startSync runs Sync until the test ends and returns a channel closed
// when it returns.
func startSync(t *testing.T, tab *Table, a Applier, o SyncOptions) <-chan struct{} {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); tab.Sync(ctx, a, o) }()
	t.Cleanup(func() { cancel(); <-done })
	return done
}

func TestSyncSendsTheTableThenDeltas(t *testing.T) {
	tab := bare()
	tab.set("default/a", svcEntry("a", "10.0.0.1"))
	tab.set("default/b", svcEntry("b", "10.0.0.2"))
	a := newAgent()
	acked := make(chan uint64, 10)
	o := opts()
	o.Acked = func(rev uint64) { acked <- rev }
	startSync(t, tab, a, o)

	if diff := cmp.Diff(shape{Rev: 2, Services: []string{"default/a", "default/b"}}, shapeOf(a.next(t))); diff != "" {
		t.Errorf("first call (-want +got):\n%s", diff)
	}
	if got := <-acked; got != 2 {
		t.Errorf("acked %d, want 2", got)
	}
	tab.set("default/a", svcEntry("a", "10.0.0.9"))
	if diff := cmp.Diff(shape{Rev: 3, Base: 2, Services: []string{"default/a"}}, shapeOf(a.next(t))); diff != "" {
		t.Errorf("after a change (-want +got):\n%s", diff)
	}
	tab.set("default/b", nil)
	if diff := cmp.Diff(shape{Rev: 4, Base: 3, Removed: []string{"default/b"}}, shapeOf(a.next(t))); diff != "" {
		t.Errorf("after a removal (-want +got):\n%s", diff)
	}
}

func TestSyncCoalescesChangesDuringACall(t *testing.T) {
	tab := bare()
	tab.set("default/a", svcEntry("a", "10.0.0.1"))
	a := newAgent()
	a.hold = make(chan struct{})
	startSync(t, tab, a, opts())
	a.next(t) // the whole table, held
	tab.set("default/b", svcEntry("b", "10.0.0.2"))
	tab.set("default/c", svcEntry("c", "10.0.0.3"))
	tab.set("default/b", svcEntry("b", "10.0.0.4"))
	a.hold <- struct{}{}
	if diff := cmp.Diff(shape{Rev: 4, Base: 1, Services: []string{"default/b", "default/c"}}, shapeOf(a.next(t))); diff != "" {
		t.Errorf("the call after three changes (-want +got):\n%s", diff)
	}
	a.hold <- struct{}{}
}

func TestSyncAnswersARefusedDeltaWithTheWholeTable(t *testing.T) {
	tab := bare()
	tab.set("default/a", svcEntry("a", "10.0.0.1"))
	a := newAgent(nil, status.Error(codes.FailedPrecondition, "the delta's base is not the table this cell has"))
	startSync(t, tab, a, opts())
	a.next(t)
	tab.set("default/b", svcEntry("b", "10.0.0.2"))
	if got := shapeOf(a.next(t)); got.Base != 1 {
		t.Fatalf("second call %+v, want a delta from 1", got)
	}
	if diff := cmp.Diff(shape{Rev: 2, Services: []string{"default/a", "default/b"}}, shapeOf(a.next(t))); diff != "" {
		t.Errorf("after the refusal (-want +got):\n%s", diff)
	}
}

func TestSyncRetriesAFailedProgramWithTheSameDelta(t *testing.T) {
	tab := bare()
	tab.set("default/a", svcEntry("a", "10.0.0.1"))
	a := newAgent(nil, status.Error(codes.Internal, "iptables-restore: exit status 1"))
	startSync(t, tab, a, opts())
	a.next(t)
	tab.set("default/a", nil)
	want := shape{Rev: 2, Base: 1, Removed: []string{"default/a"}}
	for i := range 2 {
		if diff := cmp.Diff(want, shapeOf(a.next(t))); diff != "" {
			t.Errorf("call %d after the change (-want +got):\n%s", i+2, diff)
		}
	}
}

func TestSyncStopsForACellThatProgramsNoServices(t *testing.T) {
	tab := bare()
	a := newAgent(status.Error(codes.Unimplemented, "the cell agent runs with --service-proxy=none"))
	reached := make(chan struct{})
	o := opts()
	o.Reached = reached
	done := startSync(t, tab, a, o)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Sync goes on for a cell that programs no services")
	}
	select {
	case <-reached:
	default:
		t.Error("Reached is still open")
	}
}

func TestSyncReachesOnlyOnceTheAgentAnswers(t *testing.T) {
	tab := bare()
	down := status.Error(codes.Unavailable, "connection refused")
	a := newAgent(down, down)
	reached := make(chan struct{})
	o := opts()
	o.Reached = reached
	var first []int
	var mu sync.Mutex
	o.Backoff = func(int) time.Duration {
		t.Error("the generic back-off before the agent answered")
		return time.Millisecond
	}
	o.FirstBackoff = func(n int) time.Duration {
		mu.Lock()
		first = append(first, n)
		mu.Unlock()
		return time.Millisecond
	}
	startSync(t, tab, a, o)
	for range 2 {
		a.next(t)
		select {
		case <-reached:
			t.Fatal("Reached before the agent answered")
		default:
		}
	}
	a.next(t)
	select {
	case <-reached:
	case <-time.After(5 * time.Second):
		t.Fatal("Reached still open after the agent answered")
	}
	mu.Lock()
	defer mu.Unlock()
	if !cmp.Equal(first, []int{1, 2}) {
		t.Errorf("first-contact back-offs %v, want [1 2]", first)
	}
}
