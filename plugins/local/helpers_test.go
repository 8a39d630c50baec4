package local

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/kipcell/kip/pluginapi"
)

// The test binary doubles as the cell agent: started as
// "<test binary> kip-test-agent <bootstrap path> [exit]", TestMain runs
// testAgent instead of the tests. That gives the tests an agent that
// reports what it saw (environment, network namespace, session) and
// listens where a real kip-cell would, with nothing to build.
const testAgentArg = "kip-test-agent"

// testCgroupParent keeps the tests' cgroups apart from a real kip's.
var testCgroupParent = "kip-test-" + strconv.Itoa(os.Getpid())

func TestMain(m *testing.M) {
	if len(os.Args) > 2 && os.Args[1] == testAgentArg {
		testAgent(os.Args[2], len(os.Args) > 3 && os.Args[3] == "exit")
		return
	}
	if len(os.Args) > 4 && os.Args[1] == dyingPluginArg {
		dyingPlugin(os.Args[2], os.Args[3], os.Args[4])
		return
	}
	code := m.Run()
	// The tests' parent cgroups, once their cells' groups are gone.
	for _, h := range []string{"cpu", "memory", ""} {
		_ = syscall.Rmdir(filepath.Join(defaultCgroupRoot, h, testCgroupParent))
	}
	os.Exit(code)
}

// agentReport is what the test agent writes to <bootstrap>.report.
type agentReport struct {
	Env       map[string]string
	PID       int
	SID       int
	Netns     string // readlink /proc/self/ns/net
	Mountns   string // readlink /proc/self/ns/mnt
	Bootstrap string
}

// testAgent reports, then listens on KIP_CELL_ADDRESS:KIP_CELL_PORT and
// answers every connection with "hello <cell ID>" until it is killed; or
// exits with status 3 when exit is set.
func testAgent(bootstrapPath string, exit bool) {
	// As kip-cell does (cell.AwaitStartGate): nothing before the plugin
	// has recorded this process.
	if os.Getenv(EnvCellStartGate) != "" {
		gate := os.NewFile(startGateFD, "start-gate")
		if n, _ := gate.Read(make([]byte, 1)); n != 1 {
			os.Exit(0)
		}
		gate.Close()
	}
	rep := agentReport{Env: map[string]string{}, PID: os.Getpid()}
	for _, k := range []string{EnvCellID, EnvCellBootstrap, EnvCellAddress, EnvCellPort, EnvCellServiceProxy, EnvCellStateDir, EnvCellIMDSEndpoint, EnvCellSharedNamespace, pluginapi.Handshake.MagicCookieKey} {
		if v, ok := os.LookupEnv(k); ok {
			rep.Env[k] = v
		}
	}
	rep.SID = getsid()
	rep.Netns, _ = os.Readlink("/proc/self/ns/net")
	rep.Mountns, _ = os.Readlink("/proc/self/ns/mnt")
	b, _ := os.ReadFile(bootstrapPath)
	rep.Bootstrap = string(b)
	data, _ := json.Marshal(rep)
	if err := os.WriteFile(bootstrapPath+".report.tmp", data, 0o600); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	_ = os.Rename(bootstrapPath+".report.tmp", bootstrapPath+".report")
	if exit {
		os.Exit(3)
	}
	l, err := net.Listen("tcp", net.JoinHostPort(os.Getenv(EnvCellAddress), os.Getenv(EnvCellPort)))
	if err != nil {
		fmt.Fprintln(os.Stderr, "test agent:", err)
		os.Exit(2)
	}
	for {
		c, err := l.Accept()
		if err != nil {
			os.Exit(2)
		}
		fmt.Fprintf(c, "hello %s\n", os.Getenv(EnvCellID))
		c.Close()
	}
}

// testEnv is one test's "cloud": a state directory, unique addresses, and,
// in netns mode, a unique bridge and subnet.
type testEnv struct {
	t         *testing.T
	clusterID string
	config    map[string]any
}

var loopbackSeq atomic.Int32

// cellOwners is the running test that launched each cell ID
// (testEnv.launch).
var cellOwners sync.Map

// newTestEnv returns a loopback-mode environment. Its addresses come from
// a /24 of 127/8 that no other test (in this process) uses, since agents
// of different tests listen on the same port.
func newTestEnv(t *testing.T) *testEnv {
	t.Helper()
	n := loopbackSeq.Add(1)
	loopback := fmt.Sprintf("127.%d.%d.0/24", 100+os.Getpid()%100, n%250)
	return &testEnv{
		t:         t,
		clusterID: "cluster-" + randHex(4),
		config: map[string]any{
			"agentCommand":     []string{os.Args[0], testAgentArg, "{bootstrap}"},
			"stateDir":         t.TempDir(),
			"network":          NetworkLoopback,
			"loopbackSubnet":   loopback,
			"terminationGrace": "2s",
		},
	}
}

// newNetnsEnv returns a netns-mode environment with its own bridge and
// subnet, removed when the test ends. It skips the test when not root.
func newNetnsEnv(t *testing.T) *testEnv {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("netns mode needs root to create network namespaces, veths and bridges")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("netns mode needs the ip command (iproute2)")
	}
	e := newTestEnv(t)
	bridge := "kipt" + randHex(4)
	b := make([]byte, 1)
	_, _ = rand.Read(b)
	e.config["network"] = NetworkNetns
	e.config["bridge"] = bridge
	e.config["subnet"] = fmt.Sprintf("10.213.%d.0/24", 100+int(b[0])%150)
	t.Cleanup(func() {
		_ = exec.Command("ip", "link", "del", bridge).Run()
	})
	return e
}

func (e *testEnv) stateDir() string { return e.config["stateDir"].(string) }

func (e *testEnv) configJSON() []byte {
	data, err := json.Marshal(e.config)
	if err != nil {
		e.t.Fatal(err)
	}
	return data
}

// provider returns a new configured provider on the environment, as a new
// plugin process would be. Cells left at the end of the test are
// destroyed.
func (e *testEnv) provider() *provider {
	t := e.t
	t.Helper()
	p := New(testLogger(t)).(*provider)
	p.cgroupParent = testCgroupParent
	if _, err := p.Configure(t.Context(), &pluginapi.ConfigureRequest{
		ClusterID: e.clusterID, NodeName: "kip-test", Config: e.configJSON(),
	}); err != nil {
		t.Fatalf("Configure: %v", err)
	}
	t.Cleanup(func() { destroyAll(t, p) })
	return p
}

// destroyAll removes every cell of the provider's state directory.
func destroyAll(t *testing.T, p *provider) {
	cfg := p.cfg.Load()
	records, err := readRecords(cfg.stateDir)
	if err != nil {
		t.Errorf("cleanup: %v", err)
	}
	for _, r := range records {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) //nolint:usetesting // a Cleanup: t.Context() has ended
		// Under the cell's lock, as Terminate: a supervisor does not
		// restart the agent destroy stops.
		unlock, err := p.cellLock(ctx, cfg, r.CellID)
		if err == nil {
			err = p.destroy(ctx, cfg, r)
			unlock()
		}
		if err != nil {
			t.Errorf("cleanup of cell %s: %v", r.CellID, err)
		}
		cancel()
	}
}

// launch launches one cell of type local.nano and fails the test on error.
func (e *testEnv) launch(p *provider, cellID string) pluginapi.Instance {
	e.t.Helper()
	// A cell's cgroup is named after its ID under the package's one
	// parent (testCgroupParent), so two parallel tests' cells of one ID
	// share a cgroup, and the end of one kills the other's agent.
	if other, taken := cellOwners.LoadOrStore(cellID, e.t.Name()); taken && other != e.t.Name() {
		e.t.Fatalf("cell %s is %s's already: cell IDs name cgroups, which the package's tests share; pick another", cellID, other)
	} else if !taken {
		e.t.Cleanup(func() { cellOwners.Delete(cellID) })
	}
	resp, err := p.Launch(e.t.Context(), e.launchRequest(cellID))
	if err != nil {
		e.t.Fatalf("Launch %s: %v", cellID, err)
	}
	return resp.Instance
}

func (e *testEnv) launchRequest(cellID string) *pluginapi.LaunchRequest {
	return &pluginapi.LaunchRequest{
		CellID:       cellID,
		NodeName:     "kip-test",
		PodUID:       "uid-" + cellID,
		PodNamespace: "default",
		PodName:      "pod-" + cellID,
		InstanceType: "local.nano",
		CapacityType: pluginapi.CapacityOnDemand,
		Bootstrap:    []byte("bootstrap of " + cellID),
		Tags:         map[string]string{"team": "kip"},
	}
}

// report waits for the test agent of cellID to write its report.
func (e *testEnv) report(cellID string) agentReport {
	e.t.Helper()
	path := filepath.Join(cellDir(e.stateDir(), cellID), bootstrapFile+".report")
	var rep agentReport
	eventually(e.t, 10*time.Second, func() error {
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return json.Unmarshal(data, &rep)
	})
	return rep
}

// dial connects to the agent at addr and returns its greeting.
func dial(addr string) (string, error) {
	c, err := net.DialTimeout("tcp", net.JoinHostPort(addr, strconv.Itoa(AgentPort)), time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	b, err := io.ReadAll(c)
	return string(bytes.TrimSpace(b)), err
}

// eventually retries f until it returns nil or d passes.
func eventually(t *testing.T, d time.Duration, f func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %v", d, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func describe(t *testing.T, p *provider, id string) (pluginapi.Instance, bool) {
	t.Helper()
	resp, err := p.Describe(t.Context(), &pluginapi.DescribeRequest{IDs: []string{id}})
	if err != nil {
		t.Fatalf("Describe: %v", err)
	}
	if len(resp.Instances) == 0 {
		return pluginapi.Instance{}, false
	}
	return resp.Instances[0], true
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)[:n]
}

// testLogger logs to the test's output until the test ends; reaper
// goroutines may log after that, which testing would not allow.
func testLogger(t *testing.T) *slog.Logger {
	w := &testWriter{w: t.Output()}
	t.Cleanup(func() {
		w.mu.Lock()
		w.done = true
		w.mu.Unlock()
	})
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct {
	mu   sync.Mutex
	w    io.Writer
	done bool
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done {
		return len(p), nil
	}
	return w.w.Write(p)
}

// getsid returns this process's session ID (field 6 of /proc/self/stat);
// the syscall package has no Getsid.
func getsid() int {
	data, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return -1
	}
	s := string(data)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	sid, _ := strconv.Atoi(fields[6-3])
	return sid
}

// addrOf returns the private address of an instance value.
func addrOf(inst pluginapi.Instance) string { return inst.PrivateAddress() }
