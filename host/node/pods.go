package node

import (
	"context"
	"io"

	vknode "github.com/virtual-kubelet/virtual-kubelet/node"
	"github.com/virtual-kubelet/virtual-kubelet/node/api"
)

// Pods is what the virtual node needs from the cell manager (host/cells):
// the pod lifecycle that virtual-kubelet's pod controller drives, status
// pushed as it changes (PodNotifier; never polled), and the streaming calls
// behind the kubelet API's logs, exec, attach and port-forward routes.
//
// Contract, beyond virtual-kubelet's own:
//   - CreatePod, UpdatePod and DeletePod return quickly and do the work
//     asynchronously; a transient failure (a plugin restarting, a cell
//     booting) is retried inside, never returned, because virtual-kubelet
//     turns a returned error into a Failed pod for restartPolicy=Never.
//   - DeletePod is idempotent and also applies to pods still launching: the
//     cell is terminated whether or not it ever ran.
//   - GetPod, GetPodStatus and GetPods answer from memory.
//   - Pods are keyed by UID inside; namespace/name is only for lookups.
type Pods interface {
	vknode.PodLifecycleHandler
	vknode.PodNotifier

	// GetContainerLogs streams a container's log.
	GetContainerLogs(ctx context.Context, namespace, pod, container string, opts api.ContainerLogOpts) (io.ReadCloser, error)
	// RunInContainer executes cmd in a container (kubectl exec).
	RunInContainer(ctx context.Context, namespace, pod, container string, cmd []string, attach api.AttachIO) error
	// AttachToContainer attaches to a container's main process (kubectl attach).
	AttachToContainer(ctx context.Context, namespace, pod, container string, attach api.AttachIO) error
	// PortForward connects stream to port inside the pod (kubectl port-forward).
	PortForward(ctx context.Context, namespace, pod string, port int32, stream io.ReadWriteCloser) error
}
