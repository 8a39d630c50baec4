package local

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/kipcell/kip/pluginapi"
)

func TestDeadAgentIsRestarted(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	p := e.provider()
	inst := e.launch(p, "cell-r")
	first := e.report("cell-r")
	if err := syscall.Kill(first.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// The cell runs all along: a new agent answers at the same address.
	r := waitRestarted(t, e, p, inst, first.PID)
	if r.Restarts != 1 || r.QuickExits != 1 || r.GaveUp {
		t.Errorf("record after one restart: restarts %d, quick exits %d, gave up %v", r.Restarts, r.QuickExits, r.GaveUp)
	}
	// Terminate is not undone by the supervisor.
	if _, err := p.Terminate(t.Context(), &pluginapi.TerminateRequest{ID: inst.ID}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * superviseInterval)
	if alive(r.PID, r.StartTime) {
		t.Error("agent survived Terminate")
	}
	if _, err := os.Stat(cellDir(e.stateDir(), "cell-r")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("cell directory after Terminate: %v", err)
	}
}

// A supervisor that saw the agent dead while Terminate stopped it takes
// the cell's lock after Terminate removed the lock file (and so makes the
// file again); finding the record gone, it must not leave the file behind.
func TestRestartAfterTerminateLeavesNoLockFile(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	p := e.provider()
	if p.restartAgent(p.cfg.Load(), "cell-gone", 1, p.log) {
		t.Error("restartAgent of a terminated cell: still to be supervised")
	}
	if _, err := os.Stat(cellLockPath(e.stateDir(), "cell-gone")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("lock file of a terminated cell after restartAgent: %v", err)
	}
}

func TestRestartDelay(t *testing.T) {
	for quick, want := range map[int]time.Duration{0: restartInitial, 1: 2 * restartInitial, 3: 8 * restartInitial, 20: restartMax} {
		if got := restartDelay(quick); got != want {
			t.Errorf("restartDelay(%d) = %s, want %s", quick, got, want)
		}
	}
}

func TestRestartedPluginAdoptsTheSupervision(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	old := e.provider()
	// The old plugin process does not supervise this cell (as if it had
	// exited after the launch).
	old.supervisedMu.Lock()
	old.supervised["cell-adopted"] = true
	old.supervisedMu.Unlock()
	inst := e.launch(old, "cell-adopted")
	first := e.report("cell-adopted")
	// A new plugin process on the same state directory.
	p := e.provider()
	if err := syscall.Kill(first.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitRestarted(t, e, p, inst, first.PID)
}

// waitRestarted waits until the cell of inst has an agent other than
// pid that answers, and checks that Describe says the cell runs all the
// while; it returns the cell's record then.
func waitRestarted(t *testing.T, e *testEnv, p *provider, inst pluginapi.Instance, pid int) *record {
	t.Helper()
	var r *record
	// A restart takes about half a second (a poll, the back-off, the
	// agent's start); the bound is for a machine under load (make test
	// runs the packages' tests in parallel on two cores).
	eventually(t, 30*time.Second, func() error {
		if got, ok := describe(t, p, inst.ID); !ok || got.State != pluginapi.StateRunning {
			t.Fatalf("cell after its agent died: %+v", got)
		}
		var err error
		if r, err = readRecord(e.stateDir(), inst.CellID); err != nil {
			return err
		}
		if r.PID == pid || !alive(r.PID, r.StartTime) {
			return fmt.Errorf("agent not restarted: record %+v", r)
		}
		_, err = dial(addrOf(inst))
		return err
	})
	return r
}

// TestCellGivenUpByAnOlderPluginIsTerminated: a record an older plugin
// marked given up (and left, with its directory and address) is
// terminated by the next plugin's Configure.
func TestCellGivenUpByAnOlderPluginIsTerminated(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	old := e.provider()
	inst := e.launch(old, "cell-old")
	r, err := readRecord(e.stateDir(), "cell-old")
	if err != nil {
		t.Fatal(err)
	}
	_ = syscall.Kill(r.PID, syscall.SIGKILL)
	r.GaveUp = true
	if err := writeRecord(e.stateDir(), r); err != nil {
		t.Fatal(err)
	}
	p := e.provider()
	eventually(t, 10*time.Second, func() error {
		if _, err := os.Stat(cellDir(e.stateDir(), "cell-old")); !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("the cell's directory is still there (%w)", err)
		}
		return nil
	})
	if got, ok := describe(t, p, inst.ID); !ok || got.State != pluginapi.StateTerminated || got.StateReason != reasonAgentExited {
		t.Errorf("Describe = %+v, %v; want terminated, %q", got, ok, reasonAgentExited)
	}
}

// dyingPluginArg makes the test binary a plugin process that is killed
// (its host was: the plugin dies with it) between starting a cell's agent
// and recording it: "<test binary> kip-test-dying-plugin <config file>
// <cell ID> <cluster ID>" launches the cell and dies in spawn's afterStart, having
// written the agent's PID to <config file>.agent-pid.
const dyingPluginArg = "kip-test-dying-plugin"

func dyingPlugin(configPath, cellID, clusterID string) {
	config, err := os.ReadFile(configPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	afterStart = func(pid int) {
		_ = os.WriteFile(configPath+".agent-pid", []byte(strconv.Itoa(pid)), 0o600)
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	}
	p := New(slog.New(slog.NewTextHandler(os.Stderr, nil))).(*provider)
	p.cgroupParent = testCgroupParent
	ctx := context.Background()
	if _, err := p.Configure(ctx, &pluginapi.ConfigureRequest{ClusterID: clusterID, NodeName: "kip-test", Config: config}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	e := &testEnv{}
	_, err = p.Launch(ctx, e.launchRequest(cellID))
	fmt.Fprintln(os.Stderr, "Launch returned, the plugin was to die before:", err)
	os.Exit(2)
}

// TestAgentOfAPluginKilledBeforeRecordingItExits: a plugin process killed
// between starting an agent and recording it leaves no agent running
// unrecorded (its start gate ends unopened), so the next plugin process
// launches the cell again with one agent, which answers on the cell's
// address. Before the gate the orphan ran on, nobody's to stop; in
// netns mode the two agents of one cell tore down each other's pod
// network and the recorded one, unable to listen, exited until the cell
// was given up (TestHAKillLeaderMidBurst, once in CI).
func TestAgentOfAPluginKilledBeforeRecordingItExits(t *testing.T) {
	e := newTestEnv(t)
	configPath := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(configPath, e.configJSON(), 0o600); err != nil {
		t.Fatal(err)
	}
	cellID := "cell-orphan"
	cmd := exec.Command(os.Args[0], dyingPluginArg, configPath, cellID, e.clusterID)
	cmd.Stderr = t.Output()
	err := cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("the plugin process ended with %v, want killed in spawn", err)
	}
	data, err := os.ReadFile(configPath + ".agent-pid")
	if err != nil {
		t.Fatalf("the plugin was killed before it started the agent: %v", err)
	}
	pid, _ := strconv.Atoi(string(data))
	t.Cleanup(func() {
		if _, start, err := procStat(pid); err == nil && alive(pid, start) {
			_ = syscall.Kill(-pid, syscall.SIGKILL) // a failed test's orphan
		}
	})
	eventually(t, 10*time.Second, func() error {
		if err := syscall.Kill(pid, 0); err == nil {
			if state, _, err := procStat(pid); err == nil && state != 'Z' {
				return fmt.Errorf("the unrecorded agent %d still runs (state %c)", pid, state)
			}
		}
		return nil
	})
	if _, err := os.Stat(filepath.Join(cellDir(e.stateDir(), cellID), bootstrapFile+".report")); err == nil {
		t.Errorf("the unrecorded agent went past its start gate")
	}

	p := e.provider()
	inst := e.launch(p, cellID)
	if rep := e.report(cellID); rep.PID == pid {
		t.Fatalf("the relaunched cell reports the orphan's PID %d", pid)
	}
	eventually(t, 10*time.Second, func() error {
		got, err := dial(inst.PrivateAddress())
		if err != nil {
			return err
		}
		if want := "hello " + cellID; got != want {
			return fmt.Errorf("the cell's address answers %q, want %q", got, want)
		}
		return nil
	})
}
