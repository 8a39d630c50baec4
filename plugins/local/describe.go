package local

import (
	"context"
	"fmt"
	"time"

	"github.com/kipcell/kip/pluginapi"
)

// Describe and List read the records and look at the processes; they take
// no locks and change nothing, so they are always safe to retry and never
// wait behind a slow Launch or Terminate.

// Describe returns the named instances that still have a record, and
// those that ended by themselves within the hour (selfEnded): a cell whose
// agent kept exiting is shown terminated, "agent exited", so that the
// host sees why the cell died.
func (p *provider) Describe(ctx context.Context, req *pluginapi.DescribeRequest) (*pluginapi.DescribeResponse, error) {
	cfg, err := p.config()
	if err != nil {
		return nil, err
	}
	records, err := readRecords(cfg.stateDir)
	if err != nil {
		return nil, fmt.Errorf("describing instances: %w", err)
	}
	byID := make(map[string]*record, len(records))
	for _, r := range records {
		byID[r.ID] = r
	}
	ended := map[string]pluginapi.Instance{}
	for _, inst := range selfEnded(cfg.stateDir, time.Now()) {
		ended[inst.ID] = inst
	}
	resp := &pluginapi.DescribeResponse{}
	seen := map[string]bool{}
	for _, id := range req.IDs {
		if seen[id] {
			continue
		}
		seen[id] = true
		if r, ok := byID[id]; ok {
			resp.Instances = append(resp.Instances, p.instance(cfg, r))
		} else if inst, ok := ended[id]; ok {
			resp.Instances = append(resp.Instances, inst)
		}
	}
	return resp, nil
}

// List returns the instances tagged with the configured cluster, in any
// state. Cells of other clusters sharing the state directory are not ours.
func (p *provider) List(ctx context.Context, req *pluginapi.ListRequest) (*pluginapi.ListResponse, error) {
	cfg, err := p.config()
	if err != nil {
		return nil, err
	}
	records, err := readRecords(cfg.stateDir)
	if err != nil {
		return nil, fmt.Errorf("listing instances: %w", err)
	}
	resp := &pluginapi.ListResponse{}
	listed := map[string]bool{}
	for _, r := range records {
		if r.Tags[pluginapi.TagCluster] == cfg.clusterID {
			resp.Instances = append(resp.Instances, p.instance(cfg, r))
			listed[r.ID] = true
		}
	}
	for _, inst := range selfEnded(cfg.stateDir, time.Now()) {
		if inst.Tags[pluginapi.TagCluster] == cfg.clusterID && !listed[inst.ID] {
			resp.Instances = append(resp.Instances, inst)
		}
	}
	return resp, nil
}

// Reasons given in Instance.StateReason.
const (
	reasonLaunching     = "launching"
	reasonLaunchAborted = "launch did not complete"
	reasonAgentExited   = "agent exited"
	reasonRestarting    = "agent exited; restarting it"
	reasonTerminated    = "terminated on request"
	reasonLimitsPrefix  = "limits not enforced: "
)

// cellState is the state of a cell as the "cloud" sees it now:
//   - no PID yet: pending while a Launch holds the cell's lock, otherwise
//     a launch that was interrupted and not retried, which counts as
//     terminated (Terminate cleans it up; Launch would resume it);
//   - running while the recorded process (PID and start time) lives, and
//     while it is dead but to be restarted (supervise.go): the instance
//     runs, its service does not, for a moment;
//   - terminated once it exited too often in a row (given up).
func cellState(stateDir string, r *record) (pluginapi.InstanceState, string) {
	switch {
	case r.PID == 0 && lockHeld(cellLockPath(stateDir, r.CellID)):
		return pluginapi.StatePending, reasonLaunching
	case r.PID == 0:
		return pluginapi.StateTerminated, reasonLaunchAborted
	case r.GaveUp:
		return pluginapi.StateTerminated, reasonAgentExited
	case !alive(r.PID, r.StartTime):
		return pluginapi.StateRunning, reasonRestarting
	case r.LimitsNotEnforced != "":
		return pluginapi.StateRunning, reasonLimitsPrefix + r.LimitsNotEnforced
	}
	return pluginapi.StateRunning, ""
}
