package local

import (
	"errors"
	"fmt"
	"os"
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
