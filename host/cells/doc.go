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
// # Placement
//
// Before launching, the pod's requirements are ranked against the plugin's
// catalog (host/match; the catalog is fetched once per Config.CatalogTTL).
// The first candidate is launched in its zone with its capacity type; an
// InsufficientCapacity answer marks that offering unavailable for
// Config.UnavailableTTL and the next candidate is launched. The chosen
// type, zone, capacity type and hourly price go into a LaunchingCell event
// and the pod's cell.kipcell.io/* annotations (sent with the status, which
// the API server accepts from the node). A pod nothing fits stays Pending
// with status reason NoInstanceType, a warning event with the matcher's
// explanation, and no instance; it is matched again when it changes or
// after Config.RematchInterval.
//
// The cell ID is derived from the pod UID, so a Launch retried after any
// crash lands on the same instance (the plugin contract makes Launch
// idempotent on it). The Manager also terminates cells whose pod is gone
// without a DeletePod (virtual-kubelet force-deletes pods that never ran
// without telling the provider) and cells nobody knows (after a restart),
// and re-adopts running cells of pods that still exist.
//
// It imports pluginapi, host/match, host/dispatch, host/setting, cell/api and
// client-go; never host/node's implementation or host/config. Config's
// koanf-tagged fields are the cells section of kip.yaml (config.go).
package cells
