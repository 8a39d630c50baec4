package local

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kipcell/kip/pluginapi"
)

func TestLaunchLoopback(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	p := e.provider()
	inst := e.launch(p, "cell-a")

	if inst.State != pluginapi.StateRunning {
		t.Errorf("state %s (%s), want running", inst.State, inst.StateReason)
	}
	if err := pluginapi.ValidateInstance(&inst); err != nil {
		t.Error(err)
	}
	if inst.ID != instanceID(e.clusterID, "cell-a") || inst.CellID != "cell-a" || inst.InstanceType != "local.nano" ||
		inst.CapacityType != pluginapi.CapacityOnDemand || inst.Zone != "local" || inst.LaunchedAt.IsZero() {
		t.Errorf("instance %+v", inst)
	}
	wantTags := pluginapi.StandardTags(e.clusterID, e.launchRequest("cell-a"))
	for k, v := range wantTags {
		if inst.Tags[k] != v {
			t.Errorf("tag %s = %q, want %q", k, inst.Tags[k], v)
		}
	}
	addr := netip.MustParseAddr(inst.PrivateAddress())
	if subnet := netip.MustParsePrefix(e.config["loopbackSubnet"].(string)); !subnet.Contains(addr) {
		t.Errorf("address %s not in %s", addr, subnet)
	}
	if len(inst.Addresses) != 1 {
		t.Errorf("addresses %+v, want one private", inst.Addresses)
	}

	// The agent got the bootstrap file and its environment...
	rep := e.report("cell-a")
	bootstrap := filepath.Join(cellDir(e.stateDir(), "cell-a"), bootstrapFile)
	if rep.Bootstrap != "bootstrap of cell-a" {
		t.Errorf("bootstrap file holds %q", rep.Bootstrap)
	}
	wantEnv := map[string]string{
		EnvCellID: "cell-a", EnvCellBootstrap: bootstrap, EnvCellAddress: addr.String(), EnvCellPort: "6421",
		// A loopback cell shares this machine's network namespace.
		EnvCellServiceProxy: "none",
		EnvCellStateDir:     filepath.Join(cellDir(e.stateDir(), "cell-a"), agentStateDir),
		// A local cell has no cloud instance metadata.
		EnvCellIMDSEndpoint: "none",
		// The cells of this machine share their images.
		EnvCellSharedNamespace: SharedNamespace,
	}
	for k, v := range wantEnv {
		if rep.Env[k] != v {
			t.Errorf("agent env %s = %q, want %q", k, rep.Env[k], v)
		}
	}
	if _, ok := rep.Env[pluginapi.Handshake.MagicCookieKey]; ok {
		t.Error("agent inherited the plugin handshake cookie")
	}
	// ...runs in its own session, so it outlives the plugin...
	if rep.SID != rep.PID {
		t.Errorf("agent session %d, want its own (%d)", rep.SID, rep.PID)
	}
	// ...and is reachable at its address.
	eventually(t, 10*time.Second, func() error {
		got, err := dial(addr.String())
		if err == nil && got != "hello cell-a" {
			t.Fatalf("agent says %q", got)
		}
		return err
	})

	// The record holds what the plugin needs after a restart.
	r, err := readRecord(e.stateDir(), "cell-a")
	if err != nil {
		t.Fatal(err)
	}
	if r.PID != rep.PID || r.StartTime == 0 || r.Network != NetworkLoopback || r.Address != addr.String() {
		t.Errorf("record %+v", r)
	}
	if _, err := os.Stat(filepath.Join(cellDir(e.stateDir(), "cell-a"), agentLogFile)); err != nil {
		t.Errorf("agent log: %v", err)
	}
}

func TestLaunchGivesEachCellItsOwnAddress(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	p := e.provider()
	seen := map[string]string{}
	for _, cell := range []string{"cell-1", "cell-2", "cell-3"} {
		a := addrOf(e.launch(p, cell))
		if other, ok := seen[a]; ok {
			t.Errorf("%s and %s share address %s", cell, other, a)
		}
		seen[a] = cell
	}
}

func TestLaunchSubstitutesPlaceholders(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	e.config["agentCommand"] = []string{"sh", "-c", `echo "$0 $1 $2" > "$0.tmp" && mv "$0.tmp" "$0.args"; exec sleep 300`, "{bootstrap}", "{address}", "{cellID}"}
	p := e.provider()
	inst := e.launch(p, "cell-p")
	bootstrap := filepath.Join(cellDir(e.stateDir(), "cell-p"), bootstrapFile)
	eventually(t, 5*time.Second, func() error {
		data, err := os.ReadFile(bootstrap + ".args")
		if err != nil {
			return err
		}
		if got, want := strings.TrimSpace(string(data)), bootstrap+" "+inst.PrivateAddress()+" cell-p"; got != want {
			t.Fatalf("agent args %q, want %q", got, want)
		}
		return nil
	})
}

func TestLaunchIsIdempotent(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	p := e.provider()
	first := e.launch(p, "cell-i")
	again := e.launch(p, "cell-i")
	if again.ID != first.ID || again.PrivateAddress() != first.PrivateAddress() {
		t.Errorf("second launch gave %+v, first %+v", again, first)
	}

	// Eight concurrent launches of one new cell, from two "processes"
	// (providers sharing the state directory): one instance, one agent.
	q := e.provider()
	var wg sync.WaitGroup
	ids := make([]string, 8)
	for i := range ids {
		wg.Go(func() {
			prov := p
			if i%2 == 1 {
				prov = q
			}
			resp, err := prov.Launch(t.Context(), e.launchRequest("cell-c"))
			if err != nil {
				t.Errorf("launch %d: %v", i, err)
				return
			}
			ids[i] = resp.Instance.ID
		})
	}
	wg.Wait()
	for i, id := range ids {
		if id != ids[0] {
			t.Errorf("launch %d gave instance %s, launch 0 %s", i, id, ids[0])
		}
	}
	list, err := p.List(t.Context(), &pluginapi.ListRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Instances) != 2 {
		t.Errorf("List has %d instances, want 2: %+v", len(list.Instances), list.Instances)
	}
	// Exactly one agent process runs for the cell: the test agent's listen
	// would fail for a second, and the record's PID is the one that reported.
	rep := e.report("cell-c")
	r, err := readRecord(e.stateDir(), "cell-c")
	if err != nil {
		t.Fatal(err)
	}
	if r.PID != rep.PID || !alive(r.PID, r.StartTime) {
		t.Errorf("record PID %d, agent PID %d", r.PID, rep.PID)
	}
	entries, _ := os.ReadDir(filepath.Join(cellDir(e.stateDir(), "cell-c")))
	for _, en := range entries {
		if strings.Contains(en.Name(), ".tmp") {
			t.Errorf("left-over temporary file %s", en.Name())
		}
	}
}

func TestRestartedPluginFindsItsCells(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	old := e.provider()
	a := e.launch(old, "cell-r1")
	b := e.launch(old, "cell-r2")

	// A new provider on the same state directory is what a restarted
	// plugin process is: it has nothing in memory.
	p := e.provider()
	list, err := p.List(t.Context(), &pluginapi.ListRequest{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]pluginapi.Instance{}
	for _, inst := range list.Instances {
		got[inst.ID] = inst
	}
	for _, want := range []pluginapi.Instance{a, b} {
		inst, ok := got[want.ID]
		if !ok {
			t.Errorf("restarted plugin does not list %s", want.ID)
			continue
		}
		if inst.State != pluginapi.StateRunning || inst.PrivateAddress() != want.PrivateAddress() {
			t.Errorf("restarted plugin sees %+v, want running at %s", inst, want.PrivateAddress())
		}
		eventually(t, 10*time.Second, func() error {
			msg, err := dial(inst.PrivateAddress())
			if err == nil && msg != "hello "+inst.CellID {
				t.Fatalf("agent of %s says %q", inst.CellID, msg)
			}
			return err
		})
	}
	// Launch through the new plugin returns the running cell.
	if again := e.launch(p, "cell-r1"); again.ID != a.ID || again.State != pluginapi.StateRunning {
		t.Errorf("relaunch after restart gave %+v", again)
	}
	if _, err := p.Terminate(t.Context(), &pluginapi.TerminateRequest{ID: a.ID}); err != nil {
		t.Errorf("terminate after restart: %v", err)
	}
}

func TestListReturnsOnlyThisCluster(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	p := e.provider()
	mine := e.launch(p, "cell-mine")

	other := *e
	other.clusterID = "other-cluster"
	q := other.provider()
	theirs := other.launch(q, "cell-theirs")

	list, err := p.List(t.Context(), &pluginapi.ListRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Instances) != 1 || list.Instances[0].ID != mine.ID {
		t.Errorf("List = %+v, want only %s", list.Instances, mine.ID)
	}
	// A cell ID of another cluster in the same state directory is refused
	// rather than answered with the other cluster's instance.
	if _, err := p.Launch(t.Context(), e.launchRequest("cell-theirs")); !pluginapi.IsInvalidConfig(err) {
		t.Errorf("launching another cluster's cell = %v, want InvalidConfig", err)
	}
	_ = theirs
}

func TestTerminate(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	p := e.provider()
	inst := e.launch(p, "cell-t")
	r, err := readRecord(e.stateDir(), "cell-t")
	if err != nil {
		t.Fatal(err)
	}
	e.report("cell-t") // the agent is up

	resp, err := p.Terminate(t.Context(), &pluginapi.TerminateRequest{ID: inst.ID})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Instance.ID != inst.ID || resp.Instance.State != pluginapi.StateTerminated {
		t.Errorf("Terminate answered %+v", resp.Instance)
	}
	if alive(r.PID, r.StartTime) {
		t.Errorf("agent %d still runs", r.PID)
	}
	if err := syscall.Kill(-r.PID, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("agent's process group still exists: %v", err)
	}
	for _, path := range append([]string{cellDir(e.stateDir(), "cell-t"), cellLockPath(e.stateDir(), "cell-t")}, r.Cgroups...) {
		if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s still exists (%v)", path, err)
		}
	}
	if _, ok := describe(t, p, inst.ID); ok {
		t.Error("Describe still finds the terminated instance")
	}
	if _, err := p.Terminate(t.Context(), &pluginapi.TerminateRequest{ID: inst.ID}); !pluginapi.IsNotFound(err) {
		t.Errorf("second Terminate = %v, want NotFound", err)
	}
	if _, err := p.Terminate(t.Context(), &pluginapi.TerminateRequest{ID: "local-000000000000"}); !pluginapi.IsNotFound(err) {
		t.Errorf("Terminate of an unknown ID = %v, want NotFound", err)
	}
	// The cell ID names that instance for good: launching it again, also
	// from another plugin process, answers it terminated and starts nothing.
	for _, q := range []pluginapi.Provider{p, e.provider()} {
		again, err := q.Launch(t.Context(), e.launchRequest("cell-t"))
		if err != nil || again.Instance.ID != inst.ID || again.Instance.State != pluginapi.StateTerminated {
			t.Errorf("Launch of the terminated cell = %+v, %v; want instance %s, terminated", again, err, inst.ID)
		}
	}
	// Neither the Launches of the ended cell nor the second Terminate
	// leave its lock file behind: the cells directory holds nothing of it.
	for _, path := range []string{cellDir(e.stateDir(), "cell-t"), cellLockPath(e.stateDir(), "cell-t")} {
		if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("after the Launches of the terminated cell, %s exists (%v)", path, err)
		}
	}
}

// Terminate unmounts what the agent left mounted in its cell directory
// (the tmpfs of a pod's secrets, when the agent was killed) before it
// removes the directory.
func TestTerminateUnmountsWhatTheAgentLeft(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	e := newTestEnv(t)
	p := e.provider()
	inst := e.launch(p, "cell-m")
	e.report("cell-m")
	volume := filepath.Join(cellDir(e.stateDir(), "cell-m"), agentStateDir, "volumes", "my secret")
	if err := os.MkdirAll(volume, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", volume, "tmpfs", 0, ""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(volume, syscall.MNT_DETACH) })
	if err := os.WriteFile(filepath.Join(volume, "token"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Terminate(t.Context(), &pluginapi.TerminateRequest{ID: inst.ID}); err != nil {
		t.Fatal(err)
	}
	mounts, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(mounts), cellDir(e.stateDir(), "cell-m")) {
		t.Errorf("still mounted below the cell directory:\n%s", mounts)
	}
	if _, err := os.Stat(cellDir(e.stateDir(), "cell-m")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("cell directory still exists (%v)", err)
	}
}

func TestUnescapeMountPath(t *testing.T) {
	for in, want := range map[string]string{
		`/var/lib/kip`:   "/var/lib/kip",
		`/a\040b/c\011d`: "/a b/c\td",
		`/back\134slash`: `/back\slash`,
		`/not\9escape`:   `/not\9escape`,
		`/short\04`:      `/short\04`,
	} {
		if got := unescapeMountPath(in); got != want {
			t.Errorf("unescapeMountPath(%q) = %q, want %q", in, got, want)
		}
	}
}

// Tombstones are kept a day, then pruned by a later Terminate.
func TestTombstonesArePruned(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	p := e.provider()
	old := e.launch(p, "cell-old")
	if _, err := p.Terminate(t.Context(), &pluginapi.TerminateRequest{ID: old.ID}); err != nil {
		t.Fatal(err)
	}
	ts, err := readEnded(e.stateDir(), "cell-old")
	if err != nil {
		t.Fatal(err)
	}
	ts.EndedAt = ts.EndedAt.Add(-endedRetention - time.Minute)
	if err := writeEnded(e.stateDir(), ts); err != nil {
		t.Fatal(err)
	}
	recent := e.launch(p, "cell-recent")
	if _, err := p.Terminate(t.Context(), &pluginapi.TerminateRequest{ID: recent.ID}); err != nil {
		t.Fatal(err)
	}
	if _, err := readEnded(e.stateDir(), "cell-old"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a tombstone older than %s is still there (%v)", endedRetention, err)
	}
	if _, err := readEnded(e.stateDir(), "cell-recent"); err != nil {
		t.Errorf("the recent tombstone: %v", err)
	}
}

// unsupported checks for an UnsupportedError naming field.
func unsupported(field string) func(error) bool {
	return func(err error) bool {
		var u *pluginapi.UnsupportedError
		return errors.As(err, &u) && u.Field == field
	}
}

func TestTerminateKillsAnAgentIgnoringSIGTERM(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	e.config["agentCommand"] = []string{"sh", "-c", `trap "" TERM; touch "$0.ready"; while :; do sleep 1; done`, "{bootstrap}"}
	e.config["terminationGrace"] = "200ms"
	p := e.provider()
	inst := e.launch(p, "cell-stubborn")
	eventually(t, 5*time.Second, func() error {
		_, err := os.Stat(filepath.Join(cellDir(e.stateDir(), "cell-stubborn"), bootstrapFile+".ready"))
		return err
	})
	r, _ := readRecord(e.stateDir(), "cell-stubborn")
	start := time.Now()
	if _, err := p.Terminate(t.Context(), &pluginapi.TerminateRequest{ID: inst.ID}); err != nil {
		t.Fatal(err)
	}
	if alive(r.PID, r.StartTime) {
		t.Error("agent survived Terminate")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Terminate took %s with a 200ms grace", d)
	}
}

// TestAgentExitShowsTerminated: a cell whose agent keeps exiting is given
// up and ends as a cloud's instance does: terminated, "agent exited", and
// holding nothing any longer (its directory, and so its address, goes),
// since the host terminates no instance the plugin calls terminated.
func TestAgentExitShowsTerminated(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	e.config["agentCommand"] = []string{os.Args[0], testAgentArg, "{bootstrap}", "exit"}
	p := e.provider()
	inst := e.launch(p, "cell-x")
	eventually(t, 30*time.Second, func() error {
		got, ok := describe(t, p, inst.ID)
		if !ok {
			t.Fatal("exited cell vanished from Describe")
		}
		if got.State != pluginapi.StateTerminated || got.StateReason != "agent exited" {
			return errors.New("state " + string(got.State) + " (" + got.StateReason + ")")
		}
		if _, err := os.Stat(cellDir(e.stateDir(), "cell-x")); !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("the cell's directory is still there (%w)", err)
		}
		return nil
	})
	records, err := readRecords(e.stateDir())
	if err != nil || len(records) != 0 {
		t.Errorf("records after the cell was given up: %d, %v; want none", len(records), err)
	}
	// Launch does not restart it; Terminate finds it gone.
	if again := e.launch(p, "cell-x"); again.ID != inst.ID || again.State != pluginapi.StateTerminated {
		t.Errorf("Launch of an exited cell gave %+v", again)
	}
	if _, err := p.Terminate(t.Context(), &pluginapi.TerminateRequest{ID: inst.ID}); err != nil && !pluginapi.IsNotFound(err) {
		t.Errorf("Terminate of an exited cell: %v", err)
	}
}

func TestInterruptedLaunchIsResumed(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	p := e.provider()
	cfg := p.cfg.Load()
	req := e.launchRequest("cell-half")
	typ, _ := findType(cfg.catalog, req.InstanceType)
	// A plugin that crashed right after planning leaves a record without PID.
	if _, err := p.plan(t.Context(), cfg, req, typ, instanceID(cfg.clusterID, req.CellID)); err != nil {
		t.Fatal(err)
	}
	id := instanceID(cfg.clusterID, req.CellID)
	if got, _ := describe(t, p, id); got.State != pluginapi.StateTerminated || got.StateReason != reasonLaunchAborted {
		t.Errorf("interrupted launch described as %s (%s)", got.State, got.StateReason)
	}
	if inst := e.launch(p, "cell-half"); inst.ID != id || inst.State != pluginapi.StateRunning {
		t.Errorf("resumed launch gave %+v", inst)
	}
}

func TestLaunchRefusesWhatItCannotDo(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	p := e.provider()
	tests := []struct {
		name   string
		change func(*pluginapi.LaunchRequest)
		is     func(error) bool
	}{
		{"unknown type", func(r *pluginapi.LaunchRequest) { r.InstanceType = "m5.large" }, pluginapi.IsInvalidConfig},
		{"spot", func(r *pluginapi.LaunchRequest) { r.CapacityType = pluginapi.CapacitySpot }, unsupported(pluginapi.FieldCapacityType)},
		{"other zone", func(r *pluginapi.LaunchRequest) { r.Zones = []string{"us-east-1a"} }, pluginapi.IsInsufficientCapacity},
		{"security groups", func(r *pluginapi.LaunchRequest) { r.SecurityGroups = []string{"sg-1"} }, unsupported(pluginapi.FieldSecurityGroups)},
		{"instance profile", func(r *pluginapi.LaunchRequest) { r.InstanceProfile = "p" }, unsupported(pluginapi.FieldInstanceProfile)},
		{"volume size", func(r *pluginapi.LaunchRequest) { r.VolumeSizeGiB = 50 }, unsupported(pluginapi.FieldVolumeSizeGiB)},
		{"bad cell ID", func(r *pluginapi.LaunchRequest) { r.CellID = "../../etc" }, func(err error) bool { return err != nil }},
	}
	for _, tt := range tests {
		req := e.launchRequest("cell-refused")
		tt.change(req)
		if _, err := p.Launch(t.Context(), req); !tt.is(err) {
			t.Errorf("%s: Launch = %v", tt.name, err)
		}
	}
	if list, _ := p.List(t.Context(), &pluginapi.ListRequest{}); len(list.Instances) != 0 {
		t.Errorf("refused launches left instances: %+v", list.Instances)
	}
	// A zone list that includes ours is fine.
	req := e.launchRequest("cell-zoned")
	req.Zones = []string{"elsewhere", "local"}
	if _, err := p.Launch(t.Context(), req); err != nil {
		t.Errorf("Launch with our zone among others: %v", err)
	}
}

func TestCallsBeforeConfigureFail(t *testing.T) {
	p := New(testLogger(t))
	ctx := t.Context()
	if _, err := p.ListInstanceTypes(ctx, &pluginapi.ListInstanceTypesRequest{}); !pluginapi.IsNotConfigured(err) {
		t.Errorf("ListInstanceTypes before Configure = %v, want NotConfigured", err)
	}
	if _, err := p.Launch(ctx, &pluginapi.LaunchRequest{CellID: "c"}); !pluginapi.IsNotConfigured(err) {
		t.Errorf("Launch before Configure = %v, want NotConfigured", err)
	}
}

func TestRecordIsJSON(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	p := e.provider()
	e.launch(p, "cell-j")
	data, err := os.ReadFile(filepath.Join(cellDir(e.stateDir(), "cell-j"), recordFile))
	if err != nil {
		t.Fatal(err)
	}
	var fields map[string]any
	if err := json.Unmarshal(data, &fields); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"id", "cellID", "instanceType", "capacityType", "zone", "tags", "network", "address", "pid", "startTime", "launchedAt"} {
		if _, ok := fields[k]; !ok {
			t.Errorf("instance.json lacks %q: %s", k, data)
		}
	}
}
