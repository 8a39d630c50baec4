package cells

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/node/api"
	"google.golang.org/grpc"
	"google.golang.org/grpc/test/bufconn"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/fake"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	cellagent "github.com/kipcell/kip/cell"
	cellapi "github.com/kipcell/kip/cell/api"
	"github.com/kipcell/kip/cell/api/cellv1"
	"github.com/kipcell/kip/cell/runtime/fakeruntime"
	"github.com/kipcell/kip/host/cellclient"
	"github.com/kipcell/kip/host/match"
	"github.com/kipcell/kip/host/pki"
	"github.com/kipcell/kip/host/podrefs"
	"github.com/kipcell/kip/pluginapi"
	pluginfake "github.com/kipcell/kip/pluginapi/fake"
	"github.com/kipcell/kip/test/fakeclock"
	"github.com/kipcell/kip/test/lightcell"
	"github.com/kipcell/kip/test/syncbuf"
)

// lightCloud is the fake plugin with a real agent behind each instance:
// a light cell (test/lightcell: cell.Run over the fake runtime) started
// in this process on a loopback address of its own, with the bootstrap
// of its launch, reading the test's clock.
type lightCloud struct {
	*pluginfake.Provider
	t     *testing.T
	clock func() time.Time
	mu    sync.Mutex
	cells map[string]*lightInstance // by cell ID
}

type lightInstance struct {
	addr     string // where its agent listens (port cellapi.Port)
	stateDir string
	light    *lightcell.Cell
}

func (lc *lightCloud) Launch(ctx context.Context, req *pluginapi.LaunchRequest) (*pluginapi.LaunchResponse, error) {
	resp, err := lc.Provider.Launch(ctx, req)
	if err != nil {
		return nil, err
	}
	lc.mu.Lock()
	defer lc.mu.Unlock()
	if lc.cells[req.CellID] != nil {
		return resp, nil
	}
	b, err := cellapi.ParseBootstrap(req.Bootstrap)
	if err != nil {
		return nil, err
	}
	in := &lightInstance{
		addr:     fmt.Sprintf("127.%d.%d.%d", 1+rand.IntN(250), 1+rand.IntN(250), 1+rand.IntN(250)),
		stateDir: lc.t.TempDir(),
		light:    lightcell.New(fakeruntime.Config{}),
	}
	lc.cells[req.CellID] = in
	runCtx, stop := context.WithCancel(context.WithoutCancel(lc.t.Context()))
	ready, done := make(chan struct{}), make(chan error, 1)
	go func() {
		done <- in.light.Run(runCtx, cellagent.Config{
			Bootstrap: b, StateDir: in.stateDir, PodIP: in.addr, NetNSPath: "/proc/self/ns/net",
			Listen: net.JoinHostPort(in.addr, fmt.Sprint(cellapi.Port)), StopGrace: time.Second,
			Logger: slog.New(slog.DiscardHandler), Now: lc.clock,
			Ready: func(net.Addr) { close(ready) },
		})
	}()
	lc.t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			lc.t.Errorf("light cell %s ended: %v", req.CellID, err)
		}
	})
	select {
	case <-ready:
	case err := <-done:
		return nil, fmt.Errorf("light cell %s ended before it served: %w", req.CellID, err)
	}
	return resp, nil
}

// instance is the light cell of cellID.
func (lc *lightCloud) instance(cellID string) *lightInstance {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	return lc.cells[cellID]
}

// address is where the agent of cellID listens.
func (lc *lightCloud) address(cellID string) string {
	if in := lc.instance(cellID); in != nil {
		return in.addr
	}
	return "192.0.2.1" // not launched here: nothing answers
}

// served is the certificate the agent of cellID keeps and serves.
func (in *lightInstance) served(t *testing.T) *x509.Certificate {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(in.stateDir, cellagent.IdentityDir, "cert.pem"))
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(data)
	if block == nil {
		t.Fatal("no certificate in the agent's cert.pem")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

// kip is one run of the host: a Manager over the cloud and the pods,
// with the cluster CA loaded from its Secret, as a started kip has them.
type kip struct {
	m        *Manager
	notified chan *corev1.Pod
	recorder *record.FakeRecorder
	stop     func()
}

// startKip starts kip as a restarted process would: a new CA from the
// Secret in client (nothing remembered), a new Manager adopting the cells
// the cloud has.
func startKip(t *testing.T, client *fake.Clientset, cloud *lightCloud, indexer cache.Indexer, clock func() time.Time, log *syncbuf.Buffer) *kip {
	t.Helper()
	ca, err := pki.Load(t.Context(), client, "kip-system", "kip-ca", pki.WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	k := &kip{notified: make(chan *corev1.Pod, 1000), recorder: record.NewFakeRecorder(1000)}
	cfg := Config{ClusterID: "test", NodeName: "kip", GCInterval: 100 * time.Millisecond, PodLogsDir: t.TempDir(),
		Match: match.DefaultConfig(), RematchInterval: time.Hour, RenewalCheck: 10 * time.Millisecond, Now: clock,
		Backoff: func(int) time.Duration { return 10 * time.Millisecond }}
	k.m = New(cfg, cloud, ca, podrefs.ClientSource(fake.NewClientset()), corev1listers.NewPodLister(indexer), k.recorder,
		slog.New(slog.NewTextHandler(log, nil)))
	// The cloud's addresses are the fake plugin's; the agents listen on
	// loopback addresses of their own.
	k.m.deps.dial = func(cellID, _ string, tlsConfig *tls.Config) (*cellclient.Agent, error) {
		return cellclient.Dial(cellID, cloud.address(cellID), tlsConfig)
	}
	k.m.deps.join = func(ctx context.Context, cellID, _ string, tlsConfig *tls.Config, caPEM []byte, sign cellclient.JoinSigner) (cellclient.Joined, error) {
		return cellclient.Join(ctx, cellID, cloud.address(cellID), tlsConfig, caPEM, sign)
	}
	k.m.deps.rejoin = func(ctx context.Context, cellID, _ string, tlsConfig *tls.Config, sign cellclient.RenewSigner) (cellclient.Renewed, error) {
		return cellclient.Rejoin(ctx, cellID, cloud.address(cellID), tlsConfig, sign)
	}
	k.m.NotifyPods(t.Context(), func(p *corev1.Pod) { k.notified <- p })
	ctx, cancel := context.WithCancel(t.Context())
	adopted, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		_ = k.m.Run(ctx, adopted)
	}()
	k.stop = func() { cancel(); <-done }
	t.Cleanup(k.stop)
	<-adopted
	return k
}

// waitRunning waits for kip to report the pod Running and records its
// status where the API server would keep it, for the next kip to adopt.
func (k *kip) waitRunning(t *testing.T, indexer cache.Indexer) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case p := <-k.notified:
			if p.Status.Phase == corev1.PodRunning {
				if err := indexer.Update(p); err != nil {
					t.Fatal(err)
				}
				return
			}
		case <-deadline:
			t.Fatal("kip never reported the pod Running")
		}
	}
}

// events drains the events kip recorded.
func (k *kip) events() []string {
	var out []string
	for {
		select {
		case e := <-k.recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

type execIO struct {
	stdin  io.Reader
	stdout *syncbuf.Buffer
}

func (e execIO) Stdin() io.Reader            { return e.stdin }
func (e execIO) Stdout() io.WriteCloser      { return nopWriteCloser{e.stdout} }
func (e execIO) Stderr() io.WriteCloser      { return nil }
func (e execIO) TTY() bool                   { return false }
func (e execIO) Resize() <-chan api.TermSize { return nil }

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// renewWorld is a running pod on a light cell, joined by the host's CA,
// with one clock for the CA, the cloud, the agent and kip.
type renewWorld struct {
	clock   *fakeclock.Clock
	client  *fake.Clientset // the API server: the CA's Secret
	cloud   *lightCloud
	indexer cache.Indexer
	log     *syncbuf.Buffer
	pod     *corev1.Pod
	k       *kip
}

func newRenewWorld(t *testing.T) *renewWorld {
	t.Helper()
	w := &renewWorld{clock: fakeclock.New(time.Now()), client: fake.NewClientset(), log: &syncbuf.Buffer{}}
	plugin := pluginfake.New(pluginfake.WithClock(w.clock.Now))
	if _, err := plugin.Configure(t.Context(), &pluginapi.ConfigureRequest{ClusterID: "test"}); err != nil {
		t.Fatal(err)
	}
	w.cloud = &lightCloud{Provider: plugin, t: t, clock: w.clock.Now, cells: map[string]*lightInstance{}}
	w.indexer = cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("kip's log:\n%s", w.log.String())
		}
	})
	w.pod = newPod("db", "uid-db")
	w.pod.Spec.Containers[0].Command = []string{"/app", "-serve"}
	if err := w.indexer.Add(w.pod); err != nil {
		t.Fatal(err)
	}
	w.k = startKip(t, w.client, w.cloud, w.indexer, w.clock.Now, w.log)
	if err := w.k.m.CreatePod(t.Context(), w.pod); err != nil {
		t.Fatal(err)
	}
	w.k.waitRunning(t, w.indexer)
	return w
}

// TestCellOutlivesItsCertificates (issue 29, "a cell lives as long as its
// pod"): a pod runs on a real agent (a light cell) joined with the
// host's CA, and the clock moves 95 days in steps of 5, past three
// cell certificates' lives; kip is restarted twice on the way (a new
// Manager and CA over the same cloud, pods and Secret, as after kill -9),
// each time staying away 8 days, so that the cell's certificate falls due
// while nobody renews it. At every step the certificate the agent serves
// is renewed before it is within a third of its life of expiring, and at
// the end kip still reaches the pod: logs, exec and delete work.
func TestCellOutlivesItsCertificates(t *testing.T) {
	w := newRenewWorld(t)
	clock, client, cloud, indexer, pod, k := w.clock, w.client, w.cloud, w.indexer, w.pod, w.k
	log := w.log
	in := cloud.instance(CellID(pod.UID))
	if in == nil {
		t.Fatal("no cell was launched")
	}

	const day = 24 * time.Hour
	margin := pki.DefaultCellValidity / 3
	serials := map[string]bool{in.served(t).SerialNumber.String(): true}
	// notDue waits until the certificate the agent serves is not due
	// for renewal: more than a third of a certificate's life ahead.
	notDue := func(when string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			cert := in.served(t)
			if left := cert.NotAfter.Sub(clock.Now()); left > margin {
				serials[cert.SerialNumber.String()] = true
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: the cell's certificate expires at %s, %s from now: it was not renewed",
					when, cert.NotAfter.UTC().Format(time.RFC3339), cert.NotAfter.Sub(clock.Now()))
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	elapsed := time.Duration(0)
	for restarts := 0; elapsed < 95*day; {
		if elapsed >= time.Duration(30+restarts*35)*day && restarts < 2 {
			// kip goes away, and comes back after the certificate fell
			// due: it finds the cell, reconnects and renews it.
			k.stop()
			clock.Advance(8 * day)
			elapsed += 8 * day
			k = startKip(t, client, cloud, indexer, clock.Now, log)
			k.waitRunning(t, indexer)
			restarts++
			notDue(fmt.Sprintf("day %d, after restart %d", elapsed/day, restarts))
			continue
		}
		clock.Advance(5 * day)
		elapsed += 5 * day
		notDue(fmt.Sprintf("day %d", elapsed/day))
	}
	t.Logf("certificates served: %d", len(serials))
	if len(serials) < 5 {
		t.Errorf("the agent served %d certificates over %s, want the join's and at least four renewals", len(serials), elapsed)
	}

	// Kip, restarted twice, still manages the pod: logs, exec, delete.
	logs, err := k.m.GetContainerLogs(t.Context(), "default", "db", "main", api.ContainerLogOpts{})
	if err != nil {
		t.Fatalf("logs after %s: %v", elapsed, err)
	}
	data, err := io.ReadAll(logs)
	_ = logs.Close()
	if err != nil || !strings.Contains(string(data), "/app -serve") {
		t.Errorf("logs = %q, %v; want the container's command line", data, err)
	}
	var out syncbuf.Buffer
	if err := k.m.RunInContainer(t.Context(), "default", "db", "main", []string{"echo", "still", "here"},
		execIO{stdin: strings.NewReader(""), stdout: &out}); err != nil {
		t.Fatalf("exec after %s: %v", elapsed, err)
	}
	if got := out.String(); !strings.Contains(got, "echo still here") {
		t.Errorf("exec output %q, want the command line", got)
	}
	if err := k.m.DeletePod(t.Context(), pod); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for in.light.Runtime.Running() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d containers still run after the pod was deleted", in.light.Runtime.Running())
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, e := range k.events() {
		if strings.Contains(e, ReasonCertificateNotRenewed) || strings.Contains(e, ReasonCertificateExpired) {
			t.Errorf("event %q: no renewal should have failed", e)
		}
	}

}

// TestExpiredCellCertificate: a kip that was away longer than the
// renewal's margin finds the cell serving its expired certificate; within
// pki.ExpiredRenewalGrace it renews it and manages the pod again
// (CellCertificateRenewed), past it the pod gets a CellCertificateExpired
// event and its CellReachable condition False, never silence.
func TestExpiredCellCertificate(t *testing.T) {
	const day = 24 * time.Hour
	tests := []struct {
		name    string
		away    time.Duration
		renewed bool
	}{
		{"within the grace", pki.DefaultCellValidity + 10*day, true},
		{"past the grace", pki.DefaultCellValidity + pki.ExpiredRenewalGrace + day, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newRenewWorld(t)
			clock, client, cloud, indexer, pod, k := w.clock, w.client, w.cloud, w.indexer, w.pod, w.k
			log := w.log
			k.stop()
			clock.Advance(tt.away)
			k = startKip(t, client, cloud, indexer, clock.Now, log)

			if tt.renewed {
				k.waitRunning(t, indexer)
				var out syncbuf.Buffer
				if err := k.m.RunInContainer(t.Context(), "default", "db", "main", []string{"echo", "back"},
					execIO{stdin: strings.NewReader(""), stdout: &out}); err != nil {
					t.Fatalf("exec after the renewal: %v", err)
				}
				if cert := cloud.instance(CellID(pod.UID)).served(t); !cert.NotAfter.After(clock.Now()) {
					t.Errorf("the agent serves a certificate that expired at %s", cert.NotAfter)
				}
			} else {
				deadline := time.After(30 * time.Second)
			wait:
				for {
					select {
					case p := <-k.notified:
						if c := findCondition(p.Status.Conditions, ConditionCellReachable); c != nil &&
							c.Status == corev1.ConditionFalse && c.Reason == ReasonCertificateExpired {
							break wait
						}
					case <-deadline:
						t.Fatal("the pod never got its CellReachable condition False")
					}
				}
			}
			want := ReasonCertificateRenewed
			if !tt.renewed {
				want = ReasonCertificateExpired
			}
			if events := strings.Join(k.events(), "\n"); !strings.Contains(events, want) {
				t.Errorf("events:\n%s\nwant %s", events, want)
			}
		})
	}
}

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

// olderAgent is an agent without the renewal: every Join call is
// UNIMPLEMENTED.
type olderAgent struct{ cellv1.UnimplementedJoinServer }

// TestRenewLoopReportsAnOlderAgent: a cell whose agent cannot renew its
// certificate is reported once, with when it expires, and not asked again
// until it serves another certificate.
func TestRenewLoopReportsAnOlderAgent(t *testing.T) {
	lis := bufconn.Listen(1 << 16)
	srv := grpc.NewServer()
	cellv1.RegisterJoinServer(srv, olderAgent{})
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
