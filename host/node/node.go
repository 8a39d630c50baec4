package node

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	vklog "github.com/virtual-kubelet/virtual-kubelet/log"
	vknode "github.com/virtual-kubelet/virtual-kubelet/node"
	"github.com/virtual-kubelet/virtual-kubelet/node/nodeutil"
	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	utilexec "k8s.io/utils/exec"
)

const (
	// The kubelet's streaming defaults.
	streamIdleTimeout     = 4 * time.Hour
	streamCreationTimeout = 30 * time.Second
	// podResync is how often the pod informer replays its cache (as
	// nodeutil does); identical objects enqueue no work.
	podResync = time.Minute
	// retryWindow replaces virtual-kubelet's 20 retries per key (pitfall
	// A4.7): a key is retried, with backoff capped at a minute, for this
	// long after it was first queued.
	retryWindow = 30 * time.Minute
	// rateLimiterBase is the work queues' first per-key delay (rateLimiter).
	rateLimiterBase = 5 * time.Millisecond
	// shutdownTimeout bounds the kubelet API's graceful shutdown.
	shutdownTimeout = 5 * time.Second
)

// Node is kip's virtual node: it registers the Node object and keeps its
// Lease, drives Pods through virtual-kubelet's pod controller, and serves
// the kubelet API. Build it with New and start it with Run.
type Node struct {
	client     kubernetes.Interface
	pods       Pods
	cfg        Config
	log        *slog.Logger
	internalIP string // as picked at New; address() is the current one
	tlsConfig  *tls.Config
	cert       *atomic.Pointer[tls.Certificate] // the serving certificate tlsConfig serves
	auth       nodeutil.Auth

	started atomic.Bool
	ready   chan struct{}
	done    chan struct{}

	// podFactory and recorder are shared with the cell manager when the
	// daemon passes them in (WithPodInformerFactory, WithEventRecorder).
	podFactory informers.SharedInformerFactory
	recorder   record.EventRecorder

	// ownedAnnotations is the prefix of the annotations a pod status
	// write takes from Pods (WithOwnedAnnotations).
	ownedAnnotations string
	// provider is virtual-kubelet's NodeProvider, set by Run.
	provider *nodeProvider
	// csiNodeKick asks runCSINode to write the CSINode again.
	csiNodeKick chan struct{}

	mu   sync.Mutex
	addr string // the kubelet API's address once listening
	err  error  // Run's result once done is closed
}

// Option adjusts New.
type Option func(*Node)

// WithPodInformerFactory makes the Node use factory (from
// NewPodInformerFactory) for its pod informer, so that other components
// share the same cache of the node's pods. Run starts it.
func WithPodInformerFactory(factory informers.SharedInformerFactory) Option {
	return func(n *Node) { n.podFactory = factory }
}

// WithOwnedAnnotations names the prefix of the pod annotations the Pods
// implementation reports with a status (kip's placement annotations);
// every other label, annotation and finalizer of a status write is the
// API server's (podStatusClient).
func WithOwnedAnnotations(prefix string) Option {
	return func(n *Node) { n.ownedAnnotations = prefix }
}

// WithEventRecorder makes the Node post events through recorder (from
// NewEventRecorder) instead of its own.
func WithEventRecorder(recorder record.EventRecorder) Option {
	return func(n *Node) { n.recorder = recorder }
}

// NewPodInformerFactory returns an informer factory that watches only the
// pods bound to node name, without their managedFields (stripManagedFields).
func NewPodInformerFactory(client kubernetes.Interface, name string) informers.SharedInformerFactory {
	return informers.NewSharedInformerFactoryWithOptions(client, podResync, nodeutil.PodInformerFilter(name),
		informers.WithTransform(stripManagedFields))
}

// stripManagedFields is the pod informer's transform: it drops an
// object's managedFields (server-side apply's bookkeeping, a few entries
// of every writer of the pod) before the cache keeps it. Nothing in kip
// reads them, and they cost on every pod: memory in the cache and in each
// cell's copy of its pod, and time in virtual-kubelet's comparison of
// each update with the pod before it (podsEffectivelyEqual, a go-cmp
// walk of the whole object).
func stripManagedFields(obj any) (any, error) {
	if m, ok := obj.(metav1.Object); ok {
		m.SetManagedFields(nil)
	}
	return obj, nil
}

// NewEventRecorder returns a recorder that writes events as the node (the
// Node authorizer allows it) and the function that stops it.
func NewEventRecorder(ctx context.Context, client kubernetes.Interface, name string) (record.EventRecorder, func()) {
	eb := record.NewBroadcaster(record.WithContext(ctx))
	eb.StartRecordingToSink(&corev1client.EventSinkImpl{Interface: client.CoreV1().Events(corev1.NamespaceAll)})
	return eb.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "kip", Host: name}), eb.Shutdown
}

// New validates cfg (zero fields take the defaults), prepares the kubelet
// API's serving certificate and webhook authentication, and returns a Node
// that Run starts. client should be built with ClientConfig; it needs what
// the Node authorizer grants system:node:<cfg.Name> (see doc.go).
func New(client kubernetes.Interface, pods Pods, cfg Config, log *slog.Logger, opts ...Option) (*Node, error) {
	if client == nil {
		return nil, errors.New("node: no Kubernetes client")
	}
	if pods == nil {
		return nil, errors.New("node: no Pods")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("node: invalid config: %w", err)
	}
	log = log.With("node", cfg.Name)
	ip := cfg.InternalIP
	if ip == "" {
		var err error
		if ip, err = hostIP(); err != nil {
			return nil, fmt.Errorf("node: no internal IP configured and %w", err)
		}
		log.Info("no internal IP configured; using this host's", "internal_ip", ip)
	}
	cert, err := servingCert(cfg, net.ParseIP(ip))
	if err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	current := &atomic.Pointer[tls.Certificate]{}
	current.Store(&cert)
	tlsConfig, err := serverTLS(current, cfg)
	if err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	auth, err := nodeutil.WebhookAuth(client, cfg.Name)
	if err != nil {
		return nil, fmt.Errorf("node: setting up webhook authentication: %w", err)
	}
	if cfg.ClientCAFile == "" {
		log.Warn("no client CA for the kubelet API: only bearer tokens are accepted, so the API server cannot reach logs, exec or port-forward (set node.clientCAFile to the CA of its --kubelet-client-certificate)")
	}
	n := &Node{
		client: client, pods: pods, cfg: cfg, log: log, internalIP: ip,
		tlsConfig: tlsConfig, cert: current, auth: auth,
		ready: make(chan struct{}), done: make(chan struct{}), csiNodeKick: make(chan struct{}, 1),
	}
	for _, o := range opts {
		o(n)
	}
	return n, nil
}

// ClientConfig returns a copy of base with client rate limits fit for the
// node (client-go's default of 5 QPS, burst 10, throttles pod status
// writes as soon as a few dozen pods start together; pitfall A4.12).
// Limits already set in base are kept.
func ClientConfig(base *rest.Config) *rest.Config {
	c := rest.CopyConfig(base)
	if c.QPS == 0 {
		c.QPS = 50
	}
	if c.Burst == 0 {
		c.Burst = 100
	}
	if c.UserAgent == "" {
		c.UserAgent = "kip"
	}
	return c
}

// EventClientConfig returns a copy of base for the client that
// NewEventRecorder writes events through, with the kubelet's own event
// limits (--event-qps 50, --event-burst 100) on a rate limiter of its own,
// as the kubelet builds its EventClient: a burst of pods records several
// events each, and on the node's client they would take the pod status
// writes' share of its 50 QPS. client-go's broadcaster still drops events
// beyond its queue of 1,000 when the API cannot take them as fast.
func EventClientConfig(base *rest.Config) *rest.Config {
	c := rest.CopyConfig(base)
	c.QPS, c.Burst, c.RateLimiter = 50, 100, nil
	if c.UserAgent == "" {
		c.UserAgent = "kip"
	}
	return c
}

// ExitCode is the error RunInContainer returns when the command ran and
// exited with a non-zero code: the kubelet API turns it into that exit
// code for kubectl exec. Any other error is an internal error.
func ExitCode(code int) error {
	return utilexec.CodeExitError{Err: fmt.Errorf("command exited with code %d", code), Code: code}
}

// Config returns the configuration in use, defaults applied.
func (n *Node) Config() Config { return n.cfg }

// InternalIP returns the address the Node advertises for its kubelet API.
func (n *Node) InternalIP() string { return n.address() }

// address is the node's current internal IP.
func (n *Node) address() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.internalIP
}

// refreshAddress picks this host's address again when none is configured
// and, if it changed, serves a self-signed certificate for the new one
// (a configured certificate stays); it returns the current address.
func (n *Node) refreshAddress() string {
	cur := n.address()
	if n.cfg.InternalIP != "" {
		return cur
	}
	ip, err := hostIP()
	if err != nil || ip == cur {
		return cur
	}
	if n.cfg.TLSCertFile == "" {
		cert, err := selfSignedCert(n.cfg.Name, net.ParseIP(ip), time.Now())
		if err != nil {
			n.log.Warn("the host's address changed, but no certificate could be made for it; keeping the old address", "old", cur, "new", ip, "error", err)
			return cur
		}
		n.cert.Store(&cert)
	}
	n.log.Info("the host's address changed; the node reports the new one", "old", cur, "new", ip)
	n.mu.Lock()
	n.internalIP = ip
	n.mu.Unlock()
	return ip
}

// Addr returns the kubelet API's listening address, or "" before Run
// listens.
func (n *Node) Addr() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.addr
}

// WaitReady blocks until the Node is registered, its Lease is kept and the
// pod controller and kubelet API run; it returns Run's error if Run ended
// first, or ctx's.
func (n *Node) WaitReady(ctx context.Context) error {
	select {
	case <-n.ready:
		return nil
	case <-n.done:
		if err := n.Err(); err != nil {
			return fmt.Errorf("node stopped before it was ready: %w", err)
		}
		return errors.New("node stopped before it was ready")
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Done is closed when Run returns.
func (n *Node) Done() <-chan struct{} { return n.done }

// Err returns Run's error once Done is closed, nil before.
func (n *Node) Err() error {
	select {
	case <-n.done:
		n.mu.Lock()
		defer n.mu.Unlock()
		return n.err
	default:
		return nil
	}
}

// Run registers the node and runs it until ctx ends (then it returns nil)
// or a controller fails. It may be called once.
func (n *Node) Run(ctx context.Context) (err error) {
	if !n.started.CompareAndSwap(false, true) {
		return errors.New("node: Run called twice")
	}
	defer func() {
		n.mu.Lock()
		n.err = err
		n.mu.Unlock()
		close(n.done)
	}()
	ctx, cancel := context.WithCancel(vklog.WithLogger(ctx, vkLogger{l: n.log}))
	defer cancel()
	cfg := n.cfg

	// Listen first: the Node advertises the real port (cfg may say :0).
	ln, err := net.Listen("tcp", cfg.ListenAddress)
	if err != nil {
		return fmt.Errorf("node: kubelet API listening on %s: %w", cfg.ListenAddress, err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	start := time.Now()
	provider := newNodeProvider(n.pods, cfg.HealthGrace, n.log)
	provider.address = n.address()
	provider.refreshAddress = n.refreshAddress
	provider.volDrivers = slices.Sorted(slices.Values(cfg.VolumeDrivers))
	provider.driversChanged = n.kickCSINode
	nodeObj := nodeObject(cfg, n.address(), int32(port), provider.state(), start)
	provider.node = func(st nodeState) *corev1.Node {
		return nodeObject(cfg, st.address, int32(port), st, time.Now())
	}
	provider.interval = cfg.StatusUpdateInterval
	n.provider = provider
	n.checkExisting(ctx)

	// Events are written as the node, which the Node authorizer allows.
	recorder := n.recorder
	if recorder == nil {
		var stop func()
		recorder, stop = NewEventRecorder(ctx, n.client, cfg.Name)
		defer stop()
	}

	// Only this node's pods are watched.
	podFactory := n.podFactory
	if podFactory == nil {
		podFactory = NewPodInformerFactory(n.client, cfg.Name)
	}
	podInformer := podFactory.Core().V1().Pods()
	pc, err := n.newPodController(podInformer, recorder)
	if err != nil {
		_ = ln.Close()
		return fmt.Errorf("node: creating pod controller: %w", err)
	}
	nc, err := vknode.NewNodeController(
		provider,
		nodeObj,
		n.client.CoreV1().Nodes(),
		vknode.WithNodeEnableLeaseV1(nodeutil.NodeLeaseV1Client(n.client), int32(cfg.LeaseDurationSeconds)),
		vknode.WithNodePingTimeout(healthTimeout+5*time.Second),
		vknode.WithNodeStatusUpdateInterval(cfg.StatusUpdateInterval),
		vknode.WithNodeStatusUpdateErrorHandler(n.reregister(port)),
	)
	if err != nil {
		_ = ln.Close()
		return fmt.Errorf("node: creating node controller: %w", err)
	}

	srv := n.newServer(ctx, podInformer, start)
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(tls.NewListener(ln, n.tlsConfig)) }()
	defer func() {
		sctx, scancel := context.WithTimeout(context.Background(), shutdownTimeout)
		defer scancel()
		if srv.Shutdown(sctx) != nil {
			_ = srv.Close()
		}
	}()
	n.mu.Lock()
	n.addr = ln.Addr().String()
	n.mu.Unlock()
	n.log.Info("kubelet API listening", "addr", ln.Addr().String(), "internal_ip", n.address(), "port", port)

	podFactory.Start(ctx.Done())
	defer podFactory.Shutdown()
	go func() { _ = pc.Run(ctx, cfg.Workers) }()
	defer func() { cancel(); <-pc.Done() }()
	select {
	case <-pc.Ready():
	case <-pc.Done():
		return fmt.Errorf("node: pod controller: %w", pc.Err())
	case err := <-serveErr:
		return fmt.Errorf("node: kubelet API: %w", err)
	case <-ctx.Done():
		return nil
	}

	go func() { _ = nc.Run(ctx) }()
	defer func() { cancel(); <-nc.Done() }()
	select {
	case <-nc.Ready():
	case <-nc.Done():
		return fmt.Errorf("node: registering node: %w", nc.Err())
	case err := <-serveErr:
		return fmt.Errorf("node: kubelet API: %w", err)
	case <-ctx.Done():
		return nil
	}
	// The CSINode is owned by the Node, so it is written once the Node
	// is registered, and again when the Node is registered anew.
	csiNodeDone := make(chan struct{})
	go func() { defer close(csiNodeDone); n.runCSINode(ctx) }()
	defer func() { cancel(); <-csiNodeDone }()
	n.log.Info("node ready", "taint", taintString(cfg.taint()), "lease_duration", cfg.leaseDuration(), "zone", cfg.Zone)
	close(n.ready)

	select {
	case <-ctx.Done():
		return nil
	case <-pc.Done():
		return fmt.Errorf("node: pod controller stopped: %w", pc.Err())
	case <-nc.Done():
		return fmt.Errorf("node: node controller stopped: %w", nc.Err())
	case err := <-serveErr:
		return fmt.Errorf("node: kubelet API: %w", err)
	}
}

// newServer builds the kubelet API's server: the routes over the pods and
// podInformer's lister, behind the node's authentication.
func (n *Node) newServer(ctx context.Context, podInformer coreinformers.PodInformer, start time.Time) *http.Server {
	return &http.Server{
		Handler:           withAuth(n.auth, routes(n.pods, podInformer.Lister(), statsRoutes{node: n.cfg.Name, start: start, log: n.log}), n.log),
		ReadHeaderTimeout: 30 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return ctx },
		// TLS handshake failures from scanners are not kip's problem.
		ErrorLog: slog.NewLogLogger(n.log.Handler(), slog.LevelDebug),
	}
}

// newPodController builds virtual-kubelet's PodController over
// podInformer. The PodController insists on ConfigMap, Secret and Service
// informers, which it uses only to resolve environment variables;
// SkipDownwardAPIResolution turns that off, and Run waits only for the pod
// informer to sync (node/podcontroller.go, Run: cache.WaitForCacheSync on
// podsInformer alone). So they come from a factory that is never started:
// nothing lists or watches Secrets, ConfigMaps or Services, which a node
// identity may not do cluster-wide.
func (n *Node) newPodController(podInformer coreinformers.PodInformer, recorder record.EventRecorder) (*vknode.PodController, error) {
	idleFactory := informers.NewSharedInformerFactory(n.client, 0)
	return vknode.NewPodController(vknode.PodControllerConfig{
		PodClient:                                podStatusClient{PodsGetter: n.client.CoreV1(), pods: podInformer.Lister(), ownedPrefix: n.ownedAnnotations},
		PodInformer:                              podInformer,
		EventRecorder:                            recorder,
		Provider:                                 n.pods,
		ConfigMapInformer:                        idleFactory.Core().V1().ConfigMaps(),
		SecretInformer:                           idleFactory.Core().V1().Secrets(),
		ServiceInformer:                          idleFactory.Core().V1().Services(),
		SyncPodsFromKubernetesRateLimiter:        rateLimiter(),
		SyncPodsFromKubernetesShouldRetryFunc:    retryFor(retryWindow),
		DeletePodsFromKubernetesRateLimiter:      rateLimiter(),
		DeletePodsFromKubernetesShouldRetryFunc:  retryFor(retryWindow),
		SyncPodStatusFromProviderRateLimiter:     rateLimiter(),
		SyncPodStatusFromProviderShouldRetryFunc: retryFor(retryWindow),
		SkipDownwardAPIResolution:                true,
	})
}

// checkExisting reports what kip cannot fix itself on a Node registered
// earlier: a node identity may not change its taints, nor set
// kubernetes.io/role (NodeRestriction).
func (n *Node) checkExisting(ctx context.Context) {
	existing, err := n.client.CoreV1().Nodes().Get(ctx, n.cfg.Name, metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		n.log.Debug("reading the existing Node", "error", err)
		return
	}
	if err == nil && missingTaint(existing, n.cfg.taint()) {
		n.log.Warn("the registered Node lacks the configured taint, and a node may not change its own taints; an administrator can add it",
			"taint", taintString(n.cfg.taint()), "command", fmt.Sprintf("kubectl taint node %s %s", n.cfg.Name, taintString(n.cfg.taint())))
	}
	if !n.cfg.SetRoleLabel && (err != nil || existing.Labels[LabelRole] != LabelRoleKip) {
		n.log.Info("not setting "+LabelRole+"="+LabelRoleKip+": NodeRestriction forbids a node to set it on itself; an administrator can add it",
			"command", fmt.Sprintf("kubectl label node %s %s=%s", n.cfg.Name, LabelRole, LabelRoleKip))
	}
}

// reregister creates the Node again when someone deleted it, as the
// kubelet does; other status update errors are returned.
func (n *Node) reregister(port int) vknode.ErrorHandler {
	return func(ctx context.Context, err error) error {
		if !apierrors.IsNotFound(err) {
			return err
		}
		n.log.Warn("the Node was deleted; registering it again")
		_, cerr := n.client.CoreV1().Nodes().Create(ctx, nodeObject(n.cfg, n.address(), int32(port), n.provider.state(), time.Now()), metav1.CreateOptions{})
		if cerr != nil && !apierrors.IsAlreadyExists(cerr) {
			return fmt.Errorf("registering the deleted Node again: %w", cerr)
		}
		// The new Node has a new UID: the CSINode's owner follows.
		n.kickCSINode()
		n.provider.sendAgain()
		return nil
	}
}

// kickCSINode has runCSINode write the CSINode again.
func (n *Node) kickCSINode() {
	select {
	case n.csiNodeKick <- struct{}{}:
	default:
	}
}

// rateLimiter is per-key exponential backoff from 5 ms to 1 min under an
// overall 100 QPS (burst 1000) budget. virtual-kubelet's default is 10 QPS
// (burst 100) with per-key backoff up to 1000 s, which throttles mass
// deletions (pitfall A4.7).
//
// virtual-kubelet queues every new pod and every status kip pushes with
// its key's first delay, so the base is on each pod's path twice (created
// → CreatePod, Running in the cell → Running in the API); 5 ms is
// client-go's and virtual-kubelet's default (it was 50 ms, a quarter of a
// warm pod's start).
func rateLimiter() workqueue.TypedRateLimiter[any] {
	return workqueue.NewTypedMaxOfRateLimiter(
		workqueue.NewTypedItemExponentialFailureRateLimiter[any](rateLimiterBase, time.Minute),
		&workqueue.TypedBucketRateLimiter[any]{Limiter: rate.NewLimiter(rate.Limit(100), 1000)},
	)
}

// retryFor retries a failing key with the rate limiter's backoff until
// window has passed since it was queued.
func retryFor(window time.Duration) vknode.ShouldRetryFunc {
	return func(_ context.Context, key string, timesTried int, originallyAdded time.Time, err error) (*time.Duration, error) {
		if time.Since(originallyAdded) < window {
			return nil, nil
		}
		return nil, fmt.Errorf("giving up on %s after %d tries in %s: %w", key, timesTried, window, err)
	}
}

func taintString(t *corev1.Taint) string {
	if t == nil {
		return "none"
	}
	if t.Value == "" {
		return t.Key + ":" + string(t.Effect)
	}
	return t.Key + "=" + t.Value + ":" + string(t.Effect)
}

// hostIP is the first global unicast IPv4 address of an interface that is
// up.
func hostIP() (string, error) {
	ifaces, err := net.Interfaces()
	if err != nil {
		return "", fmt.Errorf("listing interfaces: %w", err)
	}
	for _, iface := range ifaces {
		if iface.Flags&net.FlagUp == 0 || iface.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, err := iface.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil && ipn.IP.IsGlobalUnicast() {
				return ipn.IP.String(), nil
			}
		}
	}
	return "", errors.New("this host has no global unicast IPv4 address")
}
