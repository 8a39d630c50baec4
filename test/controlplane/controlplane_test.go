package controlplane

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestPKI(t *testing.T) {
	c := &Cluster{StateDir: t.TempDir(), APIServerURL: "https://127.0.0.1:6443"}
	if err := os.MkdirAll(filepath.Join(c.StateDir, "pki"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := c.writePKI(Options{NodeNames: []string{"kip"}, ServiceCIDR: "10.0.0.0/24"}); err != nil {
		t.Fatalf("writePKI: %v", err)
	}
	ca := readCert(t, filepath.Join(c.StateDir, "pki", "ca.crt"))
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	tests := []struct {
		file     string
		cn       string
		org      string
		usage    x509.ExtKeyUsage
		dnsOrIP  string
		verifies bool
	}{
		{file: "apiserver", cn: "kube-apiserver", usage: x509.ExtKeyUsageServerAuth, dnsOrIP: "10.0.0.1", verifies: true},
		{file: "admin", cn: "admin", org: "system:masters", usage: x509.ExtKeyUsageClientAuth, verifies: true},
		{file: "node-kip", cn: "system:node:kip", org: "system:nodes", usage: x509.ExtKeyUsageClientAuth, verifies: true},
		{file: "front-proxy-client", cn: "front-proxy-client", usage: x509.ExtKeyUsageClientAuth, verifies: false},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			cert := readCert(t, filepath.Join(c.StateDir, "pki", tt.file+".crt"))
			if cert.Subject.CommonName != tt.cn {
				t.Errorf("CN = %q, want %q", cert.Subject.CommonName, tt.cn)
			}
			if tt.org != "" && (len(cert.Subject.Organization) != 1 || cert.Subject.Organization[0] != tt.org) {
				t.Errorf("O = %v, want %s", cert.Subject.Organization, tt.org)
			}
			_, err := cert.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{tt.usage}})
			if (err == nil) != tt.verifies {
				t.Errorf("verify against the cluster CA = %v, want verifies=%t", err, tt.verifies)
			}
			if tt.dnsOrIP != "" {
				if err := cert.VerifyHostname(tt.dnsOrIP); err != nil {
					t.Errorf("serving cert does not cover %s: %v", tt.dnsOrIP, err)
				}
			}
		})
	}
	// A second run reuses every file, so handed-out kubeconfigs stay valid.
	before, _ := os.ReadFile(filepath.Join(c.StateDir, "pki", "ca.crt"))
	if err := c.writePKI(Options{NodeNames: []string{"kip", "other"}, ServiceCIDR: "10.0.0.0/24"}); err != nil {
		t.Fatal(err)
	}
	after, _ := os.ReadFile(filepath.Join(c.StateDir, "pki", "ca.crt"))
	if string(before) != string(after) {
		t.Error("restart regenerated the CA")
	}
	kc, err := os.ReadFile(c.NodeKubeconfig("other"))
	if err != nil || !strings.Contains(string(kc), "system:node:other") || !strings.Contains(string(kc), "https://127.0.0.1:6443") {
		t.Errorf("node kubeconfig = %v %q", err, kc)
	}

	// A state directory from before the machine had an advertised
	// address: the API server's certificate is made again to name it
	// (pods reach the API server there), under the same CA; the others
	// stay.
	adminBefore, _ := os.ReadFile(filepath.Join(c.StateDir, "pki", "admin.crt"))
	if err := c.writePKI(Options{NodeNames: []string{"kip"}, ServiceCIDR: "10.0.0.0/24", AdvertiseAddress: "192.0.2.7"}); err != nil {
		t.Fatal(err)
	}
	serving := readCert(t, filepath.Join(c.StateDir, "pki", "apiserver.crt"))
	if err := serving.VerifyHostname("192.0.2.7"); err != nil {
		t.Errorf("the API server's certificate after the address was added: %v", err)
	}
	if _, err := serving.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		t.Errorf("the new serving certificate does not verify against the kept CA: %v", err)
	}
	if adminAfter, _ := os.ReadFile(filepath.Join(c.StateDir, "pki", "admin.crt")); string(adminBefore) != string(adminAfter) {
		t.Error("adding an address regenerated the admin certificate")
	}
}

func readCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := pem.Decode(data)
	if b == nil {
		t.Fatalf("%s is not PEM", path)
	}
	cert, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

func TestScratchGoMod(t *testing.T) {
	kubeMod := []byte("module k8s.io/kubernetes\n\ngo 1.26.0\n\nreplace (\n\tk8s.io/api => ./staging/src/k8s.io/api\n\tk8s.io/client-go => ./staging/src/k8s.io/client-go\n\tgithub.com/x/y => github.com/x/y v1.0.0\n)\n")
	got := string(scratchGoMod(kubeMod, "v1.36.3"))
	for _, want := range []string{"go 1.26.0", "require k8s.io/kubernetes v1.36.3", "k8s.io/api => k8s.io/api v0.36.3", "k8s.io/client-go => k8s.io/client-go v0.36.3"} {
		if !strings.Contains(got, want) {
			t.Errorf("scratch go.mod lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "github.com/x/y") {
		t.Errorf("scratch go.mod copies a non-staging replace:\n%s", got)
	}
}

func TestBuildRejectsBadVersion(t *testing.T) {
	_, err := Build(t.Context(), BuildOptions{KubeVersion: "latest", CacheDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), `"latest"`) {
		t.Errorf("Build(latest) = %v, want an error naming the version", err)
	}
}

func TestPickPortsRefusesBusyPort(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	busy := l.Addr().(*net.TCPAddr).Port
	_, err = pickPorts(Ports{APIServer: busy})
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("port %d for kube-apiserver is in use", busy)) {
		t.Errorf("pickPorts with a busy port = %v", err)
	}
	p, err := pickPorts(Ports{})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, port := range []int{p.Etcd, p.EtcdPeer, p.APIServer, p.Scheduler, p.ControllerManager} {
		if port == 0 || seen[port] {
			t.Errorf("pickPorts gave %+v: zero or repeated port", p)
		}
		seen[port] = true
	}
}

// fakeBinDir makes a BinDir whose components are shell scripts.
func fakeBinDir(t *testing.T, scripts map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for _, b := range Binaries {
		body, ok := scripts[b]
		if !ok {
			body = "exec sleep 300"
		}
		if err := os.WriteFile(filepath.Join(dir, b), []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestStartFailures(t *testing.T) {
	tests := []struct {
		name    string
		scripts map[string]string
		timeout time.Duration
		want    []string
	}{
		{
			name:    "component exits during start-up",
			scripts: map[string]string{"etcd": `echo "etcd: cannot open data dir: permission denied" >&2; exit 1`},
			timeout: 20 * time.Second,
			want:    []string{"etcd exited during start-up", "etcd.log", "cannot open data dir: permission denied"},
		},
		{
			name:    "component never ready",
			scripts: map[string]string{"etcd": `echo "waiting for quorum"; exec sleep 300`},
			timeout: time.Second,
			want:    []string{"etcd not ready after 1s", "waiting for quorum"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			state := t.TempDir()
			_, err := Start(t.Context(), Options{StateDir: state, BinDir: fakeBinDir(t, tt.scripts), ReadyTimeout: tt.timeout})
			var serr *Error
			if !errors.As(err, &serr) {
				t.Fatalf("Start = %v, want a *controlplane.Error", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
			// Nothing it started may be left running.
			for _, name := range Components {
				if pid, ok := RunningPID(state, filepath.Join(state, "pids", name+".pid")); ok {
					t.Errorf("%s (pid %d) left running after a failed start", name, pid)
				}
			}
		})
	}
}

func TestStartRefusesRunningStateAndClearsStale(t *testing.T) {
	state := t.TempDir()
	if err := os.MkdirAll(filepath.Join(state, "pids"), 0o700); err != nil {
		t.Fatal(err)
	}
	// A live process whose command line names the state directory.
	cmd := exec.Command("sh", "-c", "sleep 300", "sh", "--data-dir="+state+"/etcd-data")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	kill := func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); _ = cmd.Wait() }
	t.Cleanup(kill)
	pidFile := filepath.Join(state, "pids", "etcd.pid")
	if err := os.WriteFile(pidFile, []byte(fmt.Sprint(cmd.Process.Pid)), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := fakeBinDir(t, nil)
	_, err := Start(t.Context(), Options{StateDir: state, BinDir: bin, ReadyTimeout: time.Second})
	if !errors.Is(err, ErrRunning) || !strings.Contains(err.Error(), "make cluster-down") {
		t.Fatalf("Start on a running state dir = %v, want ErrRunning with advice", err)
	}

	// Once that process is gone, its PID file is stale and is cleared.
	kill()
	if err := clearStalePIDs(state); err != nil {
		t.Fatalf("clearStalePIDs after the process died: %v", err)
	}
	if _, err := os.Stat(pidFile); !os.IsNotExist(err) {
		t.Errorf("stale PID file still there: %v", err)
	}
}

func TestStartNeedsBinaries(t *testing.T) {
	_, err := Start(t.Context(), Options{StateDir: t.TempDir(), BinDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "has no etcd") {
		t.Errorf("Start with an empty BinDir = %v, want it to name the missing binary", err)
	}
}

func TestStopWithNothingRunning(t *testing.T) {
	if err := Stop(t.TempDir(), time.Second); err != nil {
		t.Errorf("Stop of an empty state dir = %v", err)
	}
}

// fakeGo puts a go command first on PATH that reports toolchain, serves
// Kubernetes' go.mod (go 1.26.0) for go mod download, the etcd version
// for go list -m, accepts go get, refuses anything else, and appends
// "$1 $2" of each call to the returned file.
func fakeGo(t *testing.T, toolchain string) (calls string) {
	t.Helper()
	dir := t.TempDir()
	gomod := filepath.Join(dir, "kubernetes.mod")
	if err := os.WriteFile(gomod, []byte("module k8s.io/kubernetes\n\ngo 1.26.0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	calls = filepath.Join(dir, "calls")
	script := fmt.Sprintf(`#!/bin/sh
echo "$1 $2" >> %s
case "$1 $2" in
  "env GOVERSION") echo %s ;;
  "mod download") echo '{"Path":"k8s.io/kubernetes","Version":"v1.36.3","GoMod":"%s"}' ;;
  "list -m") echo v3.6.8 ;;
  get*) ;;
  *) echo "unexpected: go $*" >&2; exit 1 ;;
esac
`, calls, toolchain, gomod)
	if err := os.WriteFile(filepath.Join(dir, "go"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	return calls
}

// TestBuildRefusesOldGo puts a fake `go` first on PATH that reports an old
// toolchain, and checks Build names both versions instead of failing in
// the middle of a nine-minute build.
func TestBuildRefusesOldGo(t *testing.T) {
	fakeGo(t, "go1.24.2")
	_, err := Build(t.Context(), BuildOptions{KubeVersion: "v1.36.3", CacheDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "needs Go 1.26.0 or newer") || !strings.Contains(err.Error(), "go1.24.2") {
		t.Errorf("Build with Go 1.24 = %v, want an error naming both versions", err)
	}
}

// TestResolveBuildsNothing runs Resolve and ResolveNode against a fake go
// that records its calls: the control plane's and the kubelet's modules
// are resolved (go get of their commands, and of the etcd Kubernetes
// pins), only the kubelet's by ResolveNode (make demo runs it beside the
// control plane's build, which holds the control plane's lock), and
// nothing is compiled.
func TestResolveBuildsNothing(t *testing.T) {
	tests := []struct {
		name    string
		resolve func(context.Context, BuildOptions) error
		want    []string
		dirs    []string // under the version's cache directory
	}{
		{
			name: "Resolve", resolve: Resolve,
			want: []string{
				"get k8s.io/kubernetes/cmd/kube-apiserver@v1.36.3", "get go.etcd.io/etcd/server/v3@v3.6.8", // the control plane
				"get k8s.io/kubernetes/cmd/kubelet@v1.36.3", // the node
			},
			dirs: []string{"src", filepath.Join("node", "src")},
		},
		{
			name: "ResolveNode", resolve: ResolveNode,
			want: []string{"get k8s.io/kubernetes/cmd/kubelet@v1.36.3"},
			dirs: []string{filepath.Join("node", "src")},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls := fakeGo(t, "go1.26.8")
			cache := t.TempDir()
			if err := tt.resolve(t.Context(), BuildOptions{KubeVersion: "v1.36.3", CacheDir: cache}); err != nil {
				t.Fatalf("%s: %v", tt.name, err)
			}
			data, err := os.ReadFile(calls)
			if err != nil {
				t.Fatal(err)
			}
			var gets []string
			for line := range strings.SplitSeq(strings.TrimSpace(string(data)), "\n") {
				switch {
				case strings.HasPrefix(line, "build"):
					t.Errorf("%s compiled: go %s", tt.name, line)
				case strings.HasPrefix(line, "get"):
					gets = append(gets, line)
				}
			}
			if !slices.Equal(gets, tt.want) {
				t.Errorf("%s ran go %q, want go %q", tt.name, gets, tt.want)
			}
			for _, d := range tt.dirs {
				if _, err := os.Stat(filepath.Join(cache, "v1.36.3", d, "go.mod")); err != nil {
					t.Errorf("no scratch module in %s: %v", d, err)
				}
			}
		})
	}
}

func TestDefaultRouteInterface(t *testing.T) {
	const header = "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n"
	tests := []struct {
		name, table, want string
	}{
		{"the default route's interface, not a subnet's",
			header + "br0\t0028D50A\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\neth0\t00000000\t010200C0\t0003\t0\t0\t0\t00000000\t0\t0\t0\n", "eth0"},
		{"the lowest metric of two default routes",
			header + "wlan0\t00000000\t0101A8C0\t0003\t0\t0\t600\t00000000\t0\t0\t0\neth0\t00000000\t010200C0\t0003\t0\t0\t100\t00000000\t0\t0\t0\n", "eth0"},
		{"a default route that is down does not count",
			header + "eth1\t00000000\t010200C0\t0002\t0\t0\t0\t00000000\t0\t0\t0\n", ""},
		{"no default route", header + "lo\t0000007F\t00000000\t0001\t0\t0\t0\t000000FF\t0\t0\t0\n", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := defaultRouteInterface(strings.NewReader(tt.table))
			if got != tt.want || (err == nil) != (tt.want != "") {
				t.Errorf("defaultRouteInterface = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

// TestBuildNodeIsCachedApart puts a fake `go` first on PATH that records
// its calls and makes the binaries it is asked to build, and checks that
// BuildNode builds the kubelet and kube-proxy (no etcd) into node/bin with
// a scratch module of its own, and that a second call builds nothing.
func TestBuildNodeIsCachedApart(t *testing.T) {
	dir := t.TempDir()
	gomod := filepath.Join(dir, "kubernetes.mod")
	if err := os.WriteFile(gomod, []byte("module k8s.io/kubernetes\n\ngo 1.26.0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	calls := filepath.Join(dir, "calls")
	fakeGo := fmt.Sprintf(`#!/bin/sh
echo "$PWD: $*" >> %s
case "$1 $2" in
  "env GOVERSION") echo go1.26.8 ;;
  "mod download") echo '{"Path":"k8s.io/kubernetes","Version":"v1.36.3","GoMod":"%s"}' ;;
  "get "*) ;;
  "build "*)
    for a in "$@"; do case "$a" in */) out="$a" ;; k8s.io/kubernetes/cmd/*) touch "$out${a##*/}"; chmod +x "$out${a##*/}" ;; esac; done ;;
  *) echo "unexpected: go $*" >&2; exit 1 ;;
esac
`, calls, gomod)
	if err := os.WriteFile(filepath.Join(dir, "go"), []byte(fakeGo), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	opts := BuildOptions{KubeVersion: "v1.36.3", CacheDir: t.TempDir()}
	bin, err := BuildNode(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(opts.CacheDir, "v1.36.3", "node", "bin"); bin != want {
		t.Errorf("BuildNode = %s, want %s", bin, want)
	}
	for _, b := range NodeBinaries {
		if _, err := os.Stat(filepath.Join(bin, b)); err != nil {
			t.Errorf("BuildNode left no %s: %v", b, err)
		}
	}
	first, _ := os.ReadFile(calls)
	for _, want := range []string{filepath.Join(opts.CacheDir, "v1.36.3", "node", "src") + ": build", "cmd/kubelet", "cmd/kube-proxy"} {
		if !strings.Contains(string(first), want) {
			t.Errorf("go calls lack %q:\n%s", want, first)
		}
	}
	if strings.Contains(string(first), "etcd") {
		t.Errorf("BuildNode asked for etcd:\n%s", first)
	}
	if _, err := BuildNode(t.Context(), opts); err != nil {
		t.Fatal(err)
	}
	again, _ := os.ReadFile(calls)
	if extra := strings.TrimPrefix(string(again), string(first)); strings.Contains(extra, "build") {
		t.Errorf("a second BuildNode built again:\n%s", extra)
	}
}

func TestAddKubeProxy(t *testing.T) {
	c := &Cluster{StateDir: t.TempDir(), APIServerURL: "https://127.0.0.1:6443", AdvertiseAddress: "192.0.2.7", Ports: Ports{APIServer: 6443}}
	if err := os.MkdirAll(filepath.Join(c.StateDir, "pki"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := c.pki().ensureCA("ca", "test-ca"); err != nil {
		t.Fatal(err)
	}
	if got, want := c.PodAPIServerURL(), "https://192.0.2.7:6443"; got != want {
		t.Errorf("PodAPIServerURL = %s, want %s", got, want)
	}
	path, err := c.AddKubeProxy(c.PodAPIServerURL())
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), "server: https://192.0.2.7:6443") || !strings.Contains(string(data), "name: system:kube-proxy") {
		t.Errorf("kube-proxy kubeconfig does not name the server and user:\n%s", data)
	}
	cert, _, err := c.pki().load("kube-proxy")
	if err != nil {
		t.Fatal(err)
	}
	if cert.Subject.CommonName != "system:kube-proxy" {
		t.Errorf("kube-proxy certificate CN = %q, want system:kube-proxy", cert.Subject.CommonName)
	}
	if (&Cluster{}).PodAPIServerURL() != "" {
		t.Error("PodAPIServerURL of a loopback-only cluster is not empty")
	}
}
