package framework

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kipcell/kip/test/controlplane"
	"github.com/kipcell/kip/test/kubeletnode"
)

// Framework is one control plane shared by every test of a run.
type Framework struct {
	Cluster *controlplane.Cluster
	// Config and Client act as cluster-admin.
	Config *rest.Config
	Client kubernetes.Interface

	nsCounter atomic.Int64
	// infra is the kubelet node InfraNode started, if any.
	infraMu sync.Mutex
	infra   *kubeletnode.Node
}

// Setup builds the control plane (a no-op when cached) and starts it in a
// fresh temporary state directory. Progress goes to log.
func Setup(ctx context.Context, log io.Writer) (*Framework, error) {
	return SetupWith(ctx, log, nil)
}

// SetupWith is Setup with the control plane's options edited by edit (nil:
// not) before it starts: test/scale adds the API server's audit flags.
func SetupWith(ctx context.Context, log io.Writer, edit func(*controlplane.Options)) (*Framework, error) {
	bin, err := controlplane.Build(ctx, controlplane.BuildOptions{Log: log})
	if err != nil {
		return nil, fmt.Errorf("building control plane: %w", err)
	}
	state, err := os.MkdirTemp("", "kip-e2e-")
	if err != nil {
		return nil, fmt.Errorf("creating state directory: %w", err)
	}
	// A /16 of Services: room for the services benchmark's thousand.
	opts := controlplane.Options{StateDir: state, BinDir: bin, NodeNames: []string{}, ServiceCIDR: "10.0.0.0/16", Log: log}
	if edit != nil {
		edit(&opts)
	}
	c, err := controlplane.Start(ctx, opts)
	if err != nil {
		_ = os.RemoveAll(state)
		return nil, fmt.Errorf("starting control plane: %w", err)
	}
	fw, err := FromCluster(c)
	if err != nil {
		_ = c.Stop()
		return nil, err
	}
	return fw, nil
}

// Teardown stops the kubelet node (InfraNode) and the control plane and
// removes its state directory.
func (f *Framework) Teardown() error {
	if err := f.stopInfra(); err != nil {
		return err
	}
	if err := f.Cluster.Stop(); err != nil {
		return err
	}
	return os.RemoveAll(f.Cluster.StateDir)
}

// NodeClient returns a client acting as system:node:<name> (Node authorizer
// and NodeRestriction apply), writing the node's kubeconfig if needed.
func (f *Framework) NodeClient(t testing.TB, name string) (kubernetes.Interface, string) {
	t.Helper()
	path, err := f.Cluster.AddNode(name)
	if err != nil {
		t.Fatalf("creating node identity %s: %v", name, err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatalf("loading kubeconfig of node %s: %v", name, err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatalf("creating client for node %s: %v", name, err)
	}
	return client, path
}

// Namespace creates a namespace for t, waits for its default service
// account (pods cannot be created before it exists), deletes it when t
// ends, and dumps its events, pods and the control plane logs if t failed.
func (f *Framework) Namespace(t testing.TB) string {
	t.Helper()
	// A namespace name is a DNS label: anything of the test's name
	// (sub-test separators, "pods=20") that cannot be in one becomes "-".
	prefix := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			return r
		}
		return '-'
	}, strings.ToLower(t.Name()))
	if len(prefix) > 40 {
		prefix = prefix[:40]
	}
	name := fmt.Sprintf("%s-%d", strings.Trim(prefix, "-"), f.nsCounter.Add(1))
	ctx := t.Context()
	if _, err := f.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating namespace %s: %v", name, err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			f.Dump(t, name)
		}
		err := f.Client.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{}) //nolint:usetesting // a Cleanup: t.Context() has ended
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting namespace %s: %v", name, err)
		}
	})
	f.WaitFor(t, 30*time.Second, "service account default/"+name, func(ctx context.Context) (bool, error) {
		_, err := f.Client.CoreV1().ServiceAccounts(name).Get(ctx, "default", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	})
	return name
}

// WaitFor polls cond every 200 ms until it returns true, and fails t with
// what it was waiting for when timeout passes or cond returns an error
// other than a transient API error.
func (f *Framework) WaitFor(t testing.TB, timeout time.Duration, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	// Not t.Context(): Cleanups wait with WaitFor too (settle in aws_test.go).
	if err := Poll(context.Background(), timeout, cond); err != nil { //nolint:usetesting // see above
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// Poll calls cond every 200 ms until it returns true, an error that is not
// a transient API error, or timeout passes.
func Poll(ctx context.Context, timeout time.Duration, cond func(ctx context.Context) (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	var lastErr error
	for {
		ok, err := cond(ctx)
		if err != nil && ctx.Err() != nil {
			err = nil // cut short by the deadline: report the timeout below
		}
		switch {
		case err == nil && ok:
			return nil
		case err != nil && !transient(err):
			return err
		case err != nil:
			lastErr = err
		}
		select {
		case <-ctx.Done():
			if lastErr != nil {
				return fmt.Errorf("timed out after %s (last error: %w)", timeout, lastErr)
			}
			return fmt.Errorf("timed out after %s", timeout)
		case <-tick.C:
		}
	}
}

func transient(err error) bool {
	return apierrors.IsConflict(err) || apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) ||
		apierrors.IsTooManyRequests(err) || apierrors.IsServiceUnavailable(err) || apierrors.IsInternalError(err) ||
		strings.Contains(err.Error(), "connection refused")
}

// FromCluster builds a Framework on a control plane that is already
// running (kip-cluster up), for tools such as the demo.
func FromCluster(c *controlplane.Cluster) (*Framework, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("loading admin kubeconfig: %w", err)
	}
	// client-go's default of 5 QPS (burst 10) would hold a test's 20th
	// pod create for two seconds, which benchmarks would count as kip's.
	cfg.QPS, cfg.Burst = 200, 400
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating admin client: %w", err)
	}
	return &Framework{Cluster: c, Config: cfg, Client: client}, nil
}
