package controlplane

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/kipcell/kip/test/modbuild"
)

// DefaultServiceCIDR is the service range of a cluster whose Options do
// not name one (never routed: no kube-proxy runs). Its tenth address,
// 10.0.0.10, is the cluster DNS's (deploy/coredns).
const DefaultServiceCIDR = "10.0.0.0/24"

// Options configure Start.
type Options struct {
	// StateDir holds the PKI, etcd data, logs, PIDs and kubeconfigs. A
	// restart on the same StateDir keeps the cluster's objects.
	StateDir string
	// BinDir holds the binaries Build made.
	BinDir string
	// NodeNames get a system:node:<name> kubeconfig each; default ["kip"].
	NodeNames []string
	// ReadyTimeout bounds the wait for each component; default 2 minutes.
	ReadyTimeout time.Duration
	// ServiceCIDR is the service range; default DefaultServiceCIDR.
	ServiceCIDR string
	// Ports fixes ports; zero fields get free ports on 127.0.0.1.
	Ports Ports
	// AdvertiseAddress is the API server's address for pods (the
	// "kubernetes" Service's endpoint); empty means the address of the
	// interface holding this machine's default route (address.go). The
	// API server then listens on every address. With no such address it
	// listens on loopback only and the Service has no endpoints.
	AdvertiseAddress string
	// ExtraArgs adds flags per component ("kube-apiserver": {...}).
	ExtraArgs map[string][]string
	// Log receives progress lines; nil discards them.
	Log io.Writer
}

// Ports are the loopback ports of the components.
type Ports struct {
	Etcd              int `json:"etcd"`
	EtcdPeer          int `json:"etcdPeer"`
	APIServer         int `json:"apiServer"`
	Scheduler         int `json:"scheduler"`
	ControllerManager int `json:"controllerManager"`
}

// Components in start order.
var Components = []string{"etcd", "kube-apiserver", "kube-scheduler", "kube-controller-manager"}

// Cluster is a running control plane.
type Cluster struct {
	StateDir     string `json:"stateDir"`
	BinDir       string `json:"binDir"`
	APIServerURL string `json:"apiServerURL"`
	Ports        Ports  `json:"ports"`
	// Kubeconfig is the cluster-admin kubeconfig.
	Kubeconfig string `json:"kubeconfig"`
	// CAFile is the cluster CA certificate.
	CAFile string `json:"caFile"`
	// AdvertiseAddress is where pods reach the API server (the
	// "kubernetes" Service's endpoint, at Ports.APIServer); empty when
	// the API server listens on loopback only.
	AdvertiseAddress string `json:"advertiseAddress,omitempty"`

	exited map[string]chan struct{} // set only in the process that started it
}

// Error is a start-up failure of one component, with its last log lines.
type Error struct {
	Component string
	Reason    string
	LogPath   string
	LogTail   string
}

func (e *Error) Error() string {
	msg := fmt.Sprintf("%s %s", e.Component, e.Reason)
	if e.LogTail != "" {
		msg += fmt.Sprintf("; last lines of %s:\n%s", e.LogPath, e.LogTail)
	}
	return msg
}

// ErrRunning: the state directory's control plane is already running.
var ErrRunning = errors.New("control plane already running")

var nodeNameRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)

// Start generates what is missing of the PKI, starts the four components
// on loopback and waits until each is ready. On any failure it stops what
// it started and returns an error naming the component, with its last log
// lines. The processes run in their own sessions and outlive the caller;
// stop them with Cluster.Stop or Stop(stateDir).
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	if opts.StateDir == "" || opts.BinDir == "" {
		return nil, errors.New("starting control plane: StateDir and BinDir are required")
	}
	if opts.NodeNames == nil {
		opts.NodeNames = []string{"kip"}
	}
	if opts.ReadyTimeout == 0 {
		opts.ReadyTimeout = 2 * time.Minute
	}
	if opts.ServiceCIDR == "" {
		opts.ServiceCIDR = DefaultServiceCIDR
	}
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	for _, b := range Components {
		if st, err := os.Stat(filepath.Join(opts.BinDir, b)); err != nil || st.Mode()&0o111 == 0 {
			return nil, fmt.Errorf("starting control plane: %s has no %s (build it first: make cluster-up, or kip-cluster build)", opts.BinDir, b)
		}
	}
	state, err := filepath.Abs(opts.StateDir)
	if err != nil {
		return nil, fmt.Errorf("resolving state directory: %w", err)
	}
	for _, d := range []string{"pki", "logs", "pids", "etcd-data"} {
		if err := os.MkdirAll(filepath.Join(state, d), 0o700); err != nil {
			return nil, fmt.Errorf("creating state directory: %w", err)
		}
	}
	if err := clearStalePIDs(state); err != nil {
		return nil, err
	}
	ports, err := pickPorts(opts.Ports)
	if err != nil {
		return nil, fmt.Errorf("starting control plane: %w", err)
	}
	if opts.AdvertiseAddress == "" {
		addr, err := defaultRouteAddress()
		if err != nil {
			fmt.Fprintf(opts.Log, "controlplane: the API server listens on loopback only, pods cannot reach it: %v\n", err)
		} else {
			opts.AdvertiseAddress = addr.String()
		}
	}
	c := &Cluster{
		StateDir:         state,
		BinDir:           opts.BinDir,
		APIServerURL:     fmt.Sprintf("https://127.0.0.1:%d", ports.APIServer),
		Ports:            ports,
		Kubeconfig:       filepath.Join(state, "kubeconfig"),
		CAFile:           filepath.Join(state, "pki", "ca.crt"),
		AdvertiseAddress: opts.AdvertiseAddress,
		exited:           map[string]chan struct{}{},
	}
	if err := c.writePKI(opts); err != nil {
		return nil, fmt.Errorf("generating PKI: %w", err)
	}

	started := time.Now()
	for _, name := range Components {
		if err := c.launch(name, c.args(name, opts)); err != nil {
			_ = c.Stop()
			return nil, err
		}
		if err := c.waitReady(ctx, name, opts.ReadyTimeout); err != nil {
			_ = c.Stop()
			return nil, err
		}
		fmt.Fprintf(opts.Log, "controlplane: %s ready after %s\n", name, time.Since(started).Round(10*time.Millisecond))
	}
	if err := c.save(); err != nil {
		_ = c.Stop()
		return nil, err
	}
	return c, nil
}

func (c *Cluster) pki() pki { return pki{dir: filepath.Join(c.StateDir, "pki")} }

func (c *Cluster) writePKI(opts Options) error {
	p := c.pki()
	if err := p.ensureCA("ca", "kip-local-ca"); err != nil {
		return err
	}
	if err := p.ensureCA("front-proxy-ca", "kip-local-front-proxy-ca"); err != nil {
		return err
	}
	_, svcNet, err := net.ParseCIDR(opts.ServiceCIDR)
	if err != nil {
		return fmt.Errorf("service CIDR %q: %w", opts.ServiceCIDR, err)
	}
	firstSvc := make(net.IP, len(svcNet.IP.To4()))
	copy(firstSvc, svcNet.IP.To4())
	firstSvc[3]++
	ips := []net.IP{net.IPv4(127, 0, 0, 1), firstSvc}
	if a := net.ParseIP(opts.AdvertiseAddress); a != nil {
		ips = append(ips, a)
	}
	specs := []certSpec{
		{name: "apiserver", ca: "ca", commonName: "kube-apiserver", server: true,
			ips:      ips,
			dnsNames: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"}},
		{name: "admin", ca: "ca", commonName: "admin", organization: []string{"system:masters"}},
		{name: "kube-scheduler", ca: "ca", commonName: "system:kube-scheduler"},
		{name: "kube-controller-manager", ca: "ca", commonName: "system:kube-controller-manager"},
		{name: "apiserver-kubelet-client", ca: "ca", commonName: "kube-apiserver-kubelet-client", organization: []string{"system:masters"}},
		{name: "front-proxy-client", ca: "front-proxy-ca", commonName: "front-proxy-client"},
	}
	for _, s := range specs {
		if err := p.ensureCert(s); err != nil {
			return err
		}
	}
	if err := p.ensureServiceAccountKey(); err != nil {
		return err
	}
	for _, kc := range []struct{ file, cert, user string }{
		{"kubeconfig", "admin", "admin"},
		{"kubeconfig-scheduler", "kube-scheduler", "system:kube-scheduler"},
		{"kubeconfig-controller-manager", "kube-controller-manager", "system:kube-controller-manager"},
	} {
		if err := c.writeKubeconfig(kc.file, kc.cert, kc.user); err != nil {
			return err
		}
	}
	for _, n := range opts.NodeNames {
		if _, err := c.AddNode(n); err != nil {
			return err
		}
	}
	return nil
}

func (c *Cluster) writeKubeconfig(file, cert, user string) error {
	return c.writeKubeconfigFor(c.APIServerURL, file, cert, user)
}

func (c *Cluster) writeKubeconfigFor(server, file, cert, user string) error {
	data, err := c.pki().kubeconfig(server, cert, user)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(c.StateDir, file), data, 0o600); err != nil {
		return fmt.Errorf("writing %s: %w", file, err)
	}
	return nil
}

// AddNode writes (once) a system:node:<name> client certificate and returns
// the path of its kubeconfig, kubeconfig-node-<name> in the state directory.
func (c *Cluster) AddNode(name string) (string, error) {
	if !nodeNameRE.MatchString(name) {
		return "", fmt.Errorf("node name %q is not a DNS label", name)
	}
	cert := "node-" + name
	if err := c.pki().ensureCert(certSpec{name: cert, ca: "ca", commonName: "system:node:" + name, organization: []string{"system:nodes"}}); err != nil {
		return "", err
	}
	file := "kubeconfig-node-" + name
	if err := c.writeKubeconfig(file, cert, "system:node:"+name); err != nil {
		return "", err
	}
	return filepath.Join(c.StateDir, file), nil
}

// PodAPIServerURL returns the API server's URL at its advertised address,
// where pods and a node in a network namespace of its own reach it
// (test/kubeletnode); empty when the API server listens on loopback only.
func (c *Cluster) PodAPIServerURL() string {
	if c.AdvertiseAddress == "" {
		return ""
	}
	return fmt.Sprintf("https://%s:%d", c.AdvertiseAddress, c.Ports.APIServer)
}

// AddKubeProxy writes (once) a client certificate for system:kube-proxy,
// the user the API server's default system:node-proxier binding names,
// and returns the path of its kubeconfig, kubeconfig-kube-proxy in the state
// directory, for the API server at server (PodAPIServerURL for a node in a
// network namespace of its own).
func (c *Cluster) AddKubeProxy(server string) (string, error) {
	if err := c.pki().ensureCert(certSpec{name: "kube-proxy", ca: "ca", commonName: "system:kube-proxy"}); err != nil {
		return "", err
	}
	if err := c.writeKubeconfigFor(server, "kubeconfig-kube-proxy", "kube-proxy", "system:kube-proxy"); err != nil {
		return "", err
	}
	return filepath.Join(c.StateDir, "kubeconfig-kube-proxy"), nil
}

// NodeKubeconfig returns the path of node name's kubeconfig.
func (c *Cluster) NodeKubeconfig(name string) string {
	return filepath.Join(c.StateDir, "kubeconfig-node-"+name)
}

// LogPath returns the log file of a component.
func (c *Cluster) LogPath(component string) string {
	return filepath.Join(c.StateDir, "logs", component+".log")
}

func (c *Cluster) args(name string, opts Options) []string {
	s, pk := c.StateDir, filepath.Join(c.StateDir, "pki")
	p := c.Ports
	var args []string
	switch name {
	case "etcd":
		args = []string{
			"--name=local", "--data-dir=" + filepath.Join(s, "etcd-data"),
			fmt.Sprintf("--listen-client-urls=http://127.0.0.1:%d", p.Etcd),
			fmt.Sprintf("--advertise-client-urls=http://127.0.0.1:%d", p.Etcd),
			fmt.Sprintf("--listen-peer-urls=http://127.0.0.1:%d", p.EtcdPeer),
			fmt.Sprintf("--initial-advertise-peer-urls=http://127.0.0.1:%d", p.EtcdPeer),
			fmt.Sprintf("--initial-cluster=local=http://127.0.0.1:%d", p.EtcdPeer),
			"--initial-cluster-state=new", "--unsafe-no-fsync=true", "--log-level=warn",
		}
	case "kube-apiserver":
		args = []string{
			fmt.Sprintf("--etcd-servers=http://127.0.0.1:%d", p.Etcd),
			fmt.Sprintf("--secure-port=%d", p.APIServer),
			"--cert-dir=" + filepath.Join(pk, "apiserver-selfsigned"),
			"--tls-cert-file=" + filepath.Join(pk, "apiserver.crt"), "--tls-private-key-file=" + filepath.Join(pk, "apiserver.key"),
			"--client-ca-file=" + filepath.Join(pk, "ca.crt"),
			"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
			"--service-account-key-file=" + filepath.Join(pk, "sa.pub"),
			"--service-account-signing-key-file=" + filepath.Join(pk, "sa.key"),
			"--service-cluster-ip-range=" + opts.ServiceCIDR,
			"--authorization-mode=Node,RBAC", "--enable-admission-plugins=NodeRestriction",
			"--kubelet-client-certificate=" + filepath.Join(pk, "apiserver-kubelet-client.crt"),
			"--kubelet-client-key=" + filepath.Join(pk, "apiserver-kubelet-client.key"),
			"--requestheader-client-ca-file=" + filepath.Join(pk, "front-proxy-ca.crt"),
			"--requestheader-allowed-names=front-proxy-client",
			"--requestheader-username-headers=X-Remote-User", "--requestheader-group-headers=X-Remote-Group",
			"--requestheader-extra-headers-prefix=X-Remote-Extra-",
			"--proxy-client-cert-file=" + filepath.Join(pk, "front-proxy-client.crt"),
			"--proxy-client-key-file=" + filepath.Join(pk, "front-proxy-client.key"),
			"--allow-privileged=true", "--profiling=false",
			// Webhooks and aggregated APIs at their endpoints' pod IPs:
			// this host runs no kube-proxy, so a ClusterIP leads nowhere
			// from here (docs/networking.md).
			"--enable-aggregator-routing=true",
			// A real kubelet (test/kubeletnode) joins with a bootstrap
			// token, as kubeadm's do, and is reached at its InternalIP: its
			// Hostname address names no host this machine resolves.
			"--enable-bootstrap-token-auth=true",
			"--kubelet-preferred-address-types=InternalIP,ExternalIP,Hostname",
		}
		if c.AdvertiseAddress != "" {
			// Pods reach the API server at the advertised address, the
			// "kubernetes" Service's endpoint (address.go).
			args = append(args, "--bind-address=0.0.0.0", "--advertise-address="+c.AdvertiseAddress)
		} else {
			// A loopback address may not be an Endpoints address.
			args = append(args, "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", "--endpoint-reconciler-type=none")
		}
	case "kube-scheduler":
		kc := filepath.Join(s, "kubeconfig-scheduler")
		args = []string{
			"--kubeconfig=" + kc, "--authentication-kubeconfig=" + kc, "--authorization-kubeconfig=" + kc,
			"--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", p.Scheduler),
			"--cert-dir=" + filepath.Join(s, "scheduler-certs"), "--leader-elect=false",
		}
	case "kube-controller-manager":
		kc := filepath.Join(s, "kubeconfig-controller-manager")
		args = []string{
			"--kubeconfig=" + kc, "--authentication-kubeconfig=" + kc, "--authorization-kubeconfig=" + kc,
			"--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", p.ControllerManager),
			"--cert-dir=" + filepath.Join(s, "controller-manager-certs"), "--leader-elect=false",
			"--service-account-private-key-file=" + filepath.Join(pk, "sa.key"),
			"--root-ca-file=" + filepath.Join(pk, "ca.crt"),
			"--use-service-account-credentials=true",
			"--cluster-signing-cert-file=" + filepath.Join(pk, "ca.crt"),
			"--cluster-signing-key-file=" + filepath.Join(pk, "ca.key"),
			"--service-cluster-ip-range=" + opts.ServiceCIDR,
		}
	}
	return append(args, opts.ExtraArgs[name]...)
}

// launch starts one component in its own session, logging to logs/NAME.log.
func (c *Cluster) launch(name string, args []string) error {
	logFile, err := os.OpenFile(c.LogPath(name), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("opening %s log: %w", name, err)
	}
	defer logFile.Close()
	cmd := exec.Command(filepath.Join(c.BinDir, name), args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return &Error{Component: name, Reason: "did not start: " + err.Error()}
	}
	if err := os.WriteFile(c.pidFile(name), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
		_ = cmd.Process.Kill()
		return fmt.Errorf("recording %s PID: %w", name, err)
	}
	done := make(chan struct{})
	c.exited[name] = done
	go func() { _ = cmd.Wait(); close(done) }() // reap while we are the parent
	return nil
}

func (c *Cluster) pidFile(name string) string { return filepath.Join(c.StateDir, "pids", name+".pid") }

// waitReady polls the component's health endpoint until it answers ok,
// the process exits, or the timeout passes.
func (c *Cluster) waitReady(ctx context.Context, name string, timeout time.Duration) error {
	client, url, err := c.healthCheck(name)
	if err != nil {
		return err
	}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		if healthy(ctx, client, url) {
			return nil
		}
		select {
		case <-c.exited[name]:
			return c.failure(name, "exited during start-up")
		case <-deadline.C:
			return c.failure(name, fmt.Sprintf("not ready after %s (%s)", timeout, url))
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", name, ctx.Err())
		case <-tick.C:
		}
	}
}

func (c *Cluster) failure(name, reason string) error {
	data, _ := os.ReadFile(c.LogPath(name))
	return &Error{Component: name, Reason: reason, LogPath: c.LogPath(name), LogTail: modbuild.LastLines(string(data), 30)}
}

func (c *Cluster) healthCheck(name string) (*http.Client, string, error) {
	switch name {
	case "etcd":
		return &http.Client{Timeout: 2 * time.Second}, fmt.Sprintf("http://127.0.0.1:%d/health", c.Ports.Etcd), nil
	case "kube-apiserver":
		tlsConfig, err := c.AdminTLSConfig()
		if err != nil {
			return nil, "", err
		}
		return &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsConfig}},
			c.APIServerURL + "/readyz", nil
	default:
		port := c.Ports.Scheduler
		if name == "kube-controller-manager" {
			port = c.Ports.ControllerManager
		}
		// Their serving certificates are self-signed into --cert-dir.
		insecure := &tls.Config{InsecureSkipVerify: true} //nolint:gosec // loopback health probe of a self-signed endpoint
		return &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: insecure}},
			fmt.Sprintf("https://127.0.0.1:%d/healthz", port), nil
	}
}

// AdminTLSConfig trusts the cluster CA and presents the admin certificate.
func (c *Cluster) AdminTLSConfig() (*tls.Config, error) {
	pk := filepath.Join(c.StateDir, "pki")
	cert, err := tls.LoadX509KeyPair(filepath.Join(pk, "admin.crt"), filepath.Join(pk, "admin.key"))
	if err != nil {
		return nil, fmt.Errorf("loading admin certificate: %w", err)
	}
	caPEM, err := os.ReadFile(c.CAFile)
	if err != nil {
		return nil, fmt.Errorf("reading CA: %w", err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	return &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}

func healthy(ctx context.Context, client *http.Client, url string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := client.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	s := strings.TrimSpace(string(body))
	return resp.StatusCode == http.StatusOK && (s == "ok" || strings.Contains(s, `"health":"true"`))
}

// save writes cluster.json and an env file (export KUBECONFIG=...) into
// the state directory.
func (c *Cluster) save() error {
	data, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding cluster state: %w", err)
	}
	if err := os.WriteFile(filepath.Join(c.StateDir, "cluster.json"), data, 0o644); err != nil {
		return fmt.Errorf("writing cluster state: %w", err)
	}
	if err := os.WriteFile(filepath.Join(c.StateDir, "env"), []byte(c.Env()), 0o644); err != nil {
		return fmt.Errorf("writing env file: %w", err)
	}
	return nil
}

// Env returns shell export lines for using the cluster: KUBECONFIG and a
// PATH with the built kubectl first.
func (c *Cluster) Env() string {
	return fmt.Sprintf("export KUBECONFIG=%s\nexport PATH=%s:$PATH\n", c.Kubeconfig, c.BinDir)
}

// Load reads the cluster a Start in any process left in stateDir.
func Load(stateDir string) (*Cluster, error) {
	data, err := os.ReadFile(filepath.Join(stateDir, "cluster.json"))
	if err != nil {
		return nil, fmt.Errorf("reading cluster state in %s (is a cluster up?): %w", stateDir, err)
	}
	var c Cluster
	if err := json.Unmarshal(data, &c); err != nil {
		return nil, fmt.Errorf("parsing cluster state in %s: %w", stateDir, err)
	}
	return &c, nil
}

// Stop stops the control plane by its recorded PIDs.
func (c *Cluster) Stop() error { return Stop(c.StateDir, 20*time.Second) }

// Stop sends SIGTERM to the components recorded in stateDir in reverse
// start order, then SIGKILL to any still running after timeout. A PID is
// signalled only while its command line names stateDir, so a recycled PID
// is never hit. Stopping a stopped cluster succeeds.
func Stop(stateDir string, timeout time.Duration) error {
	var errs []error
	for i := len(Components) - 1; i >= 0; i-- {
		name := Components[i]
		if err := StopProcess(stateDir, filepath.Join(stateDir, "pids", name+".pid"), name, timeout); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// StopProcess stops the process whose PID pidFile records (Stop's way, for
// test/kubeletnode's processes too): SIGTERM, then SIGKILL after timeout,
// only while its command line names stateDir; then it removes pidFile.
// A process already gone is no error.
func StopProcess(stateDir, pidFile, name string, timeout time.Duration) error {
	pid, ok := RunningPID(stateDir, pidFile)
	if !ok {
		_ = os.Remove(pidFile)
		return nil
	}
	_ = syscall.Kill(pid, syscall.SIGTERM)
	deadline := time.Now().Add(timeout)
	for running(stateDir, pid) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if running(stateDir, pid) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		time.Sleep(300 * time.Millisecond)
		if running(stateDir, pid) {
			return fmt.Errorf("%s (pid %d) survived SIGKILL", name, pid)
		}
	}
	_ = os.Remove(pidFile)
	return nil
}

// clearStalePIDs refuses a state directory whose components still run and
// removes PID files of processes that are gone (a crash or a reboot).
func clearStalePIDs(stateDir string) error {
	for _, name := range Components {
		file := filepath.Join(stateDir, "pids", name+".pid")
		if pid, ok := RunningPID(stateDir, file); ok {
			return fmt.Errorf("%w in %s (%s is pid %d): stop it first (make cluster-down)", ErrRunning, stateDir, name, pid)
		}
		_ = os.Remove(file)
	}
	return nil
}

// RunningPID returns the PID pidFile records and whether that process runs
// and names stateDir in its command line (see running).
func RunningPID(stateDir, file string) (int, bool) {
	data, err := os.ReadFile(file)
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || pid <= 0 {
		return 0, false
	}
	return pid, running(stateDir, pid)
}

// running reports whether pid is a live process whose command line names
// stateDir (a zombie has an empty command line and counts as gone).
func running(stateDir string, pid int) bool {
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return false
	}
	return strings.Contains(string(cmdline), stateDir+string(os.PathSeparator))
}

// pickPorts fills zero ports with free loopback ports and checks fixed ones.
func pickPorts(want Ports) (Ports, error) {
	fields := []struct {
		name string
		p    *int
	}{
		{"etcd", &want.Etcd}, {"etcd peer", &want.EtcdPeer}, {"kube-apiserver", &want.APIServer},
		{"kube-scheduler", &want.Scheduler}, {"kube-controller-manager", &want.ControllerManager},
	}
	var holds []net.Listener
	defer func() {
		for _, l := range holds {
			_ = l.Close()
		}
	}()
	for _, f := range fields {
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", *f.p))
		if err != nil {
			return want, fmt.Errorf("port %d for %s is in use: %w", *f.p, f.name, err)
		}
		holds = append(holds, l) // held until all are picked, so none repeats
		*f.p = l.Addr().(*net.TCPAddr).Port
	}
	return want, nil
}
