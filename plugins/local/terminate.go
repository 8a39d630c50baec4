package local

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/kipcell/kip/pluginapi"
)

// Terminate stops the agent and removes everything Launch created for the
// cell: the process group, the network namespace and veth, the cgroups and
// the cell directory, with whatever the agent left mounted in it; and it
// detaches the cell's disks (attach.go). The cell
// is gone when it returns (Describe and List no longer show it), so a
// second Terminate, like one for an ID that never existed, returns
// NotFound, which the host treats as done. If it fails part way (or ctx
// ends), the record is still there and a retry carries on from where this
// one stopped. First it leaves the cell's tombstone (ended.go), so that a
// later Launch of the cell answers it, terminated, instead of starting it
// again.
func (p *provider) Terminate(ctx context.Context, req *pluginapi.TerminateRequest) (*pluginapi.TerminateResponse, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cfg, err := p.config()
	if err != nil {
		return nil, err
	}
	found, err := findRecord(cfg.stateDir, req.ID)
	if err != nil {
		return nil, fmt.Errorf("terminating %s: %w", req.ID, err)
	}
	if found == nil {
		return nil, pluginapi.NewNotFound("instance %s", req.ID)
	}

	unlock, err := p.cellLock(ctx, cfg, found.CellID)
	if err != nil {
		return nil, err
	}
	defer unlock()
	// Another Terminate may have finished while this one waited.
	r, err := readRecord(cfg.stateDir, found.CellID)
	if errors.Is(err, fs.ErrNotExist) {
		p.dropCellLock(cfg, found.CellID)
		return nil, pluginapi.NewNotFound("instance %s", req.ID)
	}
	if err == nil && r.ID != req.ID {
		return nil, pluginapi.NewNotFound("instance %s", req.ID)
	}
	if err != nil {
		return nil, fmt.Errorf("terminating %s: %w", req.ID, err)
	}

	inst, err := p.end(ctx, cfg, r, reasonTerminated)
	if err != nil {
		return nil, err
	}
	p.log.Info("terminated", "cell", r.CellID, "instance", r.ID)
	return &pluginapi.TerminateResponse{Instance: inst}, nil
}

// end terminates the cell of r: its tombstone (saying reason unless the
// cell had ended already, which keeps its own), then destroy. It returns
// the instance as it ended, addresses included. The caller holds the
// cell's lock.
func (p *provider) end(ctx context.Context, cfg *config, r *record, reason string) (pluginapi.Instance, error) {
	inst := p.instance(cfg, r)
	if inst.State != pluginapi.StateTerminated {
		inst.StateReason = reason
	}
	inst.State = pluginapi.StateTerminated
	ended := inst
	ended.Addresses = nil
	now := time.Now().UTC()
	if err := writeEnded(cfg.stateDir, &tombstone{Instance: ended, EndedAt: now}); err != nil {
		return inst, fmt.Errorf("terminating %s (cell %s): writing its tombstone: %w", r.ID, r.CellID, err)
	}
	if err := p.destroy(ctx, cfg, r); err != nil {
		return inst, fmt.Errorf("terminating %s (cell %s): %w", r.ID, r.CellID, err)
	}
	pruneEnded(cfg.stateDir, now)
	return inst, nil
}

// destroy undoes a launch, complete or not, in the reverse order of
// Launch; each step tolerates what is already gone. The caller holds the
// cell's lock. The record is removed last, with the directory, so a failed
// destroy can be retried.
func (p *provider) destroy(ctx context.Context, cfg *config, r *record) error {
	if err := stopAgent(ctx, r.PID, r.StartTime, cfg.terminationGrace); err != nil {
		return fmt.Errorf("stopping agent: %w", err)
	}
	if r.Network == NetworkNetns {
		if err := cfg.machine.teardownNetns(ctx, r); err != nil {
			return err
		}
	}
	if err := removeCgroups(r.Cgroups); err != nil {
		return err
	}
	if r.CgroupPath != "" {
		if err := removeCgroups(leftCgroups(p.cgroupRoot, p.cgroupParent, r.CellID)); err != nil {
			return err
		}
	}
	dir := cellDir(cfg.stateDir, r.CellID)
	if err := unmountBelow(cfg.machine, dir); err != nil {
		return err
	}
	// After the unmount, so that a disk the agent mounted in its
	// directory is unbound at once rather than at its last close.
	if err := p.detachAll(ctx, cfg, r); err != nil {
		return err
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	// Removing the lock file while holding its lock is safe: flockFile
	// notices that a lock it gets is on a file no longer at the path.
	if err := os.Remove(cellLockPath(cfg.stateDir, r.CellID)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// unmountBelow detaches whatever is mounted at or below dir where m's
// commands run: the tmpfs an agent mounts for its pod's secrets is in the
// machine's mount namespace and stays there if the agent is killed before
// it cleans up.
func unmountBelow(m machine, dir string) (err error) {
	m.run(func() { err = unmountBelowHere(dir) })
	return err
}

// unmountBelowHere is unmountBelow in the calling thread's mount
// namespace: /proc/thread-self, since the thread may have joined another
// than its process's (mountns.go).
func unmountBelowHere(dir string) error {
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real // the kernel lists resolved paths
	}
	data, err := os.ReadFile("/proc/thread-self/mounts")
	if err != nil {
		return fmt.Errorf("reading mounts: %w", err)
	}
	var points []string
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		p := unescapeMountPath(f[1])
		if p == dir || strings.HasPrefix(p, dir+string(filepath.Separator)) {
			points = append(points, p)
		}
	}
	// Deepest (latest) first: a mount below another goes before it.
	for i := len(points) - 1; i >= 0; i-- {
		if err := syscall.Unmount(points[i], syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
			return fmt.Errorf("unmounting %s: %w", points[i], err)
		}
	}
	return nil
}

// unescapeMountPath undoes the octal escapes (\040 for a space, ...) of a
// path in /proc/self/mounts.
func unescapeMountPath(s string) string {
	if !strings.Contains(s, "\\") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
