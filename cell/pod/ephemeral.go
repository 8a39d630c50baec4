package pod

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
)

// Ephemeral containers (kubectl debug), as the kubelet of v1.36 runs them
// (pkg/kubelet/kuberuntime: computePodActions, startContainer):
//
//   - each is started once, as soon as the pod has its network and
//     volumes, whether or not the init containers are done; it is never
//     restarted, whatever its exit code (a pull that failed is tried
//     again with back-off, as the kubelet tries again a container that
//     has no status yet);
//   - with targetContainerName it joins the target's PID namespace, so
//     that ps shows the target's processes; a target that does not run
//     keeps it Waiting CreateContainerConfigError "unable to find target
//     container <name>" until it does (getTargetID);
//   - it has no probes, lifecycle hooks, ports or resources (the API
//     server refuses them), never Ready, and Started is not set (the
//     prober sets it only for the pod's containers and init containers);
//   - its status is in ephemeralContainerStatuses, its events name
//     spec.ephemeralContainers{<name>}, and attach, exec and logs reach
//     it by name;
//   - it does not count for the pod's phase or conditions.
//
// A restarted agent (Restore) does not take over an ephemeral container
// that ran: it is reported as the earlier agent last did, Terminated with
// reason ContainerStatusUnknown when it was running, and not started
// again.

// ephemeralSpec is the ephemeral container name of p as a Container (the
// kubelet's own conversion: the two share their fields), nil when p has
// none of that name.
func ephemeralSpec(p *corev1.Pod, name string) *corev1.Container {
	for i := range p.Spec.EphemeralContainers {
		if ec := &p.Spec.EphemeralContainers[i]; ec.Name == name {
			return (*corev1.Container)(&ec.EphemeralContainerCommon)
		}
	}
	return nil
}

// startEphemeralsLocked starts each ephemeral container of d the manager
// has not started yet, once.
func (m *Manager) startEphemeralsLocked(d *Desired) {
	if m.runCtx == nil {
		return
	}
	for i := range d.Pod.Spec.EphemeralContainers {
		ec := &d.Pod.Spec.EphemeralContainers[i]
		if m.ephemeralLocked(ec.Name) != nil {
			continue
		}
		cs := newContainerState(ec.Name, ec.Image, false, false)
		cs.ephemeral = true
		m.ephems = append(m.ephems, cs)
		m.workers.Add(1)
		go func() {
			defer m.workers.Done()
			m.runEphemeral(m.runCtx, cs)
		}()
	}
}

// ephemeralLocked is the ephemeral container of that name, nil when none.
func (m *Manager) ephemeralLocked(name string) *containerState {
	for _, cs := range m.ephems {
		if cs.name == name {
			return cs
		}
	}
	return nil
}

// runEphemeral runs an ephemeral container once the pod's sandbox (its
// network, volumes and disks) is there.
func (m *Manager) runEphemeral(ctx context.Context, cs *containerState) {
	select {
	case <-m.sandboxUp:
	case <-ctx.Done():
		return
	}
	m.log.InfoContext(ctx, "starting ephemeral container", "container", cs.name)
	m.runContainer(ctx, cs)
}

// findTarget finds the PID namespace an ephemeral container joins, its
// target's, as the kubelet's getTargetID: an error while the target does
// not run (the container waits with CreateContainerConfigError).
func (m *Manager) findTarget(cs *containerState, d *Desired) error {
	if !cs.ephemeral {
		return nil
	}
	var target string
	for i := range d.Pod.Spec.EphemeralContainers {
		if ec := &d.Pod.Spec.EphemeralContainers[i]; ec.Name == cs.name {
			target = ec.TargetContainerName
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	cs.pidNS = ""
	if target == "" {
		return nil
	}
	var t *containerState
	for _, c := range m.containersLocked() {
		if c.name == target {
			t = c
		}
	}
	if t == nil || t.task == nil {
		return fmt.Errorf("unable to find target container %s", target)
	}
	cs.pidNS = fmt.Sprintf("/proc/%d/ns/pid", t.task.Pid())
	return nil
}

// pidNSOf is the PID namespace cs joins (findTarget), "" for its own.
func (m *Manager) pidNSOf(cs *containerState) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return cs.pidNS
}

// restoreEphemeralsLocked gives the manager the ephemeral containers an
// earlier agent started, as it last reported them, so that none starts
// again: one that was running is lost to this agent
// (ContainerStatusUnknown, as the kubelet reports a container it lost).
// Those it had not started yet start with the next Apply, or below.
func (m *Manager) restoreEphemeralsLocked(d *Desired, saved []corev1.ContainerStatus) {
	for _, ec := range d.Pod.Spec.EphemeralContainers {
		cs := newContainerState(ec.Name, ec.Image, false, false)
		cs.ephemeral = true
		for _, s := range saved {
			if s.Name == ec.Name {
				cs.status = s
			}
		}
		if cs.status.ContainerID == "" {
			continue // never started: Apply starts it (startEphemeralsLocked)
		}
		if cs.status.State.Terminated == nil {
			cs.status.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: 137, Reason: "ContainerStatusUnknown", ContainerID: cs.status.ContainerID,
				Message: "The container could not be located when the pod was terminated",
			}}
		}
		m.ephems = append(m.ephems, cs)
	}
}
