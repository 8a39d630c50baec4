package scale

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/kipcell/kip/test/modbuild"
)

// VirtualKubelet is virtual-kubelet's command, with its mock provider
// built in, at the release Kip's host/node builds on.
var VirtualKubelet = modbuild.Program{
	Name:    "virtual-kubelet",
	Module:  "github.com/virtual-kubelet/virtual-kubelet",
	Version: "v1.13.0",
	Pkg:     "github.com/virtual-kubelet/virtual-kubelet/cmd/virtual-kubelet",
	Cold:    "about 4 minutes",
}

// BuildMock builds VirtualKubelet from the Go module proxy into
// ~/.cache/kip/virtual-kubelet/<version>/bin (cached by version and Go
// toolchain) and returns the binary's path.
func BuildMock(ctx context.Context, log io.Writer) (string, error) {
	return VirtualKubelet.Build(ctx, "", log)
}

// MockCapacity is the mock node's capacity: room for a burst of a
// thousand pods and more (the mock's default is 20 pods).
var MockCapacity = map[string]string{"cpu": "1000", "memory": "4Ti", "pods": "1100"}

// MockNode is virtual-kubelet v1.13.0 with its mock provider, which marks
// a pod Running as soon as the node creates it: the reference kip is
// measured beside. It runs as a child process, as MockUser.
type MockNode struct {
	// Bin is BuildMock's binary.
	Bin string
	// NodeName is the node's name; Kubeconfig gives it the identity
	// MockUser.
	NodeName, Kubeconfig string
	// Dir holds the provider's configuration, the kubelet API's
	// certificate and the log, mock.log.
	Dir string

	cmd  *exec.Cmd
	done chan struct{}
}

// Name is the node's name.
func (m *MockNode) Name() string { return m.NodeName }

// User is MockUser.
func (m *MockNode) User() string { return MockUser }

// Exited is closed when virtual-kubelet has ended.
func (m *MockNode) Exited() <-chan struct{} { return m.done }

// PID is the virtual-kubelet process.
func (m *MockNode) PID() int { return m.cmd.Process.Pid }

// LogPath is the node's log.
func (m *MockNode) LogPath() string { return filepath.Join(m.Dir, "mock.log") }

// Start runs virtual-kubelet --provider mock with MockCapacity, its
// kubelet API on a free port with a self-signed certificate, its metrics
// on another, and its log in Dir.
func (m *MockNode) Start(ctx context.Context) error {
	if err := os.MkdirAll(m.Dir, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", m.Dir, err)
	}
	config, err := json.Marshal(map[string]map[string]string{m.NodeName: MockCapacity})
	if err != nil {
		return fmt.Errorf("encoding the mock's configuration: %w", err)
	}
	configPath := filepath.Join(m.Dir, "mock.json")
	if err := os.WriteFile(configPath, config, 0o600); err != nil {
		return fmt.Errorf("writing the mock's configuration: %w", err)
	}
	cert, key, err := writeSelfSigned(m.Dir, m.NodeName)
	if err != nil {
		return err
	}
	kubeletPort, err := freePort()
	if err != nil {
		return err
	}
	metricsPort, err := freePort()
	if err != nil {
		return err
	}
	logFile, err := os.Create(m.LogPath())
	if err != nil {
		return fmt.Errorf("creating the mock's log: %w", err)
	}
	defer logFile.Close()
	// Not CommandContext: Stop ends it, after Run has read its usage.
	m.cmd = exec.Command(m.Bin, //nolint:gosec // G204: the binary BuildMock built
		"--provider", "mock", "--provider-config", configPath,
		"--nodename", m.NodeName, "--kubeconfig", m.Kubeconfig,
		"--metrics-addr", "127.0.0.1:"+strconv.Itoa(metricsPort),
		"--startup-timeout", "2m")
	m.cmd.Env = append(os.Environ(),
		"KUBELET_PORT="+strconv.Itoa(kubeletPort),
		"VKUBELET_POD_IP=127.0.0.1",
		"APISERVER_CERT_LOCATION="+cert, "APISERVER_KEY_LOCATION="+key)
	m.cmd.Stdout, m.cmd.Stderr = logFile, logFile
	if err := m.cmd.Start(); err != nil {
		return fmt.Errorf("starting virtual-kubelet: %w", err)
	}
	m.done = make(chan struct{})
	go func() { _ = m.cmd.Wait(); close(m.done) }()
	return nil
}

// Stop sends virtual-kubelet SIGTERM and waits for it to end; after 20
// seconds it kills it.
func (m *MockNode) Stop() error {
	if m.cmd == nil || m.cmd.Process == nil {
		return nil
	}
	if err := m.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("stopping virtual-kubelet: %w", err)
	}
	select {
	case <-m.done:
		return nil
	case <-time.After(20 * time.Second):
		_ = m.cmd.Process.Kill()
		<-m.done
		return errors.New("stopping virtual-kubelet: still running 20s after SIGTERM, killed")
	}
}

// writeSelfSigned writes a self-signed certificate for the kubelet API of
// node (virtual-kubelet serves it over TLS and needs a key pair) and
// returns the certificate's and the key's paths.
func writeSelfSigned(dir, node string) (certPath, keyPath string, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", fmt.Errorf("generating the kubelet API's key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: node},
		NotBefore:    time.Now().Add(-time.Minute),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return "", "", fmt.Errorf("signing the kubelet API's certificate: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return "", "", fmt.Errorf("encoding the kubelet API's key: %w", err)
	}
	certPath, keyPath = filepath.Join(dir, "kubelet.crt"), filepath.Join(dir, "kubelet.key")
	if err := os.WriteFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		return "", "", fmt.Errorf("writing the kubelet API's certificate: %w", err)
	}
	if err := os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return "", "", fmt.Errorf("writing the kubelet API's key: %w", err)
	}
	return certPath, keyPath, nil
}

// freePort returns a TCP port free on every address now: virtual-kubelet
// listens on all of them for its kubelet API.
func freePort() (int, error) {
	l, err := net.Listen("tcp", ":0") //nolint:gosec // G102: the port must be free where virtual-kubelet binds, every address
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// MockUser is the mock nodes' user: virtual-kubelet's own ServiceAccount
// and ClusterRole (MockRBAC), not a node identity, since the
// NodeRestriction admission plugin refuses the labels virtual-kubelet
// v1.13.0 puts on its Node (kubernetes.io/role,
// alpha.service-controller.kubernetes.io/exclude-balancer).
const MockUser = "system:serviceaccount:default:virtual-kubelet"

// mockRBAC is upstream's ServiceAccount, ClusterRole and binding for
// virtual-kubelet, in its module.
const mockRBAC = "hack/skaffold/virtual-kubelet/base.yml"

// ApplyMockRBAC applies virtual-kubelet v1.13.0's own RBAC (the
// ServiceAccount default/virtual-kubelet, its ClusterRole and binding),
// read from the module cache, with kubectl as kubeconfig's user.
func ApplyMockRBAC(ctx context.Context, kubectl, kubeconfig string) error {
	dir, err := modbuild.ModuleDir(ctx, VirtualKubelet.Module+"@"+VirtualKubelet.Version)
	if err != nil {
		return fmt.Errorf("downloading virtual-kubelet: %w", err)
	}
	out, err := exec.CommandContext(ctx, kubectl, "--kubeconfig", kubeconfig, "apply", "-n", "default", //nolint:gosec // G204: the control plane's kubectl
		"-f", filepath.Join(dir, mockRBAC)).CombinedOutput()
	if err != nil {
		return fmt.Errorf("applying virtual-kubelet's %s: %w\n%s", mockRBAC, err, out)
	}
	return nil
}
