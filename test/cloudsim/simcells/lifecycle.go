package simcells

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// CellStarter starts and stops the cell behind each simulated instance.
//
// Start is called once per instance, in the background after the call
// that created it answered; the instance does not run before it returns,
// and runs with the returned addresses once its boot delay has passed. If
// Start fails the simulator ends the instance as its cloud ends one that
// failed to boot. Stop is called once the instance is shutting down (or
// its Start failed), always after Start has returned; it must be
// idempotent, and a cell it does not know is already stopped.
type CellStarter interface {
	Start(ctx context.Context, instanceID, instanceType string, bootstrap []byte) (Addresses, error)
	Stop(ctx context.Context, instanceID string) error
}

// Addresses are what a started cell has: Private, its instance's private
// address, where its agent listens; Pod, the pod's own address, which the
// cell routes to the pod's network namespace (pluginapi.AddressPod), or
// empty when the cell has none (a local cell in loopback mode). A
// simulator shows Pod as the address the cloud gives a pod (EC2's secondary
// private address, GCE's alias IP) when the launch asked for one.
type Addresses struct {
	Private, Pod string
}

// AgentStarter is a CellStarter that starts a cell's agent apart from the
// cell: Start brings up the instance's machine (its address) with the
// agent held back, and StartAgent lets it start. The simulator calls it
// its agent delay after the instance runs, and never for an instance
// whose agent is silenced. It must be idempotent.
type AgentStarter interface {
	CellStarter
	StartAgent(ctx context.Context, instanceID string) error
}

// IMDSLocator is implemented by a CellStarter whose cells reach their
// instance metadata at a unix socket of its choosing (LocalCells: the
// {imds} placeholder of its agent command). A simulator serves an
// instance's metadata there.
type IMDSLocator interface {
	IMDSSocket(instanceID string) string
}

// StopTimeout bounds one Stop of a cell.
const StopTimeout = time.Minute

// Cell is the bookkeeping of one instance's cell. A simulator keeps one
// in each instance record, fills in ID, Type, Bootstrap and LogAttr, and
// reads the rest under the lock it gave the Lifecycle, which changes them
// under that lock.
type Cell struct {
	// ID is the instance's ID (EC2) or name (GCE): the cell's ID for the
	// CellStarter.
	ID        string
	Type      string
	Bootstrap []byte
	// LogAttr is the kip cell of the instance, for logs.
	LogAttr string

	// Address is where the cell listens, once Started; PodAddress is the
	// pod's own address the cell routes, if it has one (Addresses.Pod).
	Address    string
	PodAddress string
	Starting   bool
	Started    bool
	// Silent: the agent never starts (Lifecycle.Silence); AgentStarted:
	// it did, AgentDelay after the instance ran (AgentStarter).
	Silent        bool
	AgentDelay    time.Duration
	AgentStarting bool
	AgentStarted  bool
	StopRequested bool
	Stopped       bool
	// StoppedAt is when the cell stopped.
	StoppedAt time.Time
}

// Instance is what a Lifecycle needs of a simulator's instance record.
// Its methods are called with the simulator's lock held.
type Instance interface {
	// Cell is the instance's cell bookkeeping.
	Cell() *Cell
	// ReadyAt is when the instance runs (its boot delay after it was
	// created); its agent starts AgentDelay later.
	ReadyAt() time.Time
	// StartFailed ends an instance whose cell could not start, as the
	// cloud ends one that failed to boot.
	StartFailed(now time.Time)
	// CellStopped is called once the instance's cell has stopped (or,
	// never started, will not): a simulator stops what it served the
	// cell (its metadata) there.
	CellStopped(now time.Time)
}

// LifecycleConfig configures a Lifecycle.
type LifecycleConfig struct {
	// Starter starts the cells; nil means instances have no process:
	// Start marks the cell started at once (the simulator gives it an
	// address) and Stop stopped.
	Starter CellStarter
	// StartTimeout bounds one CellStarter.Start and StartAgent.
	StartTimeout time.Duration
	// Lock is the simulator's lock, which guards its instances and their
	// Cells.
	Lock sync.Locker
	// AgentDelay is the first SetAgentDelay.
	AgentDelay time.Duration
	Now        func() time.Time
	Logger     *slog.Logger
}

// Lifecycle starts and stops the cells of a simulator's instances in the
// background, through a CellStarter, and starts their agents when due.
// Methods whose names end in Locked are called with the simulator's lock
// held; the others take it.
type Lifecycle struct {
	starter CellStarter
	timeout time.Duration
	mu      sync.Locker
	now     func() time.Time
	log     *slog.Logger

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// Guarded by mu.
	agentDelay time.Duration
	silent     int        // the next starts whose agents never start
	all        []Instance // every instance started, for Close
}

// NewLifecycle returns a Lifecycle for cfg.
func NewLifecycle(cfg LifecycleConfig) *Lifecycle {
	ctx, cancel := context.WithCancel(context.Background())
	return &Lifecycle{
		starter: cfg.Starter, timeout: cfg.StartTimeout, mu: cfg.Lock, now: cfg.Now, log: cfg.Logger,
		ctx: ctx, cancel: cancel, agentDelay: cfg.AgentDelay,
	}
}

// HasStarter reports whether cells are started by a CellStarter.
func (l *Lifecycle) HasStarter() bool { return l.starter != nil }

// IMDSSocket is where the CellStarter wants the instance's metadata
// served (IMDSLocator), or "".
func (l *Lifecycle) IMDSSocket(instanceID string) string {
	if loc, ok := l.starter.(IMDSLocator); ok {
		return loc.IMDSSocket(instanceID)
	}
	return ""
}

// SetAgentDelay sets how long after they run the instances started from
// now on start their cell agents.
func (l *Lifecycle) SetAgentDelay(d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.agentDelay = d
}

// Silence makes the next n instances started never start their cell
// agents: they run, with an address, and nothing answers there, as an
// instance whose image or boot recipe is broken. It needs an
// AgentStarter; without one an instance has no separate agent.
func (l *Lifecycle) Silence(n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.silent = n
}

// Close makes starts in progress give up, stops the cell of every
// instance started, and waits for every start and stop in the background.
// The simulator calls it without its lock, once it no longer serves.
func (l *Lifecycle) Close() {
	l.cancel()
	l.mu.Lock()
	for _, in := range l.all {
		l.StopLocked(in)
	}
	l.mu.Unlock()
	l.wg.Wait()
}

// Wait waits for every start and stop in the background.
func (l *Lifecycle) Wait() { l.wg.Wait() }

// StartLocked brings up the cell of a new instance: at once without a
// CellStarter, in the background with one.
func (l *Lifecycle) StartLocked(in Instance) {
	l.all = append(l.all, in)
	c := in.Cell()
	if l.starter == nil {
		c.Started = true
		return
	}
	c.Starting = true
	if l.silent > 0 {
		l.silent--
		c.Silent = true
	}
	c.AgentDelay = l.agentDelay
	id, typ, bootstrap := c.ID, c.Type, c.Bootstrap
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		ctx, cancel := context.WithTimeout(l.ctx, l.timeout)
		addrs, err := l.starter.Start(ctx, id, typ, bootstrap)
		cancel()
		l.mu.Lock()
		defer l.mu.Unlock()
		c.Starting = false
		if err != nil {
			l.log.Error("starting cell failed; instance terminated", "instance", id, "cell", c.LogAttr, "error", err)
			in.StartFailed(l.now())
			// A failed Start may have left part of a cell behind.
			c.StopRequested = true
			l.stopStartedLocked(in)
			return
		}
		c.Started, c.Address, c.PodAddress = true, addrs.Private, addrs.Pod
		l.log.Info("cell started", "instance", id, "cell", c.LogAttr, "address", addrs.Private, "pod_address", addrs.Pod)
		if c.StopRequested {
			l.stopStartedLocked(in)
			return
		}
		l.startAgentLocked(in)
	}()
}

// startAgentLocked arranges for the agent of an instance whose cell
// started to start AgentDelay after the instance runs, where the
// CellStarter holds agents back (AgentStarter) and the agent is not
// silenced: at that time by the wall clock, or when the simulator reads
// the instance past it by its clock (AgentDueLocked).
func (l *Lifecycle) startAgentLocked(in Instance) {
	c := in.Cell()
	if _, ok := l.starter.(AgentStarter); !ok {
		c.AgentStarted = true // it started with the cell
		return
	}
	if c.Silent {
		l.log.Info("cell agent silenced: it never starts", "instance", c.ID, "cell", c.LogAttr)
		return
	}
	l.AgentDueLocked(in, l.now())
	wait := in.ReadyAt().Add(c.AgentDelay).Sub(l.now())
	if c.AgentStarting || wait <= 0 {
		return
	}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-l.ctx.Done():
			return
		case <-t.C:
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		l.AgentDueLocked(in, l.now())
	}()
}

// AgentDueLocked starts the agent of an instance, in the background, once
// it is due (its cell started, the instance ran AgentDelay ago by now,
// not silenced, not shutting down) and not started yet. A simulator calls
// it whenever it reads an instance, so that a test moving its clock
// starts agents.
func (l *Lifecycle) AgentDueLocked(in Instance, now time.Time) {
	c := in.Cell()
	starter, ok := l.starter.(AgentStarter)
	if !ok || c.Silent || c.AgentStarting || c.AgentStarted || !c.Started || c.StopRequested ||
		now.Before(in.ReadyAt().Add(c.AgentDelay)) {
		return
	}
	c.AgentStarting = true
	id := c.ID
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		ctx, cancel := context.WithTimeout(l.ctx, l.timeout)
		err := starter.StartAgent(ctx, id)
		cancel()
		l.mu.Lock()
		defer l.mu.Unlock()
		c.AgentStarting = false
		if err != nil {
			l.log.Error("starting cell agent failed", "instance", id, "cell", c.LogAttr, "error", err)
			return
		}
		c.AgentStarted = true
		l.log.Info("cell agent started", "instance", id, "cell", c.LogAttr)
	}()
}

// StopLocked stops the cell of an instance that is shutting down: at once
// without a CellStarter or a cell that never started, in the background
// with one (after its Start returned). It is idempotent.
func (l *Lifecycle) StopLocked(in Instance) {
	c := in.Cell()
	if c.StopRequested {
		return
	}
	c.StopRequested = true
	switch {
	case l.starter != nil && c.Starting:
		// The start goroutine stops it when Start returns.
	case l.starter != nil && c.Started:
		l.stopStartedLocked(in)
	default:
		c.Stopped, c.StoppedAt = true, l.now()
		in.CellStopped(c.StoppedAt)
	}
}

// stopStartedLocked runs CellStarter.Stop in the background.
func (l *Lifecycle) stopStartedLocked(in Instance) {
	c := in.Cell()
	id := c.ID
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		// Stopping must finish even when the simulator is closing.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(l.ctx), StopTimeout)
		defer cancel()
		err := l.starter.Stop(ctx, id)
		l.mu.Lock()
		defer l.mu.Unlock()
		if err != nil {
			// The cloud always ends the instance; the simulator says so
			// and logs the cell it may have leaked.
			l.log.Error("stopping cell failed; it may still run", "instance", id, "cell", c.LogAttr, "error", err)
		} else {
			l.log.Info("cell stopped", "instance", id, "cell", c.LogAttr)
		}
		c.Stopped, c.StoppedAt = true, l.now()
		in.CellStopped(c.StoppedAt)
	}()
}

// DiskStarter is a CellStarter whose cells can have disks: a simulator
// whose cloud attaches disks (EC2 volumes, Compute Engine persistent
// disks, Azure managed data disks) makes each of its disks here and gives
// the attached ones to the instance's cell as real block devices, so that
// the cell's agent finds, formats and mounts them as it would on the
// cloud. The simulator keeps the cloud's own bookkeeping (states, errors,
// limits); a DiskStarter only does what the machine does.
//
// CreateDisk makes a blank disk of sizeBytes named id (the cloud's disk
// ID or name, unique within the simulator); it is idempotent for the same
// size. DeleteDisk deletes it and its data; a disk it does not know is
// already deleted. AttachDisk gives the instance's cell the disk as a
// block device that the cell's agent finds at path (an absolute path as
// the instance sees it: "/dev/disk/by-id/nvme-Amazon_Elastic_Block_Store_
// vol0123…", "/dev/disk/by-id/google-data-1", "/dev/disk/azure/scsi1/
// lun0"), read-only if readOnly; paths of different instances may be
// equal (two VMs each with a LUN 0), and each instance's agent finds its
// own. It is idempotent for the same instance, disk and path. DetachDisk
// takes the disk from the instance's cell; it returns once the disk is
// gone from the cell, or an error while the cell still holds it open
// (mounted): the simulator keeps the attachment detaching and asks again,
// as the cloud waits for the guest to let go. A disk not attached to the
// instance is already detached.
type DiskStarter interface {
	CellStarter
	CreateDisk(ctx context.Context, id string, sizeBytes int64) error
	DeleteDisk(ctx context.Context, id string) error
	AttachDisk(ctx context.Context, instanceID, id, path string, readOnly bool) error
	DetachDisk(ctx context.Context, instanceID, id string) error
}
