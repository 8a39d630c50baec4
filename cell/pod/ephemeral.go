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
// A restarted agent (Restore) takes over an ephemeral container that
// runs, as it does the pod's containers, keeps the status of one that
// ended, and starts none again.

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

// restoreEphemeralsLocked gives the manager the ephemeral containers of
// d an earlier agent started (saved), so that none starts again: Restore
// takes over one that runs, as it does the pod's containers, and keeps
// the status of one that ended. One not started yet is left to
// startEphemeralsLocked.
func (m *Manager) restoreEphemeralsLocked(d *Desired, saved []savedContainer) {
	for _, ec := range d.Pod.Spec.EphemeralContainers {
		for _, sc := range saved {
			if sc.Ephemeral && sc.Name == ec.Name && (sc.Attempts > 0 || sc.TaskID != "") {
				cs := newContainerState(ec.Name, ec.Image, false, false)
				cs.ephemeral = true
				m.ephems = append(m.ephems, cs)
			}
		}
	}
}

// resumeEphemeralsLocked carries on with the ephemeral containers Restore
// took over running (their exit is still to be reported); those that had
// ended are done.
func (m *Manager) resumeEphemeralsLocked() {
	for _, cs := range m.ephems {
		if cs.resumed == nil || cs.resumed.ended != nil {
			continue
		}
		m.workers.Add(1)
		go func() {
			defer m.workers.Done()
			m.runEphemeral(m.runCtx, cs)
		}()
	}
}
