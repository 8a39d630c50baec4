package local

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"net/netip"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"github.com/kipcell/kip/pluginapi"
)

// Launch starts the agent process of one cell.
//
// It is idempotent on the cell ID, which is what the contract asks of every
// plugin and how a cloud plugin uses its cloud's client token: under the
// cell's lock, a cell that already has a record is answered from the
// record, never launched twice. A record without a PID is a launch that
// was interrupted (the plugin crashed, or ctx ended); it is resumed, since
// every step is idempotent.
//
// The record, with the tags, is written before anything is created, so a
// cell is visible to List from its first resource on, as the contract
// requires of tags. A cell that was terminated has a tombstone instead
// (ended.go): Launch answers its instance, terminated, and starts nothing.
func (p *provider) Launch(ctx context.Context, req *pluginapi.LaunchRequest) (*pluginapi.LaunchResponse, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cfg, err := p.config()
	if err != nil {
		return nil, err
	}
	typ, err := checkLaunch(cfg, req)
	if err != nil {
		return nil, err
	}
	id := instanceID(cfg.clusterID, req.CellID)
	log := p.log.With("cell", req.CellID, "instance", id, "pod", req.PodNamespace+"/"+req.PodName)

	unlock, err := p.cellLock(ctx, cfg, req.CellID)
	if err != nil {
		return nil, err
	}
	defer unlock()

	switch t, err := readEnded(cfg.stateDir, req.CellID); {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("launching cell %s: %w", req.CellID, err)
	case t.Instance.ID != id:
		return nil, pluginapi.NewInvalidConfig("stateDir", "cell %s already existed as instance %s of another cluster; give each cluster its own stateDir", req.CellID, t.Instance.ID)
	default:
		log.Info("cell was terminated; answering its instance, starting nothing", "ended_at", t.EndedAt)
		p.dropCellLock(cfg, req.CellID)
		return &pluginapi.LaunchResponse{Instance: t.Instance}, nil
	}

	r, err := readRecord(cfg.stateDir, req.CellID)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if r, err = p.plan(ctx, cfg, req, typ, id); err != nil {
			return nil, fmt.Errorf("launching cell %s: %w", req.CellID, err)
		}
	case err != nil:
		return nil, fmt.Errorf("launching cell %s: %w", req.CellID, err)
	case r.ID != id:
		return nil, pluginapi.NewInvalidConfig("stateDir", "cell %s already exists as instance %s of another cluster; give each cluster its own stateDir", req.CellID, r.ID)
	case r.PID != 0:
		log.Debug("cell already launched")
		return &pluginapi.LaunchResponse{Instance: p.instance(cfg, r)}, nil
	default:
		log.Info("resuming interrupted launch")
	}

	if err := p.start(ctx, cfg, r, req.Bootstrap, log); err != nil {
		// Undo what this attempt created, even if ctx has ended.
		cleanupCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if cerr := p.destroy(cleanupCtx, cfg, r); cerr != nil {
			log.Error("cleaning up after failed launch", "error", cerr)
		}
		return nil, fmt.Errorf("launching cell %s: %w", req.CellID, err)
	}
	log.Info("launched", "type", r.InstanceType, "address", r.Address, "network", r.Network, "pid", r.PID)
	go p.supervise(cfg, r.CellID)
	return &pluginapi.LaunchResponse{Instance: p.instance(cfg, r)}, nil
}

// checkLaunch refuses requests this plugin cannot satisfy, with the error
// kinds the host acts on, and returns the instance type.
func checkLaunch(cfg *config, req *pluginapi.LaunchRequest) (pluginapi.InstanceType, error) {
	var none pluginapi.InstanceType
	if !cellIDPattern.MatchString(req.CellID) {
		return none, fmt.Errorf("launching: cell ID %q is not at most 63 characters of [a-z0-9-]", req.CellID)
	}
	typ, ok := findType(cfg.catalog, req.InstanceType)
	if !ok {
		return none, pluginapi.NewInvalidConfig("instanceTypes", "instance type %q is not in the catalog", req.InstanceType)
	}
	switch req.CapacityType {
	case pluginapi.CapacityOnDemand, "":
	default:
		return none, pluginapi.NewUnsupportedField(pluginapi.FieldCapacityType, "capacity type %q: the local plugin offers on-demand only", req.CapacityType)
	}
	if len(req.Zones) > 0 && !slices.Contains(req.Zones, cfg.zone) {
		return none, pluginapi.NewInsufficientCapacity(req.InstanceType, req.Zones[0], pluginapi.CapacityOnDemand,
			fmt.Sprintf("the local plugin has only zone %q", cfg.zone))
	}
	if len(req.SecurityGroups) > 0 {
		return none, pluginapi.NewUnsupportedField(pluginapi.FieldSecurityGroups, "local cells have no security groups")
	}
	if req.InstanceProfile != "" {
		return none, pluginapi.NewUnsupportedField(pluginapi.FieldInstanceProfile, "local cells have no instance profile")
	}
	if req.VolumeSizeGiB != 0 {
		return none, pluginapi.NewUnsupportedField(pluginapi.FieldVolumeSizeGiB, "local cells have no volume of their own")
	}
	return typ, nil
}

// plan decides everything about a new cell (its ID, address, names of its
// network resources) and writes its record, PID still zero. The address is
// allocated under the state directory's address lock and the record is
// written before the lock is released, so the next allocation sees it.
func (p *provider) plan(ctx context.Context, cfg *config, req *pluginapi.LaunchRequest, typ pluginapi.InstanceType, id string) (*record, error) {
	if err := os.MkdirAll(cellDir(cfg.stateDir, req.CellID), 0o700); err != nil {
		return nil, err
	}
	r := &record{
		ID:           id,
		CellID:       req.CellID,
		InstanceType: typ.Name,
		CapacityType: pluginapi.CapacityOnDemand,
		Zone:         cfg.zone,
		Tags:         pluginapi.StandardTags(cfg.clusterID, req),
		Network:      cfg.network,
		MilliCPU:     typ.MilliCPU,
		MemoryBytes:  typ.MemoryBytes,
		LaunchedAt:   time.Now().UTC(),
	}
	subnet, reserved := cfg.loopbackSubnet, []netip.Addr(nil)
	if cfg.network == NetworkNetns {
		subnet, reserved = cfg.subnet, []netip.Addr{gateway(cfg.subnet)}
		r.Netns, r.Veth, r.Bridge = netnsName(id), vethName(id), cfg.bridge
		r.Gateway, r.Prefix = gateway(cfg.subnet).String(), cfg.subnet.Bits()
	}

	unlock, err := p.locks.lock(ctx, "address", filepath.Join(cfg.stateDir, "address.lock"))
	if err != nil {
		return nil, err
	}
	defer unlock()
	records, err := readRecords(cfg.stateDir)
	if err != nil {
		return nil, err
	}
	used := usedAddresses(records)
	addr, ok := freeAddress(subnet, used, readLastAddress(cfg.stateDir), reserved...)
	last := addr
	if ok && cfg.network == NetworkNetns {
		// The pod's own address, as a cloud gives a secondary one.
		used[addr] = true
		var pod netip.Addr
		if pod, ok = freeAddress(subnet, used, addr, reserved...); ok {
			r.PodAddress, last = pod.String(), pod
		}
	}
	if !ok {
		return nil, pluginapi.NewInsufficientCapacity(typ.Name, cfg.zone, pluginapi.CapacityOnDemand,
			fmt.Sprintf("no free address left in %s", subnet))
	}
	if err := writeLastAddress(cfg.stateDir, last); err != nil {
		return nil, fmt.Errorf("recording the address handed out: %w", err)
	}
	r.Address = addr.String()
	return r, writeRecord(cfg.stateDir, r)
}

// start brings a planned cell up: bootstrap file, network, cgroups, then
// the agent process, whose PID and start time complete the record.
func (p *provider) start(ctx context.Context, cfg *config, r *record, bootstrap []byte, log *slog.Logger) error {
	dir := cellDir(cfg.stateDir, r.CellID)
	bootstrapPath := filepath.Join(dir, bootstrapFile)
	if err := os.WriteFile(bootstrapPath, bootstrap, 0o600); err != nil {
		return err
	}
	if r.Network == NetworkNetns {
		if err := cfg.machine.setupNetns(ctx, r); err != nil {
			return err
		}
		if cfg.masquerade {
			if err := cfg.machine.ensureMasquerade(ctx, r.Bridge, cfg.subnet); err != nil {
				return err
			}
		}
	}

	// Limits: a machine without writable cgroups still runs the cell.
	if len(r.Cgroups) == 0 {
		dirs, err := createCgroups(p.cgroupRoot, p.cgroupParent, r.CellID, r.MilliCPU, r.MemoryBytes)
		if err != nil {
			r.LimitsNotEnforced = err.Error()
			log.Warn("launching without CPU and memory limits", "error", err)
		} else {
			r.Cgroups, r.LimitsNotEnforced = dirs, ""
			r.CgroupPath = "/" + path.Join(p.cgroupParent, r.CellID)
		}
		if err := writeRecord(cfg.stateDir, r); err != nil {
			return err
		}
	}

	if err := ctx.Err(); err != nil {
		return err // the last chance to give up before there is a process
	}
	r.AgentStartedAt = time.Now().UTC()
	return p.spawn(cfg, r, log)
}

// spawn starts the cell's agent process (the first time, or again after
// it exited: supervise.go) and records it: PID and start time, in the
// cell's cgroups. The caller holds the cell's lock.
//
// The agent waits at its start gate (EnvCellStartGate) until it is
// recorded and in the cell's cgroups. This process may be killed in
// between (its host was: the plugin dies with it); then the gate's pipe
// ends, and the agent exits instead of running on unrecorded, where no
// supervisor would stop it and the next one would start a second agent of
// the cell beside it (afterStart is the tests' hook into that window).
func (p *provider) spawn(cfg *config, r *record, log *slog.Logger) error {
	dir := cellDir(cfg.stateDir, r.CellID)
	bootstrapPath := filepath.Join(dir, bootstrapFile)
	argv, err := agentCommand(cfg, r, bootstrapPath)
	if err != nil {
		return err
	}
	gate, opener, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("starting agent: making its start gate: %w", err)
	}
	defer opener.Close() // unopened: the agent exits
	cmd, err := startAgent(cfg.machine, argv, agentEnv(r, bootstrapPath, filepath.Join(dir, agentStateDir)), dir, gate)
	gate.Close() // the child has its own copy
	if err != nil {
		return err
	}
	pid := cmd.Process.Pid
	if afterStart != nil {
		afterStart(pid)
	}
	// Until Wait, the child cannot be reaped, so its /proc entry is there
	// even if it has already exited.
	_, startTime, err := procStat(pid)
	if err == nil {
		r.PID, r.StartTime = pid, startTime
		if jerr := joinCgroups(r.Cgroups, pid); jerr != nil {
			r.LimitsNotEnforced = jerr.Error()
			log.Warn("agent runs without CPU and memory limits", "error", jerr)
		}
		err = writeRecord(cfg.stateDir, r)
	}
	if err == nil {
		if _, werr := opener.Write([]byte{1}); werr != nil {
			// The agent is gone already (a read end closed): its
			// supervisor will see it dead and start it again.
			log.Warn("opening the agent's start gate", "pid", pid, "error", werr)
		}
	}
	go p.reap(cmd, r.CellID)
	if err != nil {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		return err
	}
	return nil
}

// afterStart, when set (tests), is called between an agent's start and
// its record.
var afterStart func(pid int)

// reap waits for an agent this process started, so it leaves no zombie.
func (p *provider) reap(cmd *exec.Cmd, cellID string) {
	err := cmd.Wait()
	p.log.Info("agent exited", "cell", cellID, "pid", cmd.Process.Pid, "status", exitStatus(err))
}

func exitStatus(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

// instance turns a record into the contract's Instance, with the state the
// agent process is in now.
func (p *provider) instance(cfg *config, r *record) pluginapi.Instance {
	state, reason := cellState(cfg.stateDir, r)
	return pluginapi.Instance{
		ID:           r.ID,
		CellID:       r.CellID,
		InstanceType: r.InstanceType,
		CapacityType: r.CapacityType,
		Zone:         r.Zone,
		State:        state,
		StateReason:  reason,
		Addresses:    r.addresses(),
		Tags:         maps.Clone(r.Tags),
		LaunchedAt:   r.LaunchedAt,
	}
}

// addresses are the cell's address and, in netns mode, its pod's.
func (r *record) addresses() []pluginapi.Address {
	out := []pluginapi.Address{{Type: pluginapi.AddressPrivate, Address: r.Address}}
	if r.PodAddress != "" {
		out = append(out, pluginapi.Address{Type: pluginapi.AddressPod, Address: r.PodAddress})
	}
	return out
}
