package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sync"
	"time"

	"github.com/kipcell/kip/test/controlplane"
	"github.com/kipcell/kip/test/e2e/framework"
	"github.com/kipcell/kip/test/images"
	"github.com/kipcell/kip/test/kubeletnode"
)

// How kip-demo starts what the demo shows (issue 32: a second make demo in
// at most 45 s): kip and the provisioner in one goroutine, the kubelet node
// kip-infra and its add-ons in the other, and within the latter the
// add-ons' images pushed and their manifests applied while the node starts
// (their pods, pinned to kip-infra by name, wait in Pending until it is
// Ready), metrics-server's beside CoreDNS's. metrics-server is on the
// demo's longest path: it is Ready only once it holds two scrapes, 15 s
// after it starts, and kubectl top, the demo's last step, waits for that.

// steps announces each step on out (hack/demo.sh shows it on the screen)
// and, with the seconds since kip-demo started, on log (demo.log), so that
// a run's log says where its time went. Safe for concurrent use.
type steps struct {
	mu       sync.Mutex
	out, log io.Writer
	now      func() time.Time
	start    time.Time
}

func newSteps(out, log io.Writer, now func() time.Time) *steps {
	return &steps{out: out, log: log, now: now, start: now()}
}

// announce writes what to out and, timed, to log.
func (s *steps) announce(what string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fmt.Fprintln(s.out, what)
	s.logLocked(what)
}

// logf writes a timed line to log only.
func (s *steps) logf(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.logLocked(fmt.Sprintf(format, args...))
}

func (s *steps) logLocked(what string) {
	fmt.Fprintf(s.log, "kip-demo: %5.1fs %s\n", s.now().Sub(s.start).Seconds(), what)
}

// startedKip is what startKip started; on an error, what it started
// before it, for the caller to stop.
type startedKip struct {
	kip  *framework.Kip
	prov *provisioner
	err  error
}

// startKip starts kip as node kip and then kip-local-provisioner on its
// local plugin's state directory: the local plugin's disks for claims of
// class kip-local.
func startKip(ctx context.Context, fw *framework.Framework, st *steps, cells *framework.Cells, bin, dir, kubeconfig string, log io.Writer) startedKip {
	st.announce("starting kip with the local plugin, as node kip")
	kip, err := fw.StartKip(ctx, cells, framework.KipOptions{
		NodeName: "kip", ClusterID: "kip-demo", BinDir: bin, Dir: filepath.Join(dir, "kip"), Log: log,
	})
	if err != nil {
		return startedKip{err: err}
	}
	st.logf("kip runs")
	prov, err := startProvisioner(bin, kip.StateDir, kubeconfig, filepath.Join(dir, "provisioner.log"))
	return startedKip{kip: kip, prov: prov, err: err}
}

// addons are the cluster's own add-ons, where they run in a real
// cluster: on a kubelet node, kip-infra, pinned there (an --untainted Kip
// node would otherwise be a candidate too).
type addons struct {
	infra *kubeletnode.Node
	dns   *framework.DNS // nil without framework.ClusterDNS
	ms    *framework.MetricsServer
}

// startAddons builds what the add-ons run, then starts the kubelet node
// while it deploys metrics-server and the cluster DNS on it. On an error
// the addons hold what started, for the caller to stop.
func startAddons(ctx context.Context, fw *framework.Framework, st *steps, cluster *controlplane.Cluster, cells *framework.Cells, log io.Writer) (addons, error) {
	var a addons
	if err := buildAddons(ctx, log); err != nil {
		return a, err
	}
	st.logf("the kubelet node's, CoreDNS's and metrics-server's builds are in place")
	node := make(chan error, 1)
	go func() {
		st.announce("starting the kubelet node kip-infra, for the cluster's add-ons")
		var err error
		a.infra, err = framework.StartInfraNode(ctx, cluster, cells, log)
		if err == nil {
			st.logf("kip-infra is Ready")
		}
		node <- err
	}()
	err := deployAddons(ctx, fw, st, cells, &a, log)
	err = errors.Join(err, <-node) // a.infra is set after this receive
	return a, err
}

// deployAddons pushes the add-ons' images and applies their manifests,
// placed on kip-infra, into a: metrics-server's and CoreDNS's side by
// side (each is a gzip of its binary, a push and a kubectl apply: about
// 2 s, 5 on a loaded machine), as neither needs the other.
func deployAddons(ctx context.Context, fw *framework.Framework, st *steps, cells *framework.Cells, a *addons, log io.Writer) error {
	onInfra := framework.Placement{Node: framework.InfraNodeName}
	dns := make(chan error, 1)
	go func() {
		if !framework.ClusterDNS() {
			dns <- nil
			return
		}
		st.announce("deploying CoreDNS, the cluster DNS, on kip-infra")
		var err error
		a.dns, err = fw.ApplyDNS(ctx, cells, framework.DNSOptions{Placement: onInfra, Log: log})
		dns <- err
	}()
	st.announce("deploying metrics-server, behind kubectl top, on kip-infra")
	var err error
	a.ms, err = fw.ApplyMetricsServer(ctx, cells, onInfra, log)
	err = errors.Join(err, <-dns) // a.dns is set after this receive
	if err == nil {
		st.logf("the add-ons are applied")
	}
	return err
}

// buildAddons builds, cached, the kubelet node's binaries, metrics-server
// and CoreDNS, one after another, in the order the demo once started them,
// before anything runs them: warm, each returns at once; cold, builds side
// by side would share the two cores and each would take longer than the
// time its progress line announces.
func buildAddons(ctx context.Context, log io.Writer) error {
	if _, err := controlplane.BuildNode(ctx, controlplane.BuildOptions{Log: log}); err != nil {
		return fmt.Errorf("building the kubelet node: %w", err)
	}
	if framework.ClusterDNS() {
		if _, err := images.BuildCoreDNS(ctx, images.CoreDNSOptions{Log: log}); err != nil {
			return fmt.Errorf("building CoreDNS: %w", err)
		}
	}
	if _, err := images.BuildMetricsServer(ctx, images.BuildOptions{Log: log}); err != nil {
		return fmt.Errorf("building metrics-server: %w", err)
	}
	return nil
}

// resolveAddons downloads and resolves the Go modules of what
// buildAddons builds (CoreDNS, metrics-server, the kubelet node) without
// compiling them: hack/demo.sh runs it (kip-demo --resolve) in the
// background beside kip-cluster up, so that a first run's downloads wait
// on the network while the control plane compiles, and buildAddons only
// compiles. Each takes its build's lock; warm, it returns at once.
func resolveAddons(ctx context.Context, log io.Writer) error {
	if err := images.Resolve(ctx, log); err != nil {
		return err
	}
	if err := controlplane.ResolveNode(ctx, controlplane.BuildOptions{Log: log}); err != nil {
		return fmt.Errorf("resolving the kubelet node's modules: %w", err)
	}
	return nil
}
