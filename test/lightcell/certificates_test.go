package lightcell

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/node/api"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/kipcell/kip/cell"
	cellapi "github.com/kipcell/kip/cell/api"
	"github.com/kipcell/kip/cell/runtime/fakeruntime"
	"github.com/kipcell/kip/host/cells"
	"github.com/kipcell/kip/host/match"
	"github.com/kipcell/kip/host/pki"
	"github.com/kipcell/kip/host/podrefs"
	"github.com/kipcell/kip/pluginapi"
	pluginfake "github.com/kipcell/kip/pluginapi/fake"
	"github.com/kipcell/kip/test/fakeclock"
	"github.com/kipcell/kip/test/syncbuf"
)

// A pod's cell outliving its certificates: kip (host/cells' Manager, with
// the CA of host/pki) renews the certificate of a real agent (a light
// cell) while it runs, and renews it or reports it expired after it was
// away. These tests were host/cells', which may not import the agent.

// lightCloud is the fake plugin with a real agent behind each instance:
// a light cell started in this process on a loopback address of its own,
// with the bootstrap of its launch, reading the test's clock. The
// instances it reports have their light cell's address as their private
// one, where kip reaches the agent.
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
	light    *Cell
}

func (lc *lightCloud) Launch(ctx context.Context, req *pluginapi.LaunchRequest) (*pluginapi.LaunchResponse, error) {
	resp, err := lc.Provider.Launch(ctx, req)
	if err != nil {
		return nil, err
	}
	lc.mu.Lock()
	defer lc.mu.Unlock()
	if in := lc.cells[req.CellID]; in != nil {
		in.reported(&resp.Instance)
		return resp, nil
	}
	b, err := cellapi.ParseBootstrap(req.Bootstrap)
	if err != nil {
		return nil, err
	}
	in := &lightInstance{addr: loopbackAddress(), stateDir: lc.t.TempDir(), light: New(fakeruntime.Config{})}
	lc.cells[req.CellID] = in
	runCtx, stop := context.WithCancel(context.WithoutCancel(lc.t.Context()))
	ready, done := make(chan struct{}), make(chan error, 1)
	go func() {
		done <- in.light.Run(runCtx, cell.Config{
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
	in.reported(&resp.Instance)
	return resp, nil
}

func (lc *lightCloud) Describe(ctx context.Context, req *pluginapi.DescribeRequest) (*pluginapi.DescribeResponse, error) {
	resp, err := lc.Provider.Describe(ctx, req)
	if err != nil {
		return nil, err
	}
	lc.reported(resp.Instances)
	return resp, nil
}

func (lc *lightCloud) List(ctx context.Context, req *pluginapi.ListRequest) (*pluginapi.ListResponse, error) {
	resp, err := lc.Provider.List(ctx, req)
	if err != nil {
		return nil, err
	}
	lc.reported(resp.Instances)
	return resp, nil
}

// reported gives the instances of the cells launched here their light
// cell's address as their private one.
func (lc *lightCloud) reported(insts []pluginapi.Instance) {
	for i := range insts {
		if in := lc.instance(insts[i].CellID); in != nil {
			in.reported(&insts[i])
		}
	}
}

// reported gives inst in's address as its private one.
func (in *lightInstance) reported(inst *pluginapi.Instance) {
	for i := range inst.Addresses {
		if inst.Addresses[i].Type == pluginapi.AddressPrivate {
			inst.Addresses[i].Address = in.addr
		}
	}
}

// instance is the light cell of cellID.
func (lc *lightCloud) instance(cellID string) *lightInstance {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	return lc.cells[cellID]
}

// served is the certificate the agent of cellID keeps and serves.
func (in *lightInstance) served(t *testing.T) *x509.Certificate {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(in.stateDir, cell.IdentityDir, "cert.pem"))
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
	m        *cells.Manager
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
	cfg := cells.Config{ClusterID: "test", NodeName: "kip", GCInterval: 100 * time.Millisecond, PodLogsDir: t.TempDir(),
		Match: match.DefaultConfig(), RematchInterval: time.Hour, RenewalCheck: 10 * time.Millisecond, Now: clock,
		Backoff: func(int) time.Duration { return 10 * time.Millisecond }}
	k.m = cells.New(cfg, cloud, ca, podrefs.ClientSource(fake.NewClientset()), corev1listers.NewPodLister(indexer), k.recorder,
		slog.New(slog.NewTextHandler(log, nil)))
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

// findCondition is the pod condition of type t, if any.
func findCondition(conds []corev1.PodCondition, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range conds {
		if conds[i].Type == t {
			return &conds[i]
		}
	}
	return nil
}

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
	w.pod = &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "default", UID: types.UID("uid-db")},
		Spec: corev1.PodSpec{NodeName: "kip", Containers: []corev1.Container{
			{Name: "main", Image: "busybox", Command: []string{"/app", "-serve"}},
		}},
	}
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
	in := cloud.instance(cells.CellID(pod.UID))
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
		if strings.Contains(e, cells.ReasonCertificateNotRenewed) || strings.Contains(e, cells.ReasonCertificateExpired) {
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
				if cert := cloud.instance(cells.CellID(pod.UID)).served(t); !cert.NotAfter.After(clock.Now()) {
					t.Errorf("the agent serves a certificate that expired at %s", cert.NotAfter)
				}
			} else {
				deadline := time.After(30 * time.Second)
			wait:
				for {
					select {
					case p := <-k.notified:
						if c := findCondition(p.Status.Conditions, cells.ConditionCellReachable); c != nil &&
							c.Status == corev1.ConditionFalse && c.Reason == cells.ReasonCertificateExpired {
							break wait
						}
					case <-deadline:
						t.Fatal("the pod never got its CellReachable condition False")
					}
				}
			}
			want := cells.ReasonCertificateRenewed
			if !tt.renewed {
				want = cells.ReasonCertificateExpired
			}
			if events := strings.Join(k.events(), "\n"); !strings.Contains(events, want) {
				t.Errorf("events:\n%s\nwant %s", events, want)
			}
		})
	}
}
