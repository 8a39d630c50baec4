//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kipcell/kip/host/admin"
	hostcells "github.com/kipcell/kip/host/cells"
	"github.com/kipcell/kip/host/metrics"
	"github.com/kipcell/kip/test/e2e/framework"
)

// metricsNode is the kip node TestMetricsAfterABurst runs, beside the
// shared node "kip", so that its counts are the burst's alone.
const metricsNode = "kip-metrics"

// TestMetricsAfterABurst starts a burst of pods on a kip of their own,
// then reads its admin server: each launch-phase histogram counts the
// burst's pods, the hourly cost is the sum of the prices their placement
// annotations say (an unknown price is counted apart, never guessed),
// /readyz passes with its checks listed, and `kip cells` lists the burst's
// cells Running.
func TestMetricsAfterABurst(t *testing.T) {
	ctx := t.Context()
	mk := startSideKip(t, framework.KipOptions{
		NodeName: metricsNode, Plugin: kip.Plugin, BinDir: kip.BinDir, ClusterID: "e2e-metrics", Network: 3,
	})
	ns := f.Namespace(t)
	t.Cleanup(func() { deletePodsAndCells(t, mk, ns) })

	const burst = 6
	for i := range burst {
		createPod(t, ns, fmt.Sprintf("burst-%d", i), onNode(metricsNode, sleeper()))
	}
	// createPod labels each app=<name>: select the burst by node.
	var pods []corev1.Pod
	f.WaitFor(t, 3*time.Minute, "the burst Running and placed", func(ctx context.Context) (bool, error) {
		list, err := f.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil //nolint:nilerr // try again
		}
		pods = list.Items
		if len(pods) != burst {
			return false, nil
		}
		for i := range pods {
			if !running(&pods[i]) || pods[i].Annotations[hostcells.AnnotationPlacedPrice] == "" {
				return false, nil
			}
		}
		return true, nil
	})

	var want float64
	unknown := 0
	for _, p := range pods {
		price := p.Annotations[hostcells.AnnotationPlacedPrice]
		if price == "unknown" {
			unknown++
			continue
		}
		v, err := strconv.ParseFloat(price, 64)
		if err != nil {
			t.Fatalf("pod %s: placement price %q: %v", p.Name, price, err)
		}
		want += v
	}
	t.Logf("the burst's placements: %d priced at $%g/h in all, %d unknown", burst-unknown, want, unknown)

	got := scrape(t, mk)
	for _, phase := range metrics.Phases {
		name := `kip_launch_phase_seconds_count{phase="` + string(phase) + `"}`
		if got[name] != burst {
			t.Errorf("%s = %v, want the burst's %d", name, got[name], burst)
		}
	}
	cost, unknownGot := sumOf(got, "kip_hourly_cost{"), sumOf(got, "kip_instances_unknown_price{")
	if math.Abs(cost-want) > 1e-9 {
		t.Errorf("kip_hourly_cost sums to %v, want %v: the placements' prices", cost, want)
	}
	if unknownGot != float64(unknown) {
		t.Errorf("kip_instances_unknown_price sums to %v, want %d", unknownGot, unknown)
	}
	if n := got[`kip_cells{phase="Running"}`]; n != burst {
		t.Errorf(`kip_cells{phase="Running"} = %v, want %d`, n, burst)
	}
	if sumOf(got, "kip_plugin_calls_total{") == 0 || sumOf(got, "kip_api_requests_total{") == 0 {
		t.Errorf("no plugin calls or API requests counted")
	}

	code, body := httpGet(t, mk.AdminURL()+"/readyz?verbose", "")
	if code != http.StatusOK || !strings.Contains(body, "[+]api ok") || !strings.Contains(body, "[+]plugin ok") {
		t.Errorf("GET /readyz?verbose = %d %q, want 200 listing api and plugin", code, body)
	}

	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(mk.AdminToken()), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.CommandContext(ctx, filepath.Join(kip.BinDir, "kip"), "cells", "--address", mk.AdminURL(), "--token-file", tokenFile).CombinedOutput()
	if err != nil {
		t.Fatalf("kip cells: %v\n%s", err, out)
	}
	t.Logf("kip cells:\n%s", out)
	for _, p := range pods {
		line := lineWith(string(out), ns+"/"+p.Name+" ")
		if line == "" || !strings.Contains(line, " Running ") || !strings.Contains(line, p.Annotations[hostcells.AnnotationPlacedType]) {
			t.Errorf("kip cells shows pod %s as %q, want it Running on %s", p.Name, line, p.Annotations[hostcells.AnnotationPlacedType])
		}
	}
}

// startSideKip starts a kip of the test's own beside the shared one (its
// progress in the test's log), and when the test ends stops it and
// deletes its Node and Lease (its log's last lines first, if the test
// failed).
func startSideKip(t testing.TB, opts framework.KipOptions) *framework.Kip {
	t.Helper()
	opts.Log = testWriter{t}
	k, err := f.StartKip(t.Context(), cells, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("last lines of %s's log (%s):\n%s", opts.NodeName, k.LogPath, k.LogTail(120))
		}
		k.Stop()
		bg := context.Background() //nolint:usetesting // a Cleanup: t.Context() has ended
		_ = f.Client.CoreV1().Nodes().Delete(bg, opts.NodeName, metav1.DeleteOptions{})
		_ = f.Client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Delete(bg, opts.NodeName, metav1.DeleteOptions{})
	})
	return k
}

// scrape reads k's /metrics into its samples, by name and labels as
// written, with k's admin token as Prometheus sends its own.
func scrape(t testing.TB, k *framework.Kip) map[string]float64 {
	t.Helper()
	url := k.AdminURL() + admin.PathMetrics
	code, body := httpGet(t, url, k.AdminToken())
	if code != http.StatusOK {
		t.Fatalf("GET %s = %d", url, code)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("GET %s: line %q: %v", url, line, err)
		}
		out[line[:i]] = v
	}
	return out
}

// sumOf is the sum of the samples whose name{labels} starts with prefix.
func sumOf(samples map[string]float64, prefix string) float64 {
	var sum float64
	for name, v := range samples {
		if strings.HasPrefix(name, prefix) {
			sum += v
		}
	}
	return sum
}

// httpGet GETs url with token as its bearer token ("": none) and returns
// the status code and the body.
func httpGet(t testing.TB, url, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		b.WriteString(sc.Text() + "\n")
	}
	return resp.StatusCode, b.String()
}

// lineWith is the first line of text that contains s (its fields joined
// by single spaces), or "".
func lineWith(text, s string) string {
	for _, line := range strings.Split(text, "\n") {
		line = strings.Join(strings.Fields(line), " ") + " "
		if strings.Contains(line, s) {
			return line
		}
	}
	return ""
}
