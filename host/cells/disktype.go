package cells

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/kipcell/kip/host/match"
	"github.com/kipcell/kip/host/volumes"
	"github.com/kipcell/kip/pluginapi"
)

// A disk the instance's type cannot take (VolumeConflict wrong-type:
// Compute Engine's pd-standard on an N4 machine, Azure's Premium_LRS on a
// size without premium storage) is refused for as long as the instance
// has that type, so waiting is pointless. The pod is told once, naming
// the volume, the disk's type where the plugin knows it and the
// instance type; the serving of the instance ends (typeRefusals.stop),
// and the cell's run gives the instance up (replaceForDiskType: its
// disks detached, terminated, the next cell ID) and places the cell
// again, on the candidates left once every type its disks refused is
// taken out (withoutRefusedTypes). That is the re-placement after an
// InsufficientCapacity answer, but for this pod only: the type is fine
// for a pod without that disk, so no offering is marked unavailable.

// typeRefusals are the instance types a pod's disks refused: what the
// cell is never placed on again. Guarded by the cell's mu.
type typeRefusals struct {
	// types maps each refused instance type to the refusal, for the
	// NoInstanceType message once nothing else is left.
	types map[string]string
	// pending is set once the current instance's type refused a disk:
	// its serving ends, and the cell is placed again.
	pending bool
	// stop ends the current serving of the instance (serve sets it).
	stop context.CancelFunc
	// replaced counts the cells given up for a disk's type, which
	// bootFailed does not count among the cells that did not boot.
	replaced int
}

// wrongDiskType handles an AttachVolume refused with ConflictWrongType:
// it records the refusal of the instance's type, says it on the pod and
// ends the serving of the instance, so that the cell's run places it
// again on another type (replaceForDiskType).
func (c *cell) wrongDiskType(d volumes.Disk, conflict *pluginapi.VolumeConflictError) {
	c.mu.Lock()
	typ := ""
	if c.instance != nil {
		typ = c.instance.InstanceType
	}
	disk := "its disk type"
	if conflict.DiskType != "" {
		disk = "disk type " + conflict.DiskType
	}
	why := fmt.Sprintf("volume %q: instance type %s cannot take %s", volumeName(d), typ, disk)
	if c.typeRefusals.types == nil {
		c.typeRefusals.types = map[string]string{}
	}
	c.typeRefusals.types[typ] = why
	c.typeRefusals.pending = true
	stop := c.typeRefusals.stop
	c.mu.Unlock()
	msg := fmt.Sprintf("AttachVolume.Attach failed for volume %q : instance type %s cannot take %s (%s); launching the pod's cell on another instance type",
		volumeName(d), typ, disk, conflict.Message)
	c.log().Warn("the instance's type refused the pod's disk", "volume", d.Volume, "handle", d.Handle,
		"instance_type", typ, "disk_type", conflict.DiskType, "error", conflict)
	c.waiting(ReasonFailedAttachVolume, msg)
	c.event(corev1.EventTypeWarning, ReasonFailedAttachVolume, "%s", msg)
	if stop != nil {
		stop()
	}
}

// servingFor records stop as what ends the current serving of the
// instance (wrongDiskType calls it).
func (c *cell) servingFor(stop context.CancelFunc) {
	c.mu.Lock()
	c.typeRefusals.stop = stop
	c.mu.Unlock()
}

// replaceForDiskType gives up the instance whose type refused one of the
// pod's disks, for the cell's run to place the cell again (replaceInstance:
// its disks detached, the instance terminated, the next cell ID). It
// reports whether to place again: false when no type refused a disk (the
// serving ended for another reason) or ctx ended.
func (c *cell) replaceForDiskType(ctx context.Context, inst *pluginapi.Instance) bool {
	c.mu.Lock()
	pending := c.typeRefusals.pending
	c.typeRefusals.pending, c.typeRefusals.stop = false, nil
	agent := c.agent
	if pending {
		c.agent = nil
	}
	c.mu.Unlock()
	if !pending || ctx.Err() != nil {
		return false
	}
	if agent != nil {
		_ = agent.Close()
	}
	if !c.replaceInstance(ctx, inst, phasePlacing) {
		return false
	}
	c.mu.Lock()
	c.typeRefusals.replaced++
	c.mu.Unlock()
	return true
}

// withoutRefusedTypes takes out of cands the instance types the pod's
// disks refused. Once none is left it answers an *match.UnsatisfiableError
// naming each refusal, for the NoInstanceType event.
func (c *cell) withoutRefusedTypes(cands []match.Candidate) ([]match.Candidate, error) {
	c.mu.Lock()
	refused := maps.Clone(c.typeRefusals.types)
	c.mu.Unlock()
	if len(refused) == 0 {
		return cands, nil
	}
	left := slices.DeleteFunc(slices.Clone(cands), func(cand match.Candidate) bool {
		_, ok := refused[cand.InstanceType]
		return ok
	})
	if len(left) > 0 {
		return left, nil
	}
	whys := slices.Sorted(maps.Values(refused))
	return nil, &match.UnsatisfiableError{Reason: fmt.Sprintf(
		"every instance type that fits the pod refused one of its disks: %s", strings.Join(whys, "; "))}
}
