package local

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kipcell/kip/pluginapi"
)

// otherMountNamespace starts a process in a mount namespace of its own (a
// private copy of this one) and returns the path of that namespace; the
// process ends with the test. It skips the test where that cannot be done.
func otherMountNamespace(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("a mount namespace of its own needs root")
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("needs unshare (util-linux)")
	}
	cmd := exec.Command("unshare", "--mount", "--propagation", "private", "sleep", "3600")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	ours, err := os.Readlink("/proc/self/ns/mnt")
	if err != nil {
		t.Fatal(err)
	}
	path := "/proc/" + strconv.Itoa(cmd.Process.Pid) + "/ns/mnt"
	deadline := time.Now().Add(10 * time.Second)
	for {
		// unshare joins its namespace, then execs sleep.
		if theirs, err := os.Readlink(path); err == nil && theirs != ours {
			return path
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s is still this process's mount namespace", path)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// inMountNamespace runs argv in the mount namespace at ns.
func inMountNamespace(t *testing.T, ns string, argv ...string) {
	t.Helper()
	out, err := exec.Command("nsenter", append([]string{"--mount=" + ns, "--"}, argv...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(argv, " "), err, out)
	}
}

// With mountNamespace, the agent runs in that mount namespace, where the
// machine's containerd sees what it mounts, from a copy of its executable
// in the state directory, and in its cell's network namespace.
func TestAgentRunsInTheMountNamespace(t *testing.T) {
	t.Parallel()
	e := newNetnsEnv(t)
	ns := otherMountNamespace(t)
	e.config["mountNamespace"] = ns
	p := e.provider()
	inst := e.launch(p, "cell-m1")
	rep := e.report(inst.CellID)

	want, err := os.Readlink(ns)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Mountns != want {
		t.Errorf("agent's mount namespace %s, want %s (mountNamespace)", rep.Mountns, want)
	}
	ownNet, _ := os.Readlink("/proc/self/ns/net")
	if rep.Netns == "" || rep.Netns == ownNet {
		t.Errorf("agent's network namespace %q, want its cell's", rep.Netns)
	}
	exe, err := os.Readlink("/proc/" + strconv.Itoa(rep.PID) + "/exe")
	if err != nil {
		t.Fatal(err)
	}
	if wantExe := filepath.Join(e.stateDir(), agentBinDir, filepath.Base(os.Args[0])); exe != wantExe {
		t.Errorf("agent runs %s, want the copy %s", exe, wantExe)
	}

}

// A state directory that is another directory in the mount namespace is
// refused, naming the key: the cells' files would not be where the agent
// and containerd look.
func TestMountNamespaceNeedsTheSameStateDir(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	ns := otherMountNamespace(t)
	inMountNamespace(t, ns, "mount", "-t", "tmpfs", "tmpfs", e.stateDir())
	e.config["mountNamespace"] = ns
	p := New(testLogger(t)).(*provider)
	_, err := p.Configure(t.Context(), &pluginapi.ConfigureRequest{ClusterID: e.clusterID, Config: e.configJSON()})
	var invalid *pluginapi.InvalidConfigError
	if !errors.As(err, &invalid) || invalid.Key != "stateDir" || !strings.Contains(err.Error(), "another directory") {
		t.Fatalf("Configure with a state directory hidden in the mount namespace: %v, want InvalidConfig on stateDir", err)
	}

	e.config["mountNamespace"] = "/proc/self/ns/no-such"
	_, err = p.Configure(t.Context(), &pluginapi.ConfigureRequest{ClusterID: e.clusterID, Config: e.configJSON()})
	if !errors.As(err, &invalid) || invalid.Key != "mountNamespace" {
		t.Fatalf("Configure with no such mount namespace: %v, want InvalidConfig on mountNamespace", err)
	}
}

// installAgent copies the agent where the cells' mount namespace runs it:
// once, again when the executable changed (a kip upgrade), and by a rename,
// so a running agent keeps the file it runs.
func TestInstallAgent(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "kip-cell")
	cfg := &config{agentPath: src, agentRun: filepath.Join(dir, "state", agentBinDir, "kip-cell")}
	inode := func() uint64 {
		fi, err := os.Stat(cfg.agentRun)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Sys().(*syscall.Stat_t).Ino
	}
	steps := []struct {
		name     string
		contents string
		replaced bool
	}{
		{"first", "v1", true},
		{"unchanged", "v1", false},
		{"upgraded", "v2", true},
	}
	var before uint64
	for _, s := range steps {
		if err := os.WriteFile(src, []byte(s.contents), 0o755); err != nil { //nolint:gosec // G306: an executable
			t.Fatal(err)
		}
		if err := installAgent(cfg); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		got, err := os.ReadFile(cfg.agentRun)
		if err != nil || string(got) != s.contents {
			t.Errorf("%s: the copy holds %q (%v), want %q", s.name, got, err, s.contents)
		}
		if fi, _ := os.Stat(cfg.agentRun); fi == nil || fi.Mode().Perm()&0o100 == 0 {
			t.Errorf("%s: the copy is not executable", s.name)
		}
		if now := inode(); (now != before) != s.replaced {
			t.Errorf("%s: replaced = %v, want %v", s.name, now != before, s.replaced)
		}
		before = inode()
	}
}
