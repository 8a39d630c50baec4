// Package cells runs the cell lifecycle: one cell (one instance, through
// the cloud plugin) per pod bound to the virtual node.
//
//	Pending → Launching → Booting → Connecting → Running → Terminating → Gone
//
// The Manager implements host/node.Pods for virtual-kubelet's pod
// controller. CreatePod, UpdatePod and DeletePod only record intent and
// return; a goroutine per cell does the work and retries what is
// transient, because virtual-kubelet turns a returned error into a Failed
// pod for restartPolicy=Never. Status is pushed to virtual-kubelet as it
// changes (PodNotifier), never polled.
//
// The cell ID is derived from the pod UID, so a Launch retried after any
// crash lands on the same instance (the plugin contract makes Launch
// idempotent on it). The Manager also terminates cells whose pod is gone
// without a DeletePod (virtual-kubelet force-deletes pods that never ran
// without telling the provider) and cells nobody knows (after a restart),
// and re-adopts running cells of pods that still exist.
//
// It imports pluginapi, host/dispatch, cell/api and client-go; never
// host/node's implementation.
package cells
