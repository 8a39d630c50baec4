package cells

import (
	"context"
	"io"

	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
	"github.com/virtual-kubelet/virtual-kubelet/node/api"

	"github.com/kipcell/kip/host/cellclient"
)

// agentOf returns the agent of a pod's running cell, or a NotFound error
// that says why there is none (the kubelet API turns it into a 404).
func (m *Manager) agentOf(namespace, pod string) (*cellclient.Agent, error) {
	c := m.cells.byKey(namespace, pod)
	if c == nil {
		return nil, errdefs.NotFoundf("pod %s/%s is not on this node", namespace, pod)
	}
	agent := c.connectedAgent()
	if agent == nil {
		return nil, errdefs.NotFoundf("pod %s/%s: its cell %s is not running yet", namespace, pod, c.cellID())
	}
	return agent, nil
}

// GetContainerLogs streams a container's log from its cell, or, once the
// pod ended and its cell with it, from the logs kept of it (podLogs).
func (m *Manager) GetContainerLogs(ctx context.Context, namespace, pod, container string, opts api.ContainerLogOpts) (io.ReadCloser, error) {
	c := m.cells.byKey(namespace, pod)
	if c == nil {
		// A pod that ended before kip restarted has no cell in this run;
		// its logs were kept.
		if m.deps.pods != nil {
			if p, err := m.deps.pods.Pods(namespace).Get(pod); err == nil && m.deps.logs.has(namespace, pod, p.UID, container) {
				return m.deps.logs.read(ctx, namespace, pod, p.UID, container, opts)
			}
		}
	} else {
		c.mu.Lock()
		kept, uid := c.logsKept, c.uid
		c.mu.Unlock()
		if kept {
			return m.deps.logs.read(ctx, namespace, pod, uid, container, opts)
		}
	}
	a, err := m.agentOf(namespace, pod)
	if err != nil {
		return nil, err
	}
	return a.Logs(ctx, container, opts)
}

// RunInContainer executes cmd in a container on the pod's cell.
func (m *Manager) RunInContainer(ctx context.Context, namespace, pod, container string, cmd []string, attach api.AttachIO) error {
	a, err := m.agentOf(namespace, pod)
	if err != nil {
		return err
	}
	return a.Exec(ctx, container, cmd, attach)
}

// AttachToContainer attaches to a container's main process on the pod's cell.
func (m *Manager) AttachToContainer(ctx context.Context, namespace, pod, container string, attach api.AttachIO) error {
	a, err := m.agentOf(namespace, pod)
	if err != nil {
		return err
	}
	return a.Attach(ctx, container, attach)
}

// PortForward connects stream to port inside the pod on its cell.
func (m *Manager) PortForward(ctx context.Context, namespace, pod string, port int32, stream io.ReadWriteCloser) error {
	a, err := m.agentOf(namespace, pod)
	if err != nil {
		return err
	}
	return a.PortForward(ctx, port, stream)
}
