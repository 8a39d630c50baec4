package scale

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/kipcell/kip/test/bench"
)

// Node is the virtual node under test: virtual-kubelet's mock (MockNode),
// or kip with its plugin and cells. Run starts it, measures its process,
// and stops it.
type Node interface {
	// Name is the node's name in the cluster.
	Name() string
	// User is the user the node calls the API server as
	// ("system:node:kip"): Run counts its requests in the audit log.
	User() string
	// Start starts the node's process and returns once it runs; Run then
	// waits for the Node to be Ready.
	Start(ctx context.Context) error
	// PID is the node's process (the one whose /proc Run reads), once
	// started.
	PID() int
	// Exited is closed when the process has ended, once started.
	Exited() <-chan struct{}
	// Stop stops the process and waits for it to end.
	Stop() error
}

// Metered is a Node that counts its own work: kip's kip_api_requests_total
// and kip_plugin_calls_total on its admin /metrics. Run reports how much
// each counter grew over the burst.
type Metered interface {
	Node
	// Counters returns the node's counters now, by name.
	Counters(ctx context.Context) (map[string]float64, error)
}

// Profiled is a Node that saves profiles of its process (kip's heap,
// goroutines and CPU, from its admin server's /debug/pprof/): Run takes
// a CPU profile over the idle window and asks for the others at its end,
// every pod Running.
type Profiled interface {
	Node
	// SaveProfiles saves the process's profiles now, naming them after
	// phase.
	SaveProfiles(ctx context.Context, phase string) error
	// SaveCPUProfile profiles the process's CPU for d from now and saves
	// the profile, naming it after phase; it returns after d.
	SaveCPUProfile(ctx context.Context, d time.Duration, phase string) error
}

// Options configure Run.
type Options struct {
	// Client acts as cluster-admin, unthrottled enough to create the
	// burst at once (QPS and Burst of a thousand or more).
	Client kubernetes.Interface
	// Namespace holds the burst's pods.
	Namespace string
	// Pods is the burst's size, N.
	Pods int
	// Image is the pods' one container's image.
	Image string
	// Audit is the API server's audit log (AuditArgs's), where Run counts
	// the node's requests.
	Audit AuditLog
	// Idle is how long Run measures the node with every pod Running;
	// default 60 s, one period of kip's minute-long cycles (the volume
	// refresh, the pod informer's resync, the node status). The window starts once the node's event creates have
	// stopped (Settle), so that it does not hold the burst's backlog of
	// events.
	Idle time.Duration
	// Quiet is how long the node must make no event create or patch
	// (counted in the audit log) before the idle window starts; default
	// 5 s. SettleTimeout bounds that wait (default 3 minutes): past it,
	// the window starts anyway and Result.Settled is false.
	Quiet, SettleTimeout time.Duration
	// Timeout bounds each wait: the node Ready, every pod Running, every
	// pod gone; default 10 minutes.
	Timeout time.Duration
	// Logf receives progress lines; nil discards them.
	Logf func(format string, args ...any)
}

// Result is what Run measured of one burst on one node.
type Result struct {
	Node string
	Pods int
	// AllCreated is from the first create to the last create's return.
	AllCreated time.Duration
	// AllRunning is from the first create to the last pod seen Running.
	AllRunning time.Duration
	// Start is the per-pod start-up, as Kubernetes' node density test
	// defines it: from just before the pod's create to the first watch
	// event that shows it in phase Running, both on the harness's clock.
	Start bench.Stats
	// Running is, for each pod, when it was first seen Running after the
	// first create (the plot's samples).
	Running []time.Duration
	// AllGone is from the first delete to the last pod's removal from the
	// API.
	AllGone time.Duration
	// PeakRSS is the node process's VmHWM at the end (the processes
	// start afresh for each burst).
	PeakRSS uint64
	// CPU is the node process's CPU time over the burst and the deletion
	// (not the idle minute between them).
	CPU time.Duration
	// IdleCPU is its CPU time over Idle with every pod Running.
	IdleCPU, Idle time.Duration
	// Settle is from the last pod seen Running to the idle window's
	// start: the time the node took to stop creating events (Quiet
	// without one); Settled is false when SettleTimeout ended the wait
	// first. SettleRequests are the node's requests meanwhile.
	Settle         time.Duration
	Settled        bool
	SettleRequests Requests
	// Requests are the node's API requests over the burst and the
	// deletion; IdleRequests over Idle.
	Requests, IdleRequests Requests
	// Counters is how much each of a Metered node's counters grew from
	// before the burst to the end (idle included); nil for another node.
	Counters map[string]float64
}

// CPUPerPod is r's CPU time per pod.
func (r Result) CPUPerPod() time.Duration { return r.CPU / time.Duration(max(r.Pods, 1)) }

// IdleCores is r's idle CPU as a share of one core.
func (r Result) IdleCores() float64 {
	if r.Idle <= 0 {
		return 0
	}
	return r.IdleCPU.Seconds() / r.Idle.Seconds()
}

// RequestsPerPod is r's API requests per pod.
func (r Result) RequestsPerPod() float64 { return float64(r.Requests.Total) / float64(max(r.Pods, 1)) }

// withDefaults is o with its zero fields at their defaults.
func (o Options) withDefaults() Options {
	if o.Idle <= 0 {
		o.Idle = time.Minute
	}
	if o.Quiet <= 0 {
		o.Quiet = 5 * time.Second
	}
	if o.SettleTimeout <= 0 {
		o.SettleTimeout = 3 * time.Minute
	}
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Minute
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	return o
}

// Run starts node, waits for it to be Ready, creates opts.Pods pods on
// it at once and waits for all to be Running, measures it idle, deletes
// them all and waits until they are gone, and stops the node: the burst
// of issue 19's make bench-scale.
func Run(ctx context.Context, node Node, opts Options) (Result, error) {
	opts = opts.withDefaults()
	r := Result{Node: node.Name(), Pods: opts.Pods, Idle: opts.Idle}
	if err := node.Start(ctx); err != nil {
		return r, fmt.Errorf("starting node %s: %w", node.Name(), err)
	}
	defer func() {
		if err := node.Stop(); err != nil {
			opts.Logf("stopping node %s: %v", node.Name(), err)
		}
	}()
	if err := waitNodeReady(ctx, opts.Client, node, opts.Timeout); err != nil {
		return r, err
	}
	opts.Logf("node %s Ready (pid %d); creating %d pods", node.Name(), node.PID(), opts.Pods)

	w, err := watchPods(ctx, opts.Client, opts.Namespace, node.Name())
	if err != nil {
		return r, err
	}
	defer w.stop()
	m := meter{node: node, audit: opts.Audit, user: node.User()}
	burst0, err := m.read(ctx)
	if err != nil {
		return r, err
	}

	// The burst: every pod created at once, by many workers.
	names := podNames(node.Name(), opts.Pods)
	first := time.Now()
	created, err := forEach(ctx, names, func(ctx context.Context, name string) error {
		_, err := opts.Client.CoreV1().Pods(opts.Namespace).Create(ctx, podOn(node.Name(), name, opts.Image), metav1.CreateOptions{})
		return err
	})
	if err != nil {
		return r, fmt.Errorf("creating the pods: %w", err)
	}
	r.AllCreated = time.Since(first)
	running, err := w.waitRunning(ctx, names, opts.Timeout)
	if err != nil {
		return r, err
	}
	var starts []time.Duration
	for _, name := range names {
		r.Running = append(r.Running, running[name].Sub(first))
		r.AllRunning = max(r.AllRunning, running[name].Sub(first))
		starts = append(starts, running[name].Sub(created[name]))
	}
	r.Start = bench.Of(starts)
	opts.Logf("%d pods Running on %s %.2fs after the first create (created in %.2fs); start %s",
		opts.Pods, node.Name(), r.AllRunning.Seconds(), r.AllCreated.Seconds(), r.Start)

	idle0, idle1, err := measureIdle(ctx, m, node, opts, &r)
	if err != nil {
		return r, err
	}

	// Delete them all; they are gone when the API no longer has them: the
	// node has seen the deletion, stopped the pod, and removed it.
	firstDelete := time.Now()
	if _, err := forEach(ctx, names, func(ctx context.Context, name string) error {
		err := opts.Client.CoreV1().Pods(opts.Namespace).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](deleteGrace)})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}); err != nil {
		return r, fmt.Errorf("deleting the pods: %w", err)
	}
	gone, err := w.waitGone(ctx, names, opts.Timeout)
	if err != nil {
		return r, err
	}
	for _, at := range gone {
		r.AllGone = max(r.AllGone, at.Sub(firstDelete))
	}
	end, err := m.read(ctx)
	if err != nil {
		return r, err
	}
	opts.Logf("%d pods gone from %s %.2fs after the first delete", opts.Pods, node.Name(), r.AllGone.Seconds())

	r.PeakRSS = end.usage.PeakRSS
	// The burst's CPU runs to the idle window's start (the settling
	// included: it is the burst's backlog).
	r.CPU = idle0.usage.CPU - burst0.usage.CPU + end.usage.CPU - idle1.usage.CPU
	r.IdleCPU = idle1.usage.CPU - idle0.usage.CPU
	if r.Requests, err = m.requests(burst0, idle0); err != nil { // the settling included
		return r, err
	}
	deletion, err := m.requests(idle1, end)
	if err != nil {
		return r, err
	}
	r.Requests.Add(deletion)
	if r.IdleRequests, err = m.requests(idle0, idle1); err != nil {
		return r, err
	}
	if end.counters != nil {
		r.Counters = map[string]float64{}
		for k, v := range end.counters {
			r.Counters[k] = v - burst0.counters[k]
		}
	}
	return r, nil
}

// settle waits until user has made no event create or patch (the audit
// log from offset on) for quiet, looking every quarter of quiet; it
// reports false when timeout passed first.
func settle(ctx context.Context, audit AuditLog, user string, offset int64, quiet, timeout time.Duration) (bool, error) {
	start := time.Now()
	last := start // the last event request seen, or the start
	for {
		end, err := audit.Offset()
		if err != nil {
			return false, err
		}
		reqs, err := audit.Count(user, offset, end)
		if err != nil {
			return false, err
		}
		offset = end
		now := time.Now()
		if reqs.ByKind["create events"]+reqs.ByKind["patch events"] > 0 {
			last = now
		}
		switch {
		case now.Sub(last) >= quiet:
			return true, nil
		case now.Sub(start) >= timeout:
			return false, nil
		}
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-time.After(quiet / 4):
		}
	}
}

// measureIdle waits until the node has stopped creating events (the
// burst's backlog drained: settle), then reads it at the start and the
// end of opts.Idle (and saves a Profiled node's profiles at the end); it
// records the settling in r.
func measureIdle(ctx context.Context, m meter, node Node, opts Options, r *Result) (idle0, idle1 reading, err error) {
	settle0, err := m.read(ctx)
	if err != nil {
		return idle0, idle1, err
	}
	settleStart := time.Now()
	r.Settled, err = settle(ctx, opts.Audit, node.User(), settle0.offset, opts.Quiet, opts.SettleTimeout)
	if err != nil {
		return idle0, idle1, err
	}
	r.Settle = time.Since(settleStart)
	idle0, err = m.read(ctx)
	if err != nil {
		return idle0, idle1, err
	}
	if r.SettleRequests, err = m.requests(settle0, idle0); err != nil {
		return idle0, idle1, err
	}
	opts.Logf("idle window of %s starts %.2fs after all Running (%d requests meanwhile; quiet for %s: %v)",
		opts.Idle, r.Settle.Seconds(), r.SettleRequests.Total, opts.Quiet, r.Settled)
	p, profiled := node.(Profiled)
	cpuProfile := make(chan error, 1)
	if profiled {
		go func() { cpuProfile <- p.SaveCPUProfile(ctx, opts.Idle, "idle") }()
	}
	select {
	case <-ctx.Done():
		return idle0, idle1, ctx.Err()
	case <-time.After(opts.Idle):
	}
	idle1, err = m.read(ctx)
	if err != nil {
		return idle0, idle1, err
	}
	if profiled {
		if err := <-cpuProfile; err != nil {
			return idle0, idle1, err
		}
		if err := p.SaveProfiles(ctx, "idle"); err != nil {
			return idle0, idle1, err
		}
	}
	return idle0, idle1, nil
}

// meter reads what Run measures of the node at the edges of each phase.
type meter struct {
	node  Node
	audit AuditLog
	user  string
}

type reading struct {
	usage    Usage
	offset   int64
	counters map[string]float64
}

func (m meter) read(ctx context.Context) (reading, error) {
	var rd reading
	var err error
	if rd.usage, err = ReadUsage(m.node.PID()); err != nil {
		return rd, err
	}
	if rd.offset, err = m.audit.Offset(); err != nil {
		return rd, err
	}
	if mn, ok := m.node.(Metered); ok {
		if rd.counters, err = mn.Counters(ctx); err != nil {
			return rd, fmt.Errorf("reading node %s's counters: %w", m.node.Name(), err)
		}
	}
	return rd, nil
}

// requests counts the node's requests between two readings.
func (m meter) requests(from, to reading) (Requests, error) {
	return m.audit.Count(m.user, from.offset, to.offset)
}

// podNames are the burst's pod names on node.
func podNames(node string, n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("%s-%04d", node, i)
	}
	return names
}

// nodeLabel marks the burst's pods with their node's name.
const nodeLabel = "scale.kipcell.io/node"

// podOn is a pod of one container that only node can take: a required
// node affinity on its name (as a DaemonSet's pods have), and a toleration
// of any virtual-kubelet.io/provider taint, kip's and the mock's.
func podOn(node, name, image string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{nodeLabel: node}},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "c", Image: image}},
			Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
					MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}},
				}}},
			}},
			Tolerations: []corev1.Toleration{{Key: "virtual-kubelet.io/provider", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
		},
	}
}

// deleteGrace is the grace period of the burst's deletion, in seconds:
// short, since virtual-kubelet removes a pod only when its grace period
// has passed (the mock's containers stop at once), and not zero, which
// would remove the pods without their node.
const deleteGrace = 1

// workers is how many creates or deletes are in flight at once.
const workers = 32

// forEach calls do for every name on workers goroutines and returns when
// each call was made (just before it), or the first error.
func forEach(ctx context.Context, names []string, do func(ctx context.Context, name string) error) (map[string]time.Time, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu    sync.Mutex
		at    = make(map[string]time.Time, len(names))
		errs  []error
		work  = make(chan string)
		wg    sync.WaitGroup
		start = func(name string) {
			mu.Lock()
			at[name] = time.Now()
			mu.Unlock()
		}
	)
	for range min(workers, len(names)) {
		wg.Go(func() {
			for name := range work {
				start(name)
				if err := do(ctx, name); err != nil {
					mu.Lock()
					errs = append(errs, fmt.Errorf("%s: %w", name, err))
					mu.Unlock()
					cancel()
				}
			}
		})
	}
feed:
	for _, name := range names {
		select {
		case work <- name:
		case <-ctx.Done():
			break feed
		}
	}
	close(work)
	wg.Wait()
	return at, errors.Join(errs...)
}

// podWatch records, on the harness's clock, when each pod of a node was
// first seen Running and when it was seen deleted.
type podWatch struct {
	mu      sync.Mutex
	running map[string]time.Time
	gone    map[string]time.Time
	changed chan struct{}
	stop    func()
}

func watchPods(ctx context.Context, client kubernetes.Interface, ns, node string) (*podWatch, error) {
	w := &podWatch{running: map[string]time.Time{}, gone: map[string]time.Time{}, changed: make(chan struct{})}
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(ns),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = nodeLabel + "=" + node }))
	informer := factory.Core().V1().Pods().Informer()
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { w.saw(obj, false) },
		UpdateFunc: func(_, obj any) { w.saw(obj, false) },
		DeleteFunc: func(obj any) { w.saw(obj, true) },
	}); err != nil {
		return nil, fmt.Errorf("watching the pods: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	factory.Start(ctx.Done())
	w.stop = func() { cancel(); factory.Shutdown() }
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		w.stop()
		return nil, fmt.Errorf("watching the pods: %w", context.Cause(ctx))
	}
	return w, nil
}

func (w *podWatch) saw(obj any, deleted bool) {
	now := time.Now()
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, seen := w.running[p.Name]; !seen && !deleted && p.Status.Phase == corev1.PodRunning {
		w.running[p.Name] = now
	}
	if _, seen := w.gone[p.Name]; !seen && deleted {
		w.gone[p.Name] = now
	}
	close(w.changed)
	w.changed = make(chan struct{})
}

func (w *podWatch) waitRunning(ctx context.Context, names []string, timeout time.Duration) (map[string]time.Time, error) {
	return w.wait(ctx, "Running", w.running, names, timeout)
}

func (w *podWatch) waitGone(ctx context.Context, names []string, timeout time.Duration) (map[string]time.Time, error) {
	return w.wait(ctx, "gone", w.gone, names, timeout)
}

// wait waits until seen (w.running or w.gone) has every name, and returns
// a copy of it.
func (w *podWatch) wait(ctx context.Context, what string, seen map[string]time.Time, names []string, timeout time.Duration) (map[string]time.Time, error) {
	deadline := time.After(timeout)
	for {
		w.mu.Lock()
		missing := 0
		for _, name := range names {
			if _, ok := seen[name]; !ok {
				missing++
			}
		}
		changed := w.changed
		if missing == 0 {
			got := maps.Clone(seen)
			w.mu.Unlock()
			return got, nil
		}
		w.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-deadline:
			return nil, fmt.Errorf("waiting for %d pods to be %s: %d are not after %s", len(names), what, missing, timeout)
		}
	}
}

// waitNodeReady waits until node's Ready condition is True, and fails at
// once if its process ends.
func waitNodeReady(ctx context.Context, client kubernetes.Interface, node Node, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		n, err := client.CoreV1().Nodes().Get(ctx, node.Name(), metav1.GetOptions{})
		if err == nil && slices.ContainsFunc(n.Status.Conditions, func(c corev1.NodeCondition) bool {
			return c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue
		}) {
			return nil
		}
		select {
		case <-ctx.Done():
			if err != nil {
				return fmt.Errorf("waiting for node %s to be Ready: %w (last: %w)", node.Name(), ctx.Err(), err)
			}
			return fmt.Errorf("waiting for node %s to be Ready: %w", node.Name(), ctx.Err())
		case <-node.Exited():
			return fmt.Errorf("waiting for node %s to be Ready: its process ended", node.Name())
		case <-time.After(200 * time.Millisecond):
		}
	}
}
