package plugintest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/kipcell/kip/pluginapi"
)

// The cases of the rules pluginapi.Provider states beside what each call
// does: calls before Configure, empty configurations, Launch of a
// terminated cell, unsupported request fields and deadlines.

// checkNotConfigured: before a Configure succeeded, every call but GetInfo
// and Configure fails with NotConfigured; after it, they work.
func checkNotConfigured(ctx context.Context, e *env) error {
	cluster := e.cfg.ClusterID
	c := e.fresh()
	info, err := c.GetInfo(ctx, &pluginapi.GetInfoRequest{})
	if err != nil {
		return fmt.Errorf("GetInfo before Configure failed: %w; it must work before Configure", err)
	}
	calls := e.calls(c, info, cluster, e.cell(cluster))
	var errs []error
	for _, call := range calls {
		if call.name == "GetInfo" {
			continue
		}
		// A stream that does not end by itself ends here.
		callCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := call.call(callCtx)
		cancel()
		if !pluginapi.IsNotConfigured(err) {
			errs = append(errs, fmt.Errorf("%s before Configure answered %s (%s); want NotConfigured: every call but GetInfo and Configure fails so until a Configure succeeded",
				call.name, errText(err), kindOf(err)))
		}
	}
	if _, err := c.Configure(ctx, e.configureRequest(cluster, e.cfg.Plugin)); err != nil {
		return errors.Join(append(errs, fmt.Errorf("configuring the plugin with the valid config %s: %w", showConfig(e.cfg.Plugin), err))...)
	}
	if _, err := c.List(ctx, &pluginapi.ListRequest{}); err != nil {
		errs = append(errs, fmt.Errorf("List after a successful Configure failed: %w", err))
	}
	return errors.Join(errs...)
}

// contractCall is one call of the contract with fixed arguments, made
// with the context given; only its error is kept.
type contractCall struct {
	name string
	call func(context.Context) error
}

// calls returns one call of each method of p: GetInfo, ListInstanceTypes,
// a Launch of cell (remembered for clean-up in cluster), a Describe, List,
// a Terminate of the unknown ID, and WatchEvents, RegistryAuth and
// ConsoleOutput (of the unknown ID), VerifyInstanceIdentity and the volume
// calls (of the unknown ID and a made-up disk of the plugin's first
// driver) where p implements them and info (if not nil) offers them.
func (e *env) calls(p pluginapi.Provider, info *pluginapi.GetInfoResponse, cluster, cell string) []contractCall {
	calls := []contractCall{
		{"GetInfo", func(ctx context.Context) error { _, err := p.GetInfo(ctx, &pluginapi.GetInfoRequest{}); return err }},
		{"ListInstanceTypes", func(ctx context.Context) error {
			_, err := p.ListInstanceTypes(ctx, &pluginapi.ListInstanceTypesRequest{})
			return err
		}},
		{"Launch", func(ctx context.Context) error {
			resp, err := p.Launch(ctx, e.launchRequest(cell))
			if err == nil {
				e.remember(resp.Instance.ID, cluster)
			}
			return err
		}},
		{"Describe", func(ctx context.Context) error {
			_, err := p.Describe(ctx, &pluginapi.DescribeRequest{IDs: []string{e.cfg.UnknownInstanceID}})
			return err
		}},
		{"List", func(ctx context.Context) error { _, err := p.List(ctx, &pluginapi.ListRequest{}); return err }},
		{"Terminate", func(ctx context.Context) error {
			_, err := p.Terminate(ctx, &pluginapi.TerminateRequest{ID: e.cfg.UnknownInstanceID})
			return err
		}},
	}
	if info == nil {
		return calls
	}
	if w, ok := p.(pluginapi.EventWatcher); ok && info.Has(pluginapi.CapabilityWatchEvents) {
		calls = append(calls, contractCall{"WatchEvents", func(ctx context.Context) error {
			return w.WatchEvents(ctx, &pluginapi.WatchEventsRequest{}, func(*pluginapi.Event) error { return nil })
		}})
	}
	if r, ok := p.(pluginapi.RegistryAuthenticator); ok && info.Has(pluginapi.CapabilityRegistryAuth) {
		calls = append(calls, contractCall{"RegistryAuth", func(ctx context.Context) error {
			_, err := r.RegistryAuth(ctx, &pluginapi.RegistryAuthRequest{Image: probeImage})
			return err
		}})
	}
	if r, ok := p.(pluginapi.ConsoleOutputReader); ok && info.Has(pluginapi.CapabilityConsoleOutput) {
		calls = append(calls, contractCall{"ConsoleOutput", func(ctx context.Context) error {
			_, err := r.ConsoleOutput(ctx, &pluginapi.ConsoleOutputRequest{InstanceID: e.cfg.UnknownInstanceID})
			return err
		}})
	}
	if v, ok := p.(pluginapi.InstanceIdentityVerifier); ok && info.Has(pluginapi.CapabilityInstanceIdentity) {
		calls = append(calls, contractCall{"VerifyInstanceIdentity", func(ctx context.Context) error {
			_, err := v.VerifyInstanceIdentity(ctx, &pluginapi.VerifyInstanceIdentityRequest{InstanceID: e.cfg.UnknownInstanceID})
			return err
		}})
	}
	if v, ok := p.(pluginapi.VolumeAttacher); ok && info.Has(pluginapi.CapabilityVolumes) && len(info.VolumeDrivers) > 0 {
		driver := info.VolumeDrivers[0]
		calls = append(calls,
			contractCall{"AttachVolume", func(ctx context.Context) error {
				_, err := v.AttachVolume(ctx, &pluginapi.AttachVolumeRequest{InstanceID: e.cfg.UnknownInstanceID, Driver: driver, VolumeHandle: probeVolume})
				return err
			}},
			contractCall{"DetachVolume", func(ctx context.Context) error {
				_, err := v.DetachVolume(ctx, &pluginapi.DetachVolumeRequest{InstanceID: e.cfg.UnknownInstanceID, Driver: driver, VolumeHandle: probeVolume})
				return err
			}},
			contractCall{"DescribeVolumeAttachments", func(ctx context.Context) error {
				_, err := v.DescribeVolumeAttachments(ctx, &pluginapi.DescribeVolumeAttachmentsRequest{InstanceIDs: []string{e.cfg.UnknownInstanceID}})
				return err
			}},
		)
	}
	return calls
}

// probeVolume is the disk the suite's probing volume calls name: no
// cloud's, so the answer does not matter, only that the call is made.
const probeVolume = "plugintest-no-such-volume"

// probeImage is the image the suite asks RegistryAuth about: in no
// registry, so the answer does not matter, only that the call is made.
const probeImage = "registry.plugintest.invalid/conformance:latest"

// checkEmptyConfig: no configuration (nil, zero-length, blank, null) is
// answered as {} is, and a configuration that is not a JSON object is
// refused with InvalidConfig key "plugin.config".
func checkEmptyConfig(ctx context.Context, e *env) error {
	outcome := func(config []byte) (string, error) {
		_, err := e.fresh().Configure(ctx, e.configureRequest(e.cfg.ClusterID, config))
		var ic *pluginapi.InvalidConfigError
		switch {
		case err == nil:
			return "success", nil
		case errors.As(err, &ic) && ic.Key == "":
			return "", fmt.Errorf("Configure with the config %s answered InvalidConfig naming no key (%w); every InvalidConfig names its key",
				showConfig(config), err)
		case errors.As(err, &ic):
			return fmt.Sprintf("InvalidConfig key %q", ic.Key), nil
		default:
			return kindOf(err) + ": " + err.Error(), nil
		}
	}
	want, err := outcome([]byte("{}"))
	if err != nil {
		return err
	}
	var errs []error
	for _, config := range [][]byte{nil, {}, []byte(" \n"), []byte("null")} {
		got, err := outcome(config)
		switch {
		case err != nil:
			errs = append(errs, err)
		case got != want:
			errs = append(errs, fmt.Errorf("Configure with the config %q answered %s; want what {} gets, %s: an empty config means {}",
				config, got, want))
		}
	}
	for _, config := range []string{`"abc"`, `["a"]`, `3`} {
		_, err := e.fresh().Configure(ctx, e.configureRequest(e.cfg.ClusterID, []byte(config)))
		if err := wantInvalidConfig(err, pluginapi.ConfigKey); err != nil {
			errs = append(errs, fmt.Errorf("calling Configure with the config %s, not a JSON object: %w", config, err))
		}
	}
	return errors.Join(errs...)
}

// checkLaunchAfterTerminate: Launch of a cell whose instance was terminated
// answers that instance, terminating or terminated, and starts nothing.
func checkLaunchAfterTerminate(ctx context.Context, e *env) error {
	cluster := e.cfg.ClusterID
	_, cell, inst, err := e.launchAndTerminate(ctx, cluster)
	if err != nil {
		return err
	}
	again, err := e.launch(ctx, cluster, cell)
	if err != nil {
		return fmt.Errorf("launching cell %s again after terminating its instance %s failed: %w; want that instance, terminating or terminated",
			cell, inst.ID, err)
	}
	var errs []error
	switch {
	case again.ID != inst.ID:
		errs = append(errs, fmt.Errorf("launching cell %s again after terminating its instance %s answered instance %s (%s); a cell ID names one instance for good: want %s, terminating or terminated",
			cell, inst.ID, again.ID, again.State, inst.ID))
	case !ended(again.State):
		errs = append(errs, fmt.Errorf("launching cell %s again after terminating its instance %s answered it %s; want it terminating or terminated, and nothing started",
			cell, inst.ID, again.State))
	}
	insts, err := e.list(ctx, cluster)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	for _, got := range insts {
		if got.CellID == cell && (got.ID != inst.ID || !ended(got.State)) {
			errs = append(errs, fmt.Errorf("after launching terminated cell %s again, List shows its instance %s %s; Launch of a terminated cell must start nothing",
				cell, got.ID, got.State))
		}
	}
	return errors.Join(errs...)
}

// launchFeatures are the LaunchRequest fields that need a capability.
var launchFeatures = []struct {
	capability pluginapi.Capability
	field      string
	set        func(*pluginapi.LaunchRequest)
}{
	{pluginapi.CapabilitySpot, pluginapi.FieldCapacityType, func(r *pluginapi.LaunchRequest) { r.CapacityType = pluginapi.CapacitySpot }},
	{pluginapi.CapabilitySecurityGroups, pluginapi.FieldSecurityGroups, func(r *pluginapi.LaunchRequest) { r.SecurityGroups = []string{"sg-0plugintest"} }},
	{pluginapi.CapabilityInstanceProfiles, pluginapi.FieldInstanceProfile, func(r *pluginapi.LaunchRequest) { r.InstanceProfile = "plugintest" }},
	{pluginapi.CapabilityVolumeSize, pluginapi.FieldVolumeSizeGiB, func(r *pluginapi.LaunchRequest) { r.VolumeSizeGiB = 20 }},
}

// checkUnsupportedFields: Launch asking for a feature whose capability the
// plugin does not report fails with Unsupported naming the field and
// creates nothing.
func checkUnsupportedFields(ctx context.Context, e *env) error {
	cluster := e.cfg.ClusterID
	c, err := e.configured(ctx, cluster)
	if err != nil {
		return err
	}
	info, err := c.GetInfo(ctx, &pluginapi.GetInfoRequest{})
	if err != nil {
		return fmt.Errorf("GetInfo failed: %w", err)
	}
	if e.setupErr != nil {
		return fmt.Errorf("cannot launch: %w", e.setupErr)
	}
	var errs []error
	var cells []string
	for _, f := range launchFeatures {
		if info.Has(f.capability) {
			continue
		}
		cell := e.cell(cluster)
		cells = append(cells, cell)
		req := e.launchRequest(cell)
		f.set(req)
		resp, err := c.Launch(ctx, req)
		var u *pluginapi.UnsupportedError
		switch {
		case err == nil:
			e.remember(resp.Instance.ID, cluster)
			errs = append(errs, fmt.Errorf("Launch with %s set succeeded, but the plugin does not report capability %q; want Unsupported naming field %q",
				f.field, f.capability, f.field))
		case !errors.As(err, &u):
			errs = append(errs, fmt.Errorf("Launch with %s set, without capability %q, answered %s (%s); want Unsupported naming field %q",
				f.field, f.capability, errText(err), kindOf(err), f.field))
		case u.Field != f.field:
			errs = append(errs, fmt.Errorf("Launch with %s set, without capability %q, answered Unsupported naming field %q (%w); want field %q",
				f.field, f.capability, u.Field, err, f.field))
		}
	}
	if len(cells) == 0 {
		return errors.Join(errs...)
	}
	insts, err := e.list(ctx, cluster)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	for _, inst := range insts {
		for _, cell := range cells {
			if inst.CellID == cell {
				errs = append(errs, fmt.Errorf("a refused Launch of cell %s left instance %s (%s); a refused Launch creates nothing", cell, inst.ID, inst.State))
			}
		}
	}
	return errors.Join(errs...)
}

// Deadlines of the deadline case: each call gets deadlineShort; the
// provider must have returned within deadlineGrace after it.
const (
	deadlineShort = 50 * time.Millisecond
	deadlineGrace = 200 * time.Millisecond
	// deadlineWait bounds how long the case waits for a provider that
	// ignores its context.
	deadlineWait = 10 * time.Second
)

// checkDeadline: a call whose deadline passes while the provider works on
// it returns promptly. Over gRPC the client gives up at its deadline
// whatever the plugin does, so the case watches the provider itself, behind
// the server (timed), and fails a call it returned from more than
// deadlineGrace after its deadline.
func checkDeadline(ctx context.Context, e *env) error {
	cluster := e.cfg.ClusterID
	tp := &timed{p: e.factory(e.log)}
	c := e.serve(tp)
	errs := []error{deadlineCall(ctx, tp, "Configure", func(ctx context.Context) {
		_, _ = c.Configure(ctx, e.configureRequest(cluster, e.cfg.Plugin))
	})}
	if _, err := c.Configure(ctx, e.configureRequest(cluster, e.cfg.Plugin)); err != nil {
		return errors.Join(append(errs, fmt.Errorf("configuring the plugin for cluster %s with the valid config %s: %w", cluster, showConfig(e.cfg.Plugin), err))...)
	}
	info, err := c.GetInfo(ctx, &pluginapi.GetInfoRequest{})
	if err != nil {
		return errors.Join(append(errs, fmt.Errorf("GetInfo failed: %w", err))...)
	}
	// The optional calls are those the provider implements (the info case
	// checks that they match its capabilities).
	calls := e.calls(c, info, cluster, e.cell(cluster))
	calls = slices.DeleteFunc(calls, func(call contractCall) bool {
		_, watches := tp.p.(pluginapi.EventWatcher)
		_, auths := tp.p.(pluginapi.RegistryAuthenticator)
		_, consoles := tp.p.(pluginapi.ConsoleOutputReader)
		_, verifies := tp.p.(pluginapi.InstanceIdentityVerifier)
		_, attaches := tp.p.(pluginapi.VolumeAttacher)
		volumeCall := call.name == "AttachVolume" || call.name == "DetachVolume" || call.name == "DescribeVolumeAttachments"
		return call.name == "WatchEvents" && !watches || call.name == "RegistryAuth" && !auths ||
			call.name == "ConsoleOutput" && !consoles || call.name == "VerifyInstanceIdentity" && !verifies ||
			volumeCall && !attaches
	})
	for _, call := range calls {
		errs = append(errs, deadlineCall(ctx, tp, call.name, func(ctx context.Context) { _ = call.call(ctx) }))
	}
	// Whatever a Launch under a deadline created is cleaned up.
	tp.mu.Lock()
	for _, inst := range tp.launched {
		e.remember(inst.ID, cluster)
	}
	tp.mu.Unlock()
	return errors.Join(errs...)
}

// deadlineCall makes one call with a deadlineShort deadline and checks when
// the provider returned from it. A call that never reached the provider
// before its deadline (a loaded machine) is tried again, three times in
// all.
func deadlineCall(ctx context.Context, tp *timed, name string, call func(context.Context)) error {
	for range 3 {
		tp.reset()
		callCtx, cancel := context.WithTimeout(ctx, deadlineShort)
		call(callCtx)
		cancel()
		tc := tp.first(name)
		if tc == nil {
			continue
		}
		select {
		case <-tc.done:
		case <-time.After(deadlineWait):
			return fmt.Errorf("%s had not returned %s after its %s deadline; a call must return promptly once its context is done",
				name, deadlineWait, deadlineShort)
		case <-ctx.Done():
			return ctx.Err()
		}
		if tc.deadline.IsZero() {
			return fmt.Errorf("%s reached the provider without the caller's deadline", name)
		}
		if over := tc.returned.Sub(tc.deadline); over > deadlineGrace {
			return fmt.Errorf("%s outlived its %s deadline by %s; a call must return promptly (within %s) once its context is done",
				name, deadlineShort, over.Round(time.Millisecond), deadlineGrace)
		}
		return nil
	}
	return fmt.Errorf("%s never reached the provider within its %s deadline in 3 tries, so whether it honours its context is unknown", name, deadlineShort)
}
