package pod

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kipcell/kip/cell/api/expansion"
	"github.com/kipcell/kip/cell/podnet"
	"github.com/kipcell/kip/cell/runtime"
)

// This file runs one probe or lifecycle handler, ported from the kubelet's
// pkg/probe/{exec,http,tcp,grpc}, pkg/kubelet/prober/prober.go and
// pkg/kubelet/lifecycle/handlers.go (v1.36): the same requests, the same
// results and the same messages.

// kubeVersion is the Kubernetes minor whose kubelet these probes copy; it
// is in the probes' User-Agent ("kube-probe/1.36").
const kubeVersion = "1.36"

// maxProbeOutput is how much of a probe's output or body is kept (10 KiB).
const maxProbeOutput = 10 << 10

// probeResult is a probe's outcome (pkg/probe.Result).
type probeResult int

const (
	probeSuccess probeResult = iota
	probeWarning
	probeFailure
	probeUnknown
)

func (r probeResult) String() string {
	return [...]string{"success", "warning", "failure", "unknown"}[r]
}

// errCommandTimedOut is the CRI client's error for an exec that outlived
// its timeout; a probe that times out fails with it as its output.
var errCommandTimedOut = errors.New("command timed out")

// target is what a probe or hook runs against: the container's spec, its
// running task and the pod's IP.
type target struct {
	c     *corev1.Container
	task  runtime.Task
	podIP string
	// netns is the pod's network namespace, which probes and hooks
	// connect from (nil: the agent's).
	netns func() string
	// warn records a Warning event on the pod (nil: none).
	warn func(reason, message string)
}

// runProbe runs p once (prober.runProbe), its timeout counted in unit
// (a second but in tests). An error means the probe could not be run
// (probeUnknown); a failing check is probeFailure with output.
func runProbe(ctx context.Context, p *corev1.Probe, t target, unit time.Duration) (probeResult, string, error) {
	timeout := time.Duration(max(p.TimeoutSeconds, 1)) * unit
	switch {
	case p.Exec != nil:
		out, code, err := execIn(ctx, t, staticExpand(p.Exec.Command, t.c), timeout)
		switch {
		case errors.Is(err, errCommandTimedOut):
			return probeFailure, err.Error(), nil
		case err != nil:
			return probeUnknown, "", err
		case code != 0:
			return probeFailure, string(out), nil
		}
		return probeSuccess, string(out), nil
	case p.HTTPGet != nil:
		req, err := httpRequest(ctx, p.HTTPGet, t, "probe")
		if err != nil {
			return probeUnknown, "", err
		}
		return httpProbe(req, t, timeout)
	case p.TCPSocket != nil:
		port, err := containerPort(p.TCPSocket.Port, t.c)
		if err != nil {
			return probeUnknown, "", err
		}
		host := p.TCPSocket.Host
		if host == "" {
			host = t.podIP
		}
		return tcpProbe(ctx, t, net.JoinHostPort(host, strconv.Itoa(port)), timeout)
	case p.GRPC != nil:
		service := ""
		if p.GRPC.Service != nil {
			service = *p.GRPC.Service
		}
		return grpcProbe(ctx, t, service, int(p.GRPC.Port), timeout)
	}
	return probeUnknown, "", fmt.Errorf("missing probe handler for container %s", t.c.Name)
}

// staticExpand expands $(VAR) in cmd with the container's literal env
// values only, as the kubelet's ExpandContainerCommandOnlyStatic.
func staticExpand(cmd []string, c *corev1.Container) []string {
	vars := map[string]string{}
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			vars[e.Name] = expansion.Expand(e.Value, vars)
		}
	}
	out := make([]string, len(cmd))
	for i, a := range cmd {
		out[i] = expansion.Expand(a, vars)
	}
	return out
}

// execIn runs cmd in the container and returns its combined output (the
// first 10 KiB) and exit code. timeout 0 means none; past it the process
// is killed and the error is errCommandTimedOut.
func execIn(ctx context.Context, t target, cmd []string, timeout time.Duration) ([]byte, int32, error) {
	if len(cmd) == 0 {
		return nil, 0, errors.New("exec with an empty command")
	}
	out := &limitedBuffer{max: maxProbeOutput}
	proc, err := t.task.Exec(ctx, runtime.ExecSpec{Args: cmd, Stdout: out, Stderr: out})
	if err != nil {
		return nil, 0, fmt.Errorf("running %q in container %s: %w", cmd, t.c.Name, err)
	}
	wctx, cancel := ctx, context.CancelFunc(func() {})
	if timeout > 0 {
		wctx, cancel = context.WithTimeout(ctx, timeout)
	}
	defer cancel()
	code, err := proc.Wait(wctx)
	if wctx.Err() != nil && ctx.Err() == nil {
		return out.bytes(), code, errCommandTimedOut
	}
	if err != nil {
		return out.bytes(), code, fmt.Errorf("running %q in container %s: %w", cmd, t.c.Name, err)
	}
	return out.bytes(), code, nil
}

// limitedBuffer keeps the first max bytes written to it and discards the
// rest; it is safe for the two output streams of one process.
type limitedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
	max int
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if room := b.max - b.buf.Len(); room > 0 {
		b.buf.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

func (b *limitedBuffer) bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return bytes.Clone(b.buf.Bytes())
}

// containerPort resolves a probe's or hook's port: a number, or the name
// of one of the container's ports (probe.ResolveContainerPort).
func containerPort(p intstr.IntOrString, c *corev1.Container) (int, error) {
	port := -1
	switch p.Type {
	case intstr.Int:
		port = p.IntValue()
	case intstr.String:
		found := false
		for _, cp := range c.Ports {
			if cp.Name == p.StrVal {
				port, found = int(cp.ContainerPort), true
				break
			}
		}
		if !found {
			n, err := strconv.Atoi(p.StrVal)
			if err != nil {
				return port, fmt.Errorf("port %s not found", p.StrVal)
			}
			port = n
		}
	}
	if port > 0 && port < 65536 {
		return port, nil
	}
	return port, fmt.Errorf("invalid port number: %v", port)
}

// httpRequest builds the kubelet's GET for an httpGet action
// (NewRequestForHTTPGetAction): scheme, host (the pod IP by default),
// port, path, the action's headers, User-Agent kube-<purpose>/1.36 and
// Accept */* unless the action sets them, and Host from a Host header.
func httpRequest(ctx context.Context, a *corev1.HTTPGetAction, t target, purpose string) (*http.Request, error) {
	scheme := strings.ToLower(string(a.Scheme))
	if scheme == "" {
		scheme = "http"
	}
	host := a.Host
	if host == "" {
		host = t.podIP
	}
	port, err := containerPort(a.Port, t.c)
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(a.Path)
	if err != nil {
		u = &url.URL{Path: a.Path}
	}
	u.Scheme = scheme
	u.Host = net.JoinHostPort(host, strconv.Itoa(port))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	headers := http.Header{}
	for _, h := range a.HTTPHeaders {
		headers.Add(h.Name, h.Value)
	}
	if _, ok := headers["User-Agent"]; !ok {
		headers.Set("User-Agent", "kube-"+purpose+"/"+kubeVersion)
	}
	if _, ok := headers["Accept"]; !ok {
		headers.Set("Accept", "*/*")
	} else if headers.Get("Accept") == "" {
		headers.Del("Accept")
	}
	req.Header = headers
	req.Host = headers.Get("Host")
	return req, nil
}

// probeDialer is the kubelet's: SO_LINGER 1 s, so that a probe's
// connections do not pile up in TIME_WAIT.
func probeDialer() *net.Dialer {
	return &net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		return c.Control(func(fd uintptr) {
			_ = syscall.SetsockoptLinger(int(fd), syscall.SOL_SOCKET, syscall.SO_LINGER, &syscall.Linger{Onoff: 1, Linger: 1})
		})
	}}
}

// dial connects with d from the pod's network namespace: a probe or hook
// comes from the pod's network, as the kubelet's do, so that what the pod
// may not reach (the cell's agent, the instance's metadata) a probe's
// host does not reach either.
func (t target) dial(ctx context.Context, d *net.Dialer, network, addr string) (net.Conn, error) {
	ns := ""
	if t.netns != nil {
		ns = t.netns()
	}
	return podnet.DialContext(ctx, d, ns, network, addr)
}

// transport is the kubelet's probe transport: no keep-alives, no proxy,
// no compression, certificates not verified; it dials from the pod's
// network namespace.
func (t target) transport() *http.Transport {
	return &http.Transport{
		TLSClientConfig:    &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // the kubelet does not verify probe certificates
		DisableKeepAlives:  true,
		Proxy:              http.ProxyURL(nil),
		DisableCompression: true,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return t.dial(ctx, probeDialer(), network, addr)
		},
	}
}

// httpProbe is the kubelet's DoHTTPProbe: 2xx succeeds, 3xx to another
// host is a warning (redirects are followed only on the same host), the
// rest fails with the status code.
func httpProbe(req *http.Request, t target, timeout time.Duration) (probeResult, string, error) {
	client := &http.Client{Timeout: timeout, Transport: t.transport(), CheckRedirect: func(r *http.Request, via []*http.Request) error {
		if r.URL.Hostname() != via[0].URL.Hostname() {
			return http.ErrUseLastResponse
		}
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		return nil
	}}
	res, err := client.Do(req)
	if err != nil {
		return probeFailure, err.Error(), nil //nolint:nilerr // a server that cannot be reached fails the probe, with the reason as its output
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, maxProbeOutput))
	if err != nil {
		return probeFailure, "", err
	}
	body := string(b)
	if res.StatusCode >= http.StatusOK && res.StatusCode < http.StatusBadRequest {
		if res.StatusCode >= http.StatusMultipleChoices {
			return probeWarning, "Probe terminated redirects, Response body: " + body, nil
		}
		return probeSuccess, body, nil
	}
	return probeFailure, fmt.Sprintf("HTTP probe failed with statuscode: %d", res.StatusCode), nil
}

// tcpProbe succeeds when a connection to addr opens within timeout.
func tcpProbe(ctx context.Context, t target, addr string, timeout time.Duration) (probeResult, string, error) {
	d := probeDialer()
	d.Timeout = timeout
	conn, err := t.dial(ctx, d, "tcp", addr)
	if err != nil {
		return probeFailure, err.Error(), nil //nolint:nilerr // a refused connection fails the probe, with the reason as its output
	}
	_ = conn.Close()
	return probeSuccess, "", nil
}

// grpcProbe calls grpc.health.v1.Health/Check on the pod's port without
// TLS and succeeds on SERVING, with the kubelet's messages.
func grpcProbe(ctx context.Context, t target, service string, port int, timeout time.Duration) (probeResult, string, error) {
	addr := net.JoinHostPort(t.podIP, strconv.Itoa(port))
	conn, err := grpc.NewClient("passthrough:///"+addr,
		grpc.WithUserAgent("kube-probe/"+kubeVersion),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) {
			return t.dial(ctx, probeDialer(), "tcp", a)
		}))
	if err != nil {
		return probeFailure, fmt.Sprintf("error: failed to connect service at %q: %+v", addr, err), nil
	}
	defer conn.Close()
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	resp, err := healthpb.NewHealthClient(conn).Check(cctx, &healthpb.HealthCheckRequest{Service: service}, grpc.WaitForReady(true))
	if err != nil {
		st, _ := status.FromError(err)
		switch st.Code() {
		case codes.Unimplemented:
			return probeFailure, "error: this server does not implement the grpc health protocol (grpc.health.v1.Health): " + st.Message(), nil
		case codes.DeadlineExceeded:
			return probeFailure, fmt.Sprintf("timeout: health rpc did not complete within %v", timeout), nil
		}
		return probeFailure, fmt.Sprintf("error: health rpc probe failed: %+v", err), nil
	}
	if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		return probeFailure, fmt.Sprintf("service unhealthy (responded with %q)", resp.GetStatus().String()), nil
	}
	return probeSuccess, "service healthy", nil
}

// hookClient runs httpGet lifecycle hooks from the pod's network: any
// answer is success, as in the kubelet; certificates are not verified.
func (t target) hookClient() *http.Client {
	return &http.Client{Transport: t.transport(), Timeout: 0}
}

// runHook runs a postStart or preStop handler (handlerRunner.Run) until it
// ends or ctx does, and returns the kubelet's message when it fails.
func runHook(ctx context.Context, h *corev1.LifecycleHandler, t target, podName string) (string, error) {
	switch {
	case h.Exec != nil:
		out, code, err := execIn(ctx, t, h.Exec.Command, 0)
		if err == nil && code != 0 {
			err = fmt.Errorf("command '%s' exited with %d: %s", strings.Join(h.Exec.Command, " "), code, out)
		}
		if err != nil {
			return fmt.Sprintf("Exec lifecycle hook (%v) for Container %q in Pod %q failed - error: %v, message: %q",
				h.Exec.Command, t.c.Name, podName, err, string(out)), err
		}
		return "", nil
	case h.HTTPGet != nil:
		err := runHTTPHook(ctx, h.HTTPGet, t)
		if err != nil {
			return fmt.Sprintf("HTTP lifecycle hook (%s) for Container %q in Pod %q failed - error: %v",
				h.HTTPGet.Path, t.c.Name, podName, err), err
		}
		return "", nil
	case h.Sleep != nil:
		if !sleep(ctx, time.Duration(h.Sleep.Seconds)*time.Second) {
			err := errors.New("container terminated before sleep hook finished")
			return fmt.Sprintf("Sleep lifecycle hook (%d) for Container %q in Pod %q failed - error: %v",
				h.Sleep.Seconds, t.c.Name, podName, err), err
		}
		return "", nil
	}
	err := fmt.Errorf("invalid handler: %v", h)
	return fmt.Sprintf("Cannot run handler: %v", err), err
}

// runHTTPHook sends the hook's GET; an HTTPS hook answered in plain HTTP
// is retried over HTTP without Authorization, as the kubelet does.
func runHTTPHook(ctx context.Context, a *corev1.HTTPGetAction, t target) error {
	req, err := httpRequest(ctx, a, t, "lifecycle")
	if err != nil {
		return err
	}
	client := t.hookClient()
	resp, err := client.Do(req)
	discard(resp)
	var uerr *url.Error
	if err != nil && errors.As(err, &uerr) && strings.Contains(uerr.Err.Error(), "server gave HTTP response to HTTPS client") {
		req = req.Clone(ctx)
		req.URL.Scheme = "http"
		req.Header.Del("Authorization")
		resp, herr := client.Do(req)
		discard(resp)
		if herr == nil {
			err = nil
			if t.warn != nil {
				t.warn("LifecycleHTTPFallback", fmt.Sprintf("request to HTTPS lifecycle hook %s got HTTP response, retry with HTTP succeeded", req.URL.Host))
			}
		}
	}
	return err
}

func discard(resp *http.Response) {
	if resp == nil {
		return
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxProbeOutput))
	_ = resp.Body.Close()
}
