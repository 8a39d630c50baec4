package local

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The agent's process must outlive the plugin's: the host restarts a
// crashed plugin and swaps in an upgraded one while cells keep running.
// So the agent is started in its own session (Setsid: its own process
// group, no controlling terminal), without a context that would kill it,
// with its output going straight to a file rather than through a pipe the
// plugin would have to drain. While the plugin is its parent, a goroutine
// waits for it so that an exited agent does not linger as a zombie; after
// a plugin restart, init (or the nearest subreaper) reaps it instead.

// AgentPort is the TCP port the cell agent listens on.
const AgentPort = 6421

// Environment given to the agent.
const (
	EnvCellID        = "KIP_CELL_ID"
	EnvCellBootstrap = "KIP_CELL_BOOTSTRAP"
	EnvCellAddress   = "KIP_CELL_ADDRESS"
	EnvCellPort      = "KIP_CELL_PORT"
	EnvCellStateDir  = "KIP_CELL_STATE_DIR"
	// EnvCellServiceProxy is kip-cell's --service-proxy default. A
	// loopback cell's agent shares this machine's network namespace, so
	// it gets "none": rules for ClusterIP services would be the machine's.
	EnvCellServiceProxy = "KIP_CELL_SERVICE_PROXY"
	// EnvCellIMDSEndpoint is kip-cell's --imds-endpoint default: "none",
	// as a local cell has no cloud instance metadata to watch (an agent
	// command's --imds-endpoint wins: the EC2 simulator's cells).
	EnvCellIMDSEndpoint = "KIP_CELL_IMDS_ENDPOINT"
	// EnvCellSharedNamespace is kip-cell's --shared-namespace default:
	// SharedNamespace, so that the cells of this machine pull and unpack
	// an image once for all of them instead of once each.
	EnvCellSharedNamespace = "KIP_CELL_SHARED_NAMESPACE"
	// EnvCellCgroupParent is kip-cell's --cgroup-parent default: the
	// pod's group in the cell's cgroup (record.CgroupPath/pod), which the
	// agent makes beside its own and limits to the cell's memory less its
	// reservation, and makes the containers' groups in, so that the
	// instance type's CPU and memory bound the pod and a pod that
	// exhausts them is OOM-killed, not the agent (cgroup.go); unset when
	// the cell runs without limits.
	EnvCellCgroupParent = "KIP_CELL_CGROUP_PARENT"
	// EnvCellStartGate is the agent's start gate (kip-cell's
	// cell.EnvStartGate): the number of an inherited descriptor, the read
	// end of a pipe, on which the plugin writes a byte once the agent's
	// process is in the cell's record. An agent whose plugin dies before
	// that reads the pipe's end instead and exits, so it never runs
	// unrecorded beside the agent the next plugin process starts (spawn).
	// An agent command that ignores it runs at once, unguarded.
	EnvCellStartGate = "KIP_CELL_START_GATE"
)

// startGateFD is the start gate's descriptor in the agent: the first of
// exec.Cmd.ExtraFiles.
const startGateFD = 3

// SharedNamespace is the containerd namespace the local cells share.
const SharedNamespace = "kip-cells"

// agentStateDir is the agent's own directory (logs, volumes) inside the
// cell directory, so that Terminate removes it with the cell.
const agentStateDir = "agent"

// agentCommand returns the agent's argv with {bootstrap}, {address} and
// {cellID} substituted, wrapped in `nsenter --net=<namespace>` in netns
// mode.
//
// nsenter enters the cell's network namespace and nothing else, then execs
// the agent, so the PID stays the agent's. The agent must stay in the
// machine's mount namespace, as a cloud cell's agent does (a systemd
// service): the tmpfs it mounts for secret and projected volumes must be
// seen by containerd and runc, which bind them into the containers. `ip
// netns exec` would also give it a private mount namespace (to remount
// /sys), where those mounts are invisible to the runtime and the
// containers see the empty directories underneath; it would also hide
// /sys/fs/cgroup from the agent.
func agentCommand(cfg *config, r *record, bootstrapPath string) ([]string, error) {
	sub := strings.NewReplacer("{bootstrap}", bootstrapPath, "{address}", r.Address, "{cellID}", r.CellID)
	argv := []string{cfg.agentRun}
	for _, a := range cfg.agentArgs {
		argv = append(argv, sub.Replace(a))
	}
	if r.Network != NetworkNetns {
		return argv, nil
	}
	nsenter, err := cfg.machine.lookPath("nsenter")
	if err != nil {
		return nil, fmt.Errorf("entering the cell's network namespace needs nsenter (util-linux): %w", err)
	}
	return append([]string{nsenter, "--net=" + filepath.Join(netnsDir, r.Netns), "--"}, argv...), nil
}

// agentEnv is the plugin's environment without go-plugin's variables
// (the handshake cookie, and with AutoMTLS the host's client certificate,
// are the plugin's business, not the cell's), plus the cell's.
func agentEnv(r *record, bootstrapPath, stateDir string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "PLUGIN_") || strings.HasPrefix(kv, "KIP_PLUGIN_") || strings.HasPrefix(kv, "KIP_CELL_") {
			continue
		}
		env = append(env, kv)
	}
	env = append(env,
		EnvCellID+"="+r.CellID,
		EnvCellBootstrap+"="+bootstrapPath,
		EnvCellAddress+"="+r.Address,
		EnvCellPort+"="+strconv.Itoa(AgentPort),
		EnvCellStateDir+"="+stateDir,
		EnvCellIMDSEndpoint+"=none",
		EnvCellSharedNamespace+"="+SharedNamespace,
	)
	if r.Network != NetworkNetns {
		env = append(env, EnvCellServiceProxy+"=none")
	}
	if r.CgroupPath != "" {
		env = append(env, EnvCellCgroupParent+"="+path.Join(r.CgroupPath, podCgroup))
	}
	return env
}

// startAgent starts argv in dir, where m's commands run, with its output
// appended to agent.log. The caller must Wait for the returned command
// (see the package comment).
func startAgent(m machine, argv, env []string, dir string, gate *os.File) (*exec.Cmd, error) {
	logFile, err := os.OpenFile(filepath.Join(dir, agentLogFile), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	defer logFile.Close() // the child has its own copy
	cmd, err := m.start(argv[0], func(path string) *exec.Cmd {
		cmd := exec.Command(path, argv[1:]...)
		cmd.Env = env
		cmd.Dir = dir
		cmd.Stdout = logFile
		cmd.Stderr = logFile
		if gate != nil {
			cmd.ExtraFiles = []*os.File{gate}
			cmd.Env = append(cmd.Env, EnvCellStartGate+"="+strconv.Itoa(startGateFD))
		}
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		return cmd
	})
	if err != nil {
		return nil, fmt.Errorf("starting agent: %w", err)
	}
	return cmd, nil
}

// agentBinDir is the directory of <stateDir> that holds the agent's
// executable with a MountNamespace.
const agentBinDir = "bin"

// installAgent copies the agent's executable to cfg.agentRun, where the
// mount namespace of the cells sees it, unless it is there already with
// the same contents. A new copy replaces the old by a rename, so running
// agents keep theirs. It streams: the executable is tens of MiB.
func installAgent(cfg *config) error {
	if cfg.agentRun == cfg.agentPath {
		return nil
	}
	if same, err := sameContents(cfg.agentPath, cfg.agentRun); err == nil && same {
		return nil
	}
	if err := copyExecutable(cfg.agentPath, cfg.agentRun); err != nil {
		return fmt.Errorf("installing the agent in the state directory: %w", err)
	}
	return nil
}

// sameContents reports whether files a and b hold the same bytes.
func sameContents(a, b string) (bool, error) {
	sum := func(name string) (int64, []byte, error) {
		f, err := os.Open(name) //nolint:gosec // G304: the agent's executable and its copy
		if err != nil {
			return 0, nil, err
		}
		defer f.Close()
		h := sha256.New()
		n, err := io.Copy(h, f)
		return n, h.Sum(nil), err
	}
	na, ha, err := sum(a)
	if err != nil {
		return false, err
	}
	nb, hb, err := sum(b)
	if err != nil {
		return false, err
	}
	return na == nb && bytes.Equal(ha, hb), nil
}

// copyExecutable copies src to dst (mode 0755) through a temporary file
// in dst's directory, renamed into place.
func copyExecutable(src, dst string) error {
	in, err := os.Open(src) //nolint:gosec // G304: the agent's executable
	if err != nil {
		return err
	}
	defer in.Close()
	dir := filepath.Dir(dst)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, ".agent-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // after the rename, a no-op
	_, err = io.Copy(tmp, in)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o755) //nolint:gosec // G302: an executable
	}
	if err == nil {
		err = os.Rename(tmp.Name(), dst)
	}
	return err
}

// procStat returns the state (field 3) and start time (field 22, in clock
// ticks since boot) of process pid from /proc/<pid>/stat.
func procStat(pid int) (state byte, startTime uint64, err error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, err
	}
	return parseStat(string(data))
}

// parseStat parses the contents of /proc/<pid>/stat. The command name
// (field 2) is in parentheses and may itself hold spaces and parentheses,
// so fields are counted from the last ')'.
func parseStat(s string) (state byte, startTime uint64, err error) {
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, 0, errors.New("malformed /proc stat")
	}
	fields := strings.Fields(s[i+1:]) // fields[0] is field 3
	if len(fields) < 20 || len(fields[0]) != 1 {
		return 0, 0, errors.New("malformed /proc stat")
	}
	startTime, err = strconv.ParseUint(fields[22-3], 10, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("malformed /proc stat start time: %w", err)
	}
	return fields[0][0], startTime, nil
}

// alive reports whether the process pid that started at startTime still
// runs. A zombie has exited; a different start time is another process
// that was given the same PID.
func alive(pid int, startTime uint64) bool {
	if pid <= 0 {
		return false
	}
	state, st, err := procStat(pid)
	return err == nil && st == startTime && state != 'Z' && state != 'X'
}

// stopAgent ends the agent's process group: SIGTERM, then SIGKILL after
// grace. It returns once the agent is gone, or with ctx.Err(). The group
// is signalled only while its leader is verifiably the agent, so a reused
// PID is never signalled.
func stopAgent(ctx context.Context, pid int, startTime uint64, grace time.Duration) error {
	if !alive(pid, startTime) {
		return nil
	}
	_ = syscall.Kill(-pid, syscall.SIGTERM)
	if waitGone(ctx, pid, startTime, grace) {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	if waitGone(ctx, pid, startTime, 10*time.Second) {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return fmt.Errorf("agent process %d survived SIGKILL", pid)
}

// waitGone polls until the process is gone (true), d passes or ctx ends.
func waitGone(ctx context.Context, pid int, startTime uint64, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for alive(pid, startTime) {
		if time.Now().After(deadline) {
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(20 * time.Millisecond):
		}
	}
	return true
}
