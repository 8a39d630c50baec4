//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/node/api"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"github.com/kipcell/kip/host/node"
	"github.com/kipcell/kip/host/node/nodetest"
)

// testLog writes the node's log to the test's log until the test ends.
type testLog struct {
	mu   sync.Mutex
	t    testing.TB
	done bool
}

func (l *testLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.done {
		l.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

// runningNode is a kip node run in the test process with a real
// system:node identity, backed by the nodetest fake.
type runningNode struct {
	*node.Node
	name   string
	pods   *nodetest.Pods
	client kubernetes.Interface // the node's own identity
	port   int
}

// nodeConfig is the e2e configuration of a node called name: the kubelet
// API on a free loopback port, client certificates from the cluster CA (the
// API server's kubelet client certificate is signed by it), a short lease.
func nodeConfig(name string) node.Config {
	cfg := node.DefaultConfig(name)
	cfg.InternalIP = "127.0.0.1"
	cfg.ListenAddress = "127.0.0.1:0"
	cfg.ClientCAFile = f.Cluster.CAFile
	cfg.LeaseDurationSeconds = 8
	cfg.Capacity = node.Capacity{CPU: "64", Memory: "256Gi", Pods: "50"}
	cfg.Version = "e2e"
	return cfg
}

// nodeIdentity is a client acting as system:node:<name>, with kip's
// client rate limits.
func nodeIdentity(t *testing.T, name string) kubernetes.Interface {
	t.Helper()
	_, kubeconfig := f.NodeClient(t, name)
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	client, err := kubernetes.NewForConfig(node.ClientConfig(rc))
	if err != nil {
		t.Fatal(err)
	}
	return client
}

// startNode runs a node until the test ends, then deletes its Node and
// Lease.
func startNode(t *testing.T, cfg node.Config) *runningNode {
	t.Helper()
	client := nodeIdentity(t, cfg.Name)
	pods := nodetest.New()
	tl := &testLog{t: t}
	n, err := node.New(client, pods, cfg, slog.New(slog.NewTextHandler(tl, &slog.HandlerOptions{Level: slog.LevelInfo})))
	if err != nil {
		t.Fatalf("node.New: %v", err)
	}
	// Not t.Context(): the node serves until its Cleanup below, through the
	// test's own later Cleanups (the deletion of its namespace's pods).
	ctx, cancel := context.WithCancel(context.Background()) //nolint:usetesting // see above
	go func() { _ = n.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-n.Done()
		if err := n.Err(); err != nil {
			t.Errorf("node %s Run: %v", cfg.Name, err)
		}
		tl.mu.Lock()
		tl.done = true
		tl.mu.Unlock()
		bg := context.Background() //nolint:usetesting // a Cleanup: t.Context() has ended
		_ = f.Client.CoreV1().Nodes().Delete(bg, cfg.Name, metav1.DeleteOptions{})
		_ = f.Client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Delete(bg, cfg.Name, metav1.DeleteOptions{})
	})
	wctx, wcancel := context.WithTimeout(ctx, 60*time.Second)
	defer wcancel()
	if err := n.WaitReady(wctx); err != nil {
		t.Fatalf("node %s not ready: %v", cfg.Name, err)
	}
	_, portStr, err := net.SplitHostPort(n.Addr())
	if err != nil {
		t.Fatalf("node %s address %q: %v", cfg.Name, n.Addr(), err)
	}
	var port int
	if _, err := fmt.Sscan(portStr, &port); err != nil {
		t.Fatalf("node %s port %q: %v", cfg.Name, portStr, err)
	}
	return &runningNode{Node: n, name: cfg.Name, pods: pods, client: client, port: port}
}

// TestNodeRegisters checks the Node a node identity registers: Ready, the
// taint, labels (without kubernetes.io/role, which NodeRestriction
// forbids), capacity, addresses and the kubelet endpoint; and that its
// Lease is renewed.
func TestNodeRegisters(t *testing.T) {
	rn := startNode(t, nodeConfig("e2e-node-reg"))

	var got *corev1.Node
	f.WaitFor(t, 30*time.Second, "node Ready", func(ctx context.Context) (bool, error) {
		n, err := f.Client.CoreV1().Nodes().Get(ctx, rn.name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		got = n
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady {
				return c.Status == corev1.ConditionTrue, nil
			}
		}
		return false, nil
	})
	for k, v := range map[string]string{"type": "virtual-kubelet", "kubernetes.io/hostname": rn.name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"} {
		if got.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, got.Labels[k], v)
		}
	}
	if _, ok := got.Labels["kubernetes.io/role"]; ok {
		t.Errorf("a node identity set kubernetes.io/role: %v", got.Labels)
	}
	// The node lifecycle controller may add node.kubernetes.io/not-ready
	// for a moment; kip's taint must be there.
	wantTaint := corev1.Taint{Key: "virtual-kubelet.io/provider", Value: "kip", Effect: corev1.TaintEffectNoSchedule}
	hasTaint := false
	for _, taint := range got.Spec.Taints {
		hasTaint = hasTaint || taint.MatchTaint(&wantTaint) && taint.Value == "kip"
	}
	if !hasTaint {
		t.Errorf("taints = %v, want %v among them", got.Spec.Taints, wantTaint)
	}
	for r, want := range map[corev1.ResourceName]string{corev1.ResourceCPU: "64", corev1.ResourceMemory: "256Gi", corev1.ResourcePods: "50"} {
		q := got.Status.Capacity[r]
		a := got.Status.Allocatable[r]
		if q.String() != want || a.String() != want {
			t.Errorf("%s capacity %s allocatable %s, want %s", r, q.String(), a.String(), want)
		}
	}
	if ep := got.Status.DaemonEndpoints.KubeletEndpoint.Port; int(ep) != rn.port || rn.port == 0 {
		t.Errorf("kubelet endpoint port = %d, want the listening port %d", ep, rn.port)
	}
	var internal string
	for _, a := range got.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			internal = a.Address
		}
	}
	if internal != "127.0.0.1" {
		t.Errorf("addresses = %v, want InternalIP 127.0.0.1", got.Status.Addresses)
	}
	if v := got.Status.NodeInfo.KubeletVersion; v != "kip/e2e" {
		t.Errorf("kubelet version = %q, want kip/e2e", v)
	}

	var lease *coordinationv1.Lease
	f.WaitFor(t, 20*time.Second, "node lease", func(ctx context.Context) (bool, error) {
		l, err := f.Client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, rn.name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		lease = l
		return err == nil, err
	})
	if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity != rn.name || lease.Spec.RenewTime == nil {
		t.Fatalf("lease spec = %+v", lease.Spec)
	}
	if len(lease.OwnerReferences) != 1 || lease.OwnerReferences[0].Kind != "Node" || lease.OwnerReferences[0].UID != got.UID {
		t.Errorf("lease owner references = %+v, want the Node", lease.OwnerReferences)
	}
	first := lease.Spec.RenewTime.Time
	f.WaitFor(t, 20*time.Second, "lease renewal", func(ctx context.Context) (bool, error) {
		l, err := f.Client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, rn.name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return l.Spec.RenewTime != nil && l.Spec.RenewTime.After(first), nil
	})
}

// TestNodeRoleLabelForbiddenToNodeIdentity documents the decision in
// host/node/doc.go: with SetRoleLabel a node identity cannot register.
func TestNodeRoleLabelForbiddenToNodeIdentity(t *testing.T) {
	name := "e2e-node-role"
	cfg := nodeConfig(name)
	cfg.SetRoleLabel = true
	n, err := node.New(nodeIdentity(t, name), nodetest.New(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	t.Cleanup(func() {
		_ = f.Client.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}) //nolint:usetesting // a Cleanup: t.Context() has ended
	})
	err = n.Run(ctx)
	if err == nil || !strings.Contains(err.Error(), "kubernetes.io/role") {
		t.Errorf("Run with SetRoleLabel as system:node:%s = %v, want NodeRestriction's refusal of kubernetes.io/role", name, err)
	}
}

// TestNodePods drives a pod through the node: scheduling to CreatePod,
// pushed status, kubectl logs and exec through the API server, the kubelet
// API's authentication and authorization, and deletion.
func TestNodePods(t *testing.T) {
	ctx := t.Context()
	rn := startNode(t, nodeConfig("e2e-node-pods"))
	ns := f.Namespace(t)

	f.CreatePod(t, ns, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: corev1.PodSpec{
			NodeSelector:                  map[string]string{"type": "virtual-kubelet", "kubernetes.io/hostname": rn.name},
			Tolerations:                   []corev1.Toleration{{Key: "virtual-kubelet.io/provider", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
			Containers:                    []corev1.Container{{Name: "c", Image: "registry.invalid/web:1", Env: []corev1.EnvVar{{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}}}}},
			TerminationGracePeriodSeconds: ptr.To[int64](5),
		},
	})
	f.WaitFor(t, 60*time.Second, "CreatePod", func(context.Context) (bool, error) {
		return rn.pods.Called(nodetest.OpCreate, ns, "web"), nil
	})
	created, err := rn.pods.GetPod(ctx, ns, "web")
	if err != nil {
		t.Fatal(err)
	}
	if env := created.Spec.Containers[0].Env[0]; env.ValueFrom == nil || env.Value != "" {
		t.Errorf("the env reached CreatePod resolved (%+v); SkipDownwardAPIResolution leaves it to the host", env)
	}

	// The status the fake pushes appears in the API.
	if err := rn.pods.Run(ns, "web", "10.244.7.9"); err != nil {
		t.Fatal(err)
	}
	f.WaitFor(t, 15*time.Second, "pushed status Running with the pod IP", func(ctx context.Context) (bool, error) {
		p, err := f.Client.CoreV1().Pods(ns).Get(ctx, "web", metav1.GetOptions{})
		return err == nil && p.Status.Phase == corev1.PodRunning && p.Status.PodIP == "10.244.7.9", err
	})

	kubectl := func(args ...string) (string, error) {
		cmd := exec.Command(filepath.Join(f.Cluster.BinDir, "kubectl"), args...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		return out.String(), err
	}
	admin := []string{"--kubeconfig", f.Cluster.Kubeconfig, "-n", ns}

	t.Run("logs", func(t *testing.T) {
		rn.pods.SetLog(ns, "web", "c", "hello from a fake cell\nsecond line\n")
		out, err := kubectl(append(admin, "logs", "web", "-c", "c")...)
		if err != nil || out != "hello from a fake cell\nsecond line\n" {
			t.Errorf("kubectl logs = %q, %v; want the fake's text", out, err)
		}
	})

	t.Run("exec", func(t *testing.T) {
		rn.pods.SetExec(func(_ context.Context, _, _, _ string, cmd []string, attach api.AttachIO) error {
			fmt.Fprintf(attach.Stdout(), "ran %s\n", strings.Join(cmd, " "))
			return node.ExitCode(3)
		})
		out, err := kubectl(append(admin, "exec", "web", "-c", "c", "--", "sh", "-c", "exit 3")...)
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 3 {
			t.Errorf("kubectl exec error = %v, want exit code 3 (output %q)", err, out)
		}
		if !strings.Contains(out, "ran sh -c exit 3") {
			t.Errorf("kubectl exec output = %q, want the command's output", out)
		}
		if !rn.pods.Called(nodetest.OpExec, ns, "web") {
			t.Error("RunInContainer was not called")
		}
	})

	kubeletURL := fmt.Sprintf("https://127.0.0.1:%d/containerLogs/%s/web/c", rn.port, ns)
	insecure := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	get := func(t *testing.T, token string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, kubeletURL, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := insecure.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", kubeletURL, err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}

	t.Run("kubelet API without credentials is 401", func(t *testing.T) {
		if code, body := get(t, ""); code != http.StatusUnauthorized {
			t.Errorf("GET without credentials = %d %q, want 401", code, body)
		}
	})

	t.Run("user without RBAC on nodes/proxy is forbidden", func(t *testing.T) {
		token := serviceAccountToken(t, ns, "nobody")
		noCreds := filepath.Join(t.TempDir(), "kubeconfig")
		if err := os.WriteFile(noCreds, []byte("apiVersion: v1\nkind: Config\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		out, err := kubectl("--kubeconfig", noCreds, "--server", f.Config.Host, "--certificate-authority", f.Cluster.CAFile,
			"--token", token, "-n", ns, "logs", "web", "-c", "c")
		if err == nil || !strings.Contains(out, "Forbidden") && !strings.Contains(out, "forbidden") {
			t.Errorf("kubectl logs without RBAC = %q, %v; want Forbidden", out, err)
		}
		// The kubelet API itself checks too: the token authenticates
		// (TokenReview) and the SubjectAccessReview on nodes/proxy denies.
		if code, body := get(t, token); code != http.StatusForbidden {
			t.Errorf("GET with the token of a user without nodes/proxy = %d %q, want 403", code, body)
		}
	})

	t.Run("user with RBAC on nodes/proxy is allowed", func(t *testing.T) {
		sa := "proxy-reader"
		token := serviceAccountToken(t, ns, sa)
		// Grant first and wait until RBAC has caught up: the kubelet API
		// caches a denial for 30 s.
		role := &rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: ns + "-nodes-proxy"},
			Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"nodes/proxy"}, Verbs: []string{"get"}}},
		}
		if _, err := f.Client.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		binding := &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: role.Name},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role.Name},
			Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: ns, Name: sa}},
		}
		if _, err := f.Client.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			bg := context.Background() //nolint:usetesting // a Cleanup: t.Context() has ended
			_ = f.Client.RbacV1().ClusterRoleBindings().Delete(bg, role.Name, metav1.DeleteOptions{})
			_ = f.Client.RbacV1().ClusterRoles().Delete(bg, role.Name, metav1.DeleteOptions{})
		})
		f.WaitFor(t, 20*time.Second, "RBAC allowing nodes/proxy", func(ctx context.Context) (bool, error) {
			sar, err := f.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
				Spec: authorizationv1.SubjectAccessReviewSpec{
					User:   "system:serviceaccount:" + ns + ":" + sa,
					Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
					ResourceAttributes: &authorizationv1.ResourceAttributes{
						Verb: "get", Resource: "nodes", Subresource: "proxy", Name: rn.name,
					},
				},
			}, metav1.CreateOptions{})
			return err == nil && sar.Status.Allowed, err
		})
		if code, body := get(t, token); code != http.StatusOK || !strings.Contains(body, "hello from a fake cell") {
			t.Errorf("GET with the token of a user with nodes/proxy = %d %q, want 200 and the log", code, body)
		}
	})

	t.Run("delete", func(t *testing.T) {
		if err := f.Client.CoreV1().Pods(ns).Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		f.WaitFor(t, 30*time.Second, "DeletePod", func(context.Context) (bool, error) {
			return rn.pods.Called(nodetest.OpDelete, ns, "web"), nil
		})
		f.WaitFor(t, 30*time.Second, "pod gone from the API", func(ctx context.Context) (bool, error) {
			_, err := f.Client.CoreV1().Pods(ns).Get(ctx, "web", metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return true, nil
			}
			return false, err
		})
	})
}

// serviceAccountToken creates a service account and mints a token for it
// with the TokenRequest API.
func serviceAccountToken(t *testing.T, ns, name string) string {
	t.Helper()
	ctx := t.Context()
	if _, err := f.Client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating service account %s: %v", name, err)
	}
	tr, err := f.Client.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("requesting a token for %s: %v", name, err)
	}
	return tr.Status.Token
}
