package server

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kipcell/kip/cell/api"
	"github.com/kipcell/kip/cell/imds"
)

// fakeMetadata is a MetadataSource whose answers a test sets.
type fakeMetadata struct {
	mu        sync.Mutex
	action    *imds.InstanceAction
	rebalance *imds.Rebalance
	err       error
	reads     int
	read      chan struct{} // gets a value after every read, while it has room
}

func newFakeMetadata() *fakeMetadata { return &fakeMetadata{read: make(chan struct{}, 100)} }

func (f *fakeMetadata) InstanceAction(context.Context) (*imds.InstanceAction, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	select {
	case f.read <- struct{}{}:
	default:
	}
	return f.action, f.err
}

func (f *fakeMetadata) RebalanceRecommendation(context.Context) (*imds.Rebalance, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.rebalance, f.err
}

func (f *fakeMetadata) set(fn func(f *fakeMetadata)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

type noticeView struct {
	Kind, Action string
	Time         time.Time
}

func view(ns []api.InstanceNotice) []noticeView {
	var out []noticeView
	for _, n := range ns {
		out = append(out, noticeView{n.Kind, n.Action, n.Time})
	}
	return out
}

// waitNotices reads updates until one carries want.
func waitNotices(t *testing.T, w *watchStream, want []noticeView) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	var last []noticeView
	for {
		select {
		case u := <-w.got:
			last = view(u.Notices)
			if cmp.Diff(want, last) == "" {
				return
			}
		case <-deadline:
			t.Fatalf("no update with notices %v; last %v", want, last)
		}
	}
}

func TestWatchStatusCarriesNotices(t *testing.T) {
	s, _ := newTestServer(t)
	notices := NewNotices()
	s.cfg.Notices = notices
	applyTestPod(t, s, "app")
	src := newFakeMetadata()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go WatchInstanceMetadata(ctx, src, 10*time.Millisecond, notices, slog.New(slog.DiscardHandler))
	w := newWatchStream()
	go func() { _ = s.WatchStatus(ctx, w.Send) }()

	at := time.Date(2026, 11, 24, 20, 2, 0, 0, time.UTC)
	src.set(func(f *fakeMetadata) { f.action = &imds.InstanceAction{Action: "terminate", Time: at} })
	waitNotices(t, w, []noticeView{{api.NoticeInterruption, "terminate", at}})

	src.set(func(f *fakeMetadata) { f.rebalance = &imds.Rebalance{NoticeTime: at.Add(-time.Minute)} })
	waitNotices(t, w, []noticeView{{api.NoticeInterruption, "terminate", at}, {api.NoticeRebalance, "", at.Add(-time.Minute)}})

	// A new subscription gets the notices in force in its first update.
	w2 := newWatchStream()
	go func() { _ = s.WatchStatus(ctx, w2.Send) }()
	select {
	case u := <-w2.got:
		if diff := cmp.Diff([]noticeView{{api.NoticeInterruption, "terminate", at}, {api.NoticeRebalance, "", at.Add(-time.Minute)}}, view(u.Notices)); diff != "" {
			t.Errorf("first update of a new subscription (-want +got):\n%s", diff)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no first update")
	}

	// Withdrawn notices go.
	src.set(func(f *fakeMetadata) { f.action, f.rebalance = nil, nil })
	waitNotices(t, w, nil)
}

// A cell without instance metadata (not on EC2) stops asking.
func TestWatchInstanceMetadataGivesUpWithoutIMDS(t *testing.T) {
	src := newFakeMetadata()
	src.err = errors.New("dial unix: no such file")
	done := make(chan struct{})
	go func() {
		WatchInstanceMetadata(t.Context(), src, time.Millisecond, NewNotices(), slog.New(slog.DiscardHandler))
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the watcher did not give up")
	}
	if src.reads != noIMDSAttempts {
		t.Errorf("%d reads, want %d", src.reads, noIMDSAttempts)
	}
}

// Once the metadata answered, failures do not end the watch.
func TestWatchInstanceMetadataKeepsOnAfterAnAnswer(t *testing.T) {
	src := newFakeMetadata()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		WatchInstanceMetadata(ctx, src, time.Millisecond, NewNotices(), slog.New(slog.DiscardHandler))
		close(done)
	}()
	<-src.read
	src.set(func(f *fakeMetadata) { f.err = errors.New("HTTP 500") })
	for len(src.read) > 0 { // what was read before the failures began
		<-src.read
	}
	for range 2 * noIMDSAttempts {
		<-src.read
	}
	select {
	case <-done:
		t.Fatal("the watcher gave up after the metadata had answered")
	default:
	}
	cancel()
	<-done
}
