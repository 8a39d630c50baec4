//go:build e2e

package scale

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kipcell/kip/test/controlplane"
	"github.com/kipcell/kip/test/e2e/framework"
)

var (
	// f is the run's control plane, its API server auditing the nodes'
	// requests into audit.
	f     *framework.Framework
	audit AuditLog
	// mockBin is virtual-kubelet built from the Go module proxy;
	// mockKubeconfig makes it MockUser.
	mockBin, mockKubeconfig string
	// kipBin holds kip, its plugins and the light cells' commands
	// (framework.BuildBinaries); cells is the containerd and registry
	// StartKip wants (light cells use neither).
	kipBin string
	cells  *framework.Cells
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	// ctx lasts as long as the run: the registry and the simulators'
	// cells live until it ends (a 30-minute ctx closed the registry in
	// the middle of a full pass on a cold cache). go test's -timeout
	// bounds the run, and every wait of the set-up has its own.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir, err := os.MkdirTemp("", "kip-scale-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "scale:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	args, logPath, err := AuditArgs(dir, []string{MockUser})
	if err != nil {
		fmt.Fprintln(os.Stderr, "scale:", err)
		return 1
	}
	audit = AuditLog{Path: logPath}
	f, err = framework.SetupWith(ctx, os.Stderr, func(o *controlplane.Options) {
		o.ExtraArgs = map[string][]string{"kube-apiserver": args}
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "scale: setting up the control plane:", err)
		return 1
	}
	defer func() {
		if err := f.Teardown(); err != nil {
			fmt.Fprintln(os.Stderr, "scale: tearing down the control plane:", err)
		}
	}()
	if mockBin, err = BuildMock(ctx, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "scale: building virtual-kubelet:", err)
		return 1
	}
	if err := ApplyMockRBAC(ctx, filepath.Join(f.Cluster.BinDir, "kubectl"), f.Cluster.Kubeconfig); err != nil {
		fmt.Fprintln(os.Stderr, "scale:", err)
		return 1
	}
	mockKubeconfig = filepath.Join(dir, "kubeconfig-virtual-kubelet")
	if err := f.ServiceAccountKubeconfig(ctx, "default", "virtual-kubelet", mockKubeconfig); err != nil {
		fmt.Fprintln(os.Stderr, "scale:", err)
		return 1
	}
	if kipBin, err = os.MkdirTemp("", "kip-scale-bin-"); err != nil {
		fmt.Fprintln(os.Stderr, "scale:", err)
		return 1
	}
	defer os.RemoveAll(kipBin)
	if err := framework.BuildBinaries(ctx, kipBin); err != nil {
		fmt.Fprintln(os.Stderr, "scale: building kip:", err)
		return 1
	}
	if cells, err = framework.StartCells(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "scale: starting containerd and the registry (run as root after make deps):", err)
		return 1
	}
	defer cells.Stop()
	return m.Run()
}

// TestScale is make bench-scale: for each N of $KIP_SCALE_PODS (default
// "100,300"), and of the nodes $KIP_SCALE_NODES names (default
// "mock,local,aws"), the same burst of N pods through each node, one after the
// other on this control plane, each node a fresh process: virtual-kubelet
// v1.13.0's mock provider, then kip with light cells behind the local
// plugin (kip-local-<n>) and behind the aws plugin and the EC2 simulator
// with no boot delay (kip-aws-<n>). It logs
// each burst's figures and, when $KIP_SCALE_OUT names a directory, writes
// there results.md (the tables of docs/benchmarks.md, with the machine and
// its load), results.json, and scale-<N>.svg, pods Running over time.
func TestScale(t *testing.T) {
	sizes, err := podCounts(os.Getenv("KIP_SCALE_PODS"))
	if err != nil {
		t.Fatal(err)
	}
	kinds, err := nodeKinds(os.Getenv("KIP_SCALE_NODES"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := rest.CopyConfig(f.Config)
	cfg.QPS, cfg.Burst = 2000, 4000
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var (
		results []Result
		loads   []string
		plots   = map[int][]Series{}
	)
	for _, n := range sizes {
		var nodes []Node
		if kinds["mock"] {
			nodes = append(nodes, mockNode(t, n))
		}
		for _, plugin := range []string{framework.PluginLocal, framework.PluginAWS} {
			if kinds[plugin] {
				nodes = append(nodes, kipNode(t, plugin, n))
			}
		}
		for _, node := range nodes {
			t.Run(fmt.Sprintf("%s/pods=%d", node.Name(), n), func(t *testing.T) {
				ns := f.Namespace(t)
				before := loadAverage(t)
				r, err := Run(t.Context(), node, Options{Client: client, Namespace: ns, Pods: n, Image: "registry.k8s.io/pause:3.10", Audit: audit, Logf: t.Logf,
					// The mock's client is throttled to client-go's default 5
					// requests a second: about 3 requests per pod to start,
					// one to delete.
					Timeout: 5*time.Minute + time.Duration(n)*time.Second})
				after := loadAverage(t)
				if err != nil {
					if k, ok := node.(*KipNode); ok {
						t.Logf("last lines of kip's log:\n%s", k.LogTail(80))
					}
					t.Fatal(err)
				}
				if err := f.Client.CoreV1().Nodes().Delete(t.Context(), node.Name(), metav1.DeleteOptions{}); err != nil {
					t.Errorf("deleting node %s: %v", node.Name(), err)
				}
				results = append(results, r)
				line := fmt.Sprintf("%s, %d pods: load average %s before, %s after", r.Node, n, before, after)
				if k, ok := node.(*KipNode); ok {
					line += fmt.Sprintf("; plugin process peak RSS %.0f MiB, CPU %.2f s", float64(k.PluginPeakRSS())/(1<<20), r.Counters[pluginCPU])
					if len(k.Env) > 0 {
						line += "; kip's environment " + strings.Join(k.Env, " ")
					}
				}
				loads = append(loads, line)
				plots[n] = append(plots[n], Series{Name: seriesName(node), Running: r.Running})
				t.Logf("\n%s", Markdown([]Result{r}))
			})
		}
	}
	if out := os.Getenv("KIP_SCALE_OUT"); out != "" && len(results) > 0 {
		writeOut(t, out, results, loads, plots)
	}
}

// mockNode is virtual-kubelet's mock as node mock-<n>.
func mockNode(t *testing.T, n int) *MockNode {
	name := fmt.Sprintf("mock-%d", n)
	dir := filepath.Join(t.TempDir(), name)
	if keep := os.Getenv("KIP_SCALE_OUT"); keep != "" {
		dir = filepath.Join(keep, name)
	}
	return &MockNode{Bin: mockBin, NodeName: name, Kubeconfig: mockKubeconfig, Dir: dir}
}

// kipNode is kip with light cells behind plugin as node kip-<plugin>-<n>;
// with $KIP_SCALE_PROFILE set and $KIP_SCALE_OUT a directory, it serves
// its runtime profiles and Run saves them into <out>/<node>/; with
// $KIP_SCALE_GOMEMLIMIT set, kip runs with that soft memory limit
// (GOMEMLIMIT, e.g. 240MiB) and nothing else does.
func kipNode(t *testing.T, plugin string, n int) *KipNode {
	k := &KipNode{Plugin: plugin, NodeName: fmt.Sprintf("kip-%s-%d", plugin, n), Cells: cells, BinDir: kipBin, Log: testWriter{t}}
	if limit := os.Getenv("KIP_SCALE_GOMEMLIMIT"); limit != "" {
		k.Env = []string{"GOMEMLIMIT=" + limit}
	}
	if out := os.Getenv("KIP_SCALE_OUT"); out != "" && os.Getenv("KIP_SCALE_PROFILE") != "" {
		k.ProfileDir = filepath.Join(out, k.NodeName)
	}
	return k
}

// testWriter writes StartKip's progress to the test's log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func seriesName(node Node) string {
	switch node := node.(type) {
	case *MockNode:
		return "virtual-kubelet mock"
	case *KipNode:
		if node.Plugin == framework.PluginAWS {
			return "kip, aws plugin + EC2 simulator"
		}
		return "kip, local plugin"
	}
	return node.Name()
}

// isMock picks the mock's results, the reference of Ratios.
func isMock(r Result) bool { return strings.HasPrefix(r.Node, "mock-") }

// podCounts parses $KIP_SCALE_PODS: burst sizes separated by commas.
func podCounts(s string) ([]int, error) {
	if s == "" {
		s = "100,300"
	}
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("KIP_SCALE_PODS=%q: %q is not a number of pods", s, f)
		}
		out = append(out, n)
	}
	return out, nil
}

// nodeKinds parses $KIP_SCALE_NODES: which nodes run, of "mock",
// "local" and "aws", separated by commas; empty means all three.
func nodeKinds(s string) (map[string]bool, error) {
	if s == "" {
		s = "mock,local,aws"
	}
	out := map[string]bool{}
	for f := range strings.SplitSeq(s, ",") {
		switch f = strings.TrimSpace(f); f {
		case "mock", framework.PluginLocal, framework.PluginAWS:
			out[f] = true
		default:
			return nil, fmt.Errorf("KIP_SCALE_NODES=%q: %q is none of mock, local, aws", s, f)
		}
	}
	return out, nil
}

// loadAverage is /proc/loadavg's three averages, as uptime prints them.
func loadAverage(t *testing.T) string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(strings.Fields(string(data))[:3], " ")
}

// machine names the CPU model and the number of CPUs.
func machine() string {
	model := "unknown CPU"
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.Lines(string(data)) {
			if name, value, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(name) == "model name" {
				model = strings.TrimSpace(value)
				break
			}
		}
	}
	return fmt.Sprintf("%d × %s (nproc %d)", runtime.NumCPU(), model, runtime.NumCPU())
}

func writeOut(t *testing.T, out string, results []Result, loads []string, plots map[int][]Series) {
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	var md strings.Builder
	fmt.Fprintf(&md, "%s, %s, %s\n\n", time.Now().UTC().Format("2006-01-02 15:04 UTC"), machine(), runtime.Version())
	md.WriteString(Markdown(results))
	md.WriteString("\nkip beside the mock (kip/mock in parentheses):\n\n")
	md.WriteString(Ratios(results, isMock))
	md.WriteString("\n")
	for _, l := range loads {
		md.WriteString("- " + l + "\n")
	}
	if err := os.WriteFile(filepath.Join(out, "results.md"), []byte(md.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	data, err := json.MarshalIndent(results, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(out, "results.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	for n, series := range plots {
		file, err := os.Create(filepath.Join(out, fmt.Sprintf("scale-%d.svg", n)))
		if err != nil {
			t.Fatal(err)
		}
		err = WriteSVG(file, fmt.Sprintf("A burst of %d pods: pods Running over time", n), series)
		if cerr := file.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("results in %s", out)
}
