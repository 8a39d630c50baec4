package cells

import (
	"context"
	"crypto/x509"
	"log/slog"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/test/bufconn"
	"k8s.io/client-go/tools/record"

	cellapi "github.com/kipcell/kip/cell/api"
	"github.com/kipcell/kip/pluginapi"
	"github.com/kipcell/kip/test/fakeclock"
)

// A cell outliving its certificates on a real agent (renewed while kip
// runs, renewed or reported expired after kip was away) is tested in
// test/lightcell, which may import the agent (host/ does not).

func TestRenewAt(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	end := start.Add(30 * 24 * time.Hour)
	for _, tt := range []struct {
		jitter float64
		want   time.Duration // after start
	}{
		{0, 20 * 24 * time.Hour},
		{1, 15 * 24 * time.Hour},
		{0.5, 17*24*time.Hour + 12*time.Hour},
		{-1, 20 * 24 * time.Hour},
		{2, 15 * 24 * time.Hour},
	} {
		if got := renewAt(start, end, tt.jitter); !got.Equal(start.Add(tt.want)) {
			t.Errorf("renewAt(jitter %v) = %s after the start, want %s", tt.jitter, got.Sub(start), tt.want)
		}
	}
}

// TestRenewLoopReportsAnOlderAgent: a cell whose agent cannot renew its
// certificate is reported once, with when it expires, and not asked again
// until it serves another certificate.
func TestRenewLoopReportsAnOlderAgent(t *testing.T) {
	lis := bufconn.Listen(1 << 16)
	srv := grpc.NewServer()
	cellapi.RegisterJoin(srv, cellapi.UnimplementedJoin{}) // an agent older than the renewal
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	agent, err := dialAgent("c-1", lis)
	if err != nil {
		t.Fatal(err)
	}
	defer agent.Close()

	clock := fakeclock.New(time.Now())
	recorder := record.NewFakeRecorder(100)
	d := &cellDeps{cfg: Config{Now: clock.Now, RenewalCheck: time.Millisecond, Backoff: func(int) time.Duration { return time.Millisecond }},
		identity: fakeIdentity{}, recorder: recorder, log: slog.New(slog.DiscardHandler)}
	c := newCell(d, newPod("db", "uid-db"), nil)
	c.setCertificate(&x509.Certificate{NotBefore: clock.Now().Add(-25 * 24 * time.Hour), NotAfter: clock.Now().Add(5 * 24 * time.Hour)})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.renewLoop(ctx, agent, &pluginapi.Instance{ID: "i-1"})
	}()
	select {
	case e := <-recorder.Events:
		if !strings.Contains(e, ReasonCertificateNotRenewed) || !strings.Contains(e, "older kip-cell") {
			t.Errorf("event %q, want %s for an older agent", e, ReasonCertificateNotRenewed)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no event")
	}
	c.setCertificate(c.cert) // a reconnection to the same agent
	time.Sleep(50 * time.Millisecond)
	cancel()
	<-done
	if n := len(recorder.Events); n != 0 {
		t.Errorf("%d more events, want the older agent reported once", n)
	}
}
