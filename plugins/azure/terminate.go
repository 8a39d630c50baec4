package azure

import (
	"context"
	"fmt"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"

	"github.com/kipcell/kip/pluginapi"
)

// Terminate ends a VM of the cluster with VirtualMachines_Delete, which
// also deletes its NIC and OS disk (deleteOption Delete), and returns once
// Azure has accepted the deletion (202): the VM is then terminating. A VM
// Azure does not know (never did, or deleted already) is NotFound, which
// the host takes as done; a second Terminate of a VM being deleted
// succeeds. The plugin refuses a VM that is not tagged with its cluster: a
// host bug must not end a stranger's machine.
func (p *provider) Terminate(ctx context.Context, req *pluginapi.TerminateRequest) (*pluginapi.TerminateResponse, error) {
	cfg, err := p.cfg.Ready(ctx)
	if err != nil {
		return nil, err
	}
	if !vmNameRE.MatchString(req.ID) {
		return nil, pluginapi.NewNotFound("instance %q is not an instance ID of this plugin (a cell's VM name)", req.ID)
	}
	vm, known := cfg.view.Lookup(req.ID)
	if !known {
		if vm, err = cfg.getVM(ctx, req.ID); err != nil {
			return nil, fmt.Errorf("terminating instance %s: %w", req.ID, mapError("VirtualMachines_Get", err))
		}
		if c := vm.Tags[pluginapi.TagCluster]; c != cfg.clusterID {
			return nil, fmt.Errorf("terminating instance %s: it is tagged for cluster %q, not this cluster's %q; refusing", req.ID, c, cfg.clusterID)
		}
	}
	cfg.deleting.Add(req.ID)
	p.resume.drop(req.ID)
	if _, err := cfg.clients.vms.BeginDelete(ctx, cfg.resourceGroup, req.ID, nil); err != nil {
		if isNotFound(err) {
			return nil, fmt.Errorf("terminating instance %s: %w", req.ID, mapError("VirtualMachines_Delete", err))
		}
		if !nameTaken(err) { // 409: a delete is under way already
			return nil, fmt.Errorf("terminating instance %s: %w", req.ID, mapError("VirtualMachines_Delete", err))
		}
	}
	if vm.State != pluginapi.StateTerminated {
		vm.State, vm.StateReason = pluginapi.StateTerminating, "VM being deleted"
	}
	vm.ID = req.ID
	if vm.CellID != "" {
		cfg.view.Changed(vm.ID, vm)
	}
	p.Log.Info("instance terminating", "instance", req.ID, "cell", vm.CellID)
	return &pluginapi.TerminateResponse{Instance: vm.Instance}, nil
}

// deleteAndWait deletes a VM (the failed VM of a launch) and follows the
// delete's operation until it ends. A VM that does not exist is done.
func (p *provider) deleteAndWait(ctx context.Context, cfg *config, name string) error {
	poller, err := cfg.clients.vms.BeginDelete(ctx, cfg.resourceGroup, name, nil)
	if isNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if _, err := poller.PollUntilDone(ctx, &runtime.PollUntilDoneOptions{Frequency: p.lroFrequency}); err != nil && !isNotFound(err) {
		return err
	}
	return nil
}
