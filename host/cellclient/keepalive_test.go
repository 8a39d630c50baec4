package cellclient

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"

	cellapi "github.com/kipcell/kip/cell/api"
)

// quietAgent sends one status per watch and then stays silent, as an
// agent whose pod does not change; it counts applies.
type quietAgent struct {
	cellapi.UnimplementedCell
	applies atomic.Int32
}

func (q *quietAgent) WatchStatus(ctx context.Context, send func(*cellapi.StatusUpdate) error) error {
	data, _ := json.Marshal(corev1.PodStatus{Phase: corev1.PodRunning})
	if err := send(&cellapi.StatusUpdate{StatusJSON: data, Generation: 1}); err != nil {
		return err
	}
	<-ctx.Done()
	return nil
}

func (q *quietAgent) ApplyPod(_ context.Context, req *cellapi.PodRequest) (int64, error) {
	q.applies.Add(1)
	return req.Generation, nil
}

// proxy forwards TCP connections to a backend. Blackholed, it drops what
// either side sends without closing anything (packets dropped on the way,
// no reset); with resetNext the next connection to carry client bytes is
// reset instead of forwarding them (a connection the client still trusts
// that the peer has forgotten).
type proxy struct {
	lis       net.Listener
	backend   string
	blackhole atomic.Bool
	resetNext atomic.Bool
	mu        sync.Mutex
	conns     []net.Conn
}

func startProxy(t *testing.T, backend string) *proxy {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{lis: lis, backend: backend}
	t.Cleanup(func() {
		_ = lis.Close()
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, c := range p.conns {
			_ = c.Close()
		}
	})
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			b, err := net.Dial("tcp", backend)
			if err != nil {
				_ = c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, b)
			p.mu.Unlock()
			go p.pipe(c, b, true)
			go p.pipe(b, c, false)
		}
	}()
	return p
}

func (p *proxy) pipe(from, to net.Conn, fromClient bool) {
	buf := make([]byte, 32<<10)
	for {
		n, err := from.Read(buf)
		if err != nil {
			return
		}
		if fromClient && p.resetNext.CompareAndSwap(true, false) {
			for _, c := range []net.Conn{from, to} {
				if tc, ok := c.(*net.TCPConn); ok {
					_ = tc.SetLinger(0) // close sends RST
				}
				_ = c.Close()
			}
			return
		}
		if p.blackhole.Load() {
			continue
		}
		if _, err := to.Write(buf[:n]); err != nil {
			return
		}
	}
}

// testKeepalive is the keep-alive of the tests' agent connections: that
// of Dial (DefaultKeepalive, 45 s to notice a silent agent) scaled down to
// the least Time gRPC allows (10 s), so that a test sees the mechanism
// sooner, as test/e2e's TestSilentCellIsNoticed does through kip's
// cells.agentKeepalive.
var testKeepalive = Keepalive{Time: 10 * time.Second, Timeout: 2 * time.Second}

func startQuietAgent(t *testing.T) (*quietAgent, *proxy, *Agent) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: testKeepalive.Time, PermitWithoutStream: true}))
	qa := &quietAgent{}
	cellapi.RegisterCell(srv, qa)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	p := startProxy(t, lis.Addr().String())
	a, err := dial("c-1", p.lis.Addr().String(), insecure.NewCredentials(), testKeepalive)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close() })
	return qa, p, a
}

// TestSilentAgentIsNoticed: when a cell's packets are dropped silently,
// the host's keep-alive pings go unanswered and the status stream ends
// with Unavailable within the keep-alive's Time+Timeout (the deadline is
// the behaviour under test), and a new watch works once the cell answers
// again.
func TestSilentAgentIsNoticed(t *testing.T) {
	_, p, a := startQuietAgent(t)
	watch := func() (<-chan error, <-chan struct{}) {
		errc, first := make(chan error, 1), make(chan struct{})
		var once sync.Once
		go func() {
			errc <- a.WatchStatus(t.Context(), func(*corev1.PodStatus, int64, []cellapi.PodEvent, []cellapi.InstanceNotice) {
				once.Do(func() { close(first) })
			})
		}()
		return errc, first
	}
	errc, first := watch()
	select {
	case <-first:
	case err := <-errc:
		t.Fatalf("watch ended before its first status: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("no first status")
	}
	p.blackhole.Store(true)
	dropped := time.Now()
	bound := testKeepalive.Time + testKeepalive.Timeout + 5*time.Second
	select {
	case err := <-errc:
		if status.Code(errors.Unwrap(err)) != codes.Unavailable && status.Code(err) != codes.Unavailable {
			t.Errorf("watch ended with %v, want Unavailable", err)
		}
		t.Logf("silent agent noticed after %v", time.Since(dropped).Round(time.Second))
	case <-time.After(bound):
		t.Fatalf("a silent agent's status stream was still trusted after %v", bound)
	}
	p.blackhole.Store(false)
	errc, first = watch()
	select {
	case <-first:
	case err := <-errc:
		t.Fatalf("re-subscribing failed: %v", err)
	case <-time.After(15 * time.Second):
		t.Fatal("no status after re-subscribing")
	}
}

// TestStaleConnectionRetriedOnce: a call on a connection the agent has
// reset is tried once more on a new connection and succeeds, and the agent
// sees it once.
func TestStaleConnectionRetriedOnce(t *testing.T) {
	qa, p, a := startQuietAgent(t)
	if _, err := a.Apply(t.Context(), &cellapi.PodRequest{Generation: 1}); err != nil {
		t.Fatal(err)
	}
	p.resetNext.Store(true)
	gen, err := a.Apply(t.Context(), &cellapi.PodRequest{Generation: 2})
	if err != nil || gen != 2 {
		t.Fatalf("Apply on a reset connection = %d, %v; want it retried on a new one", gen, err)
	}
	if n := qa.applies.Load(); n != 2 {
		t.Errorf("the agent saw %d applies, want 2", n)
	}
}
