// Package server is the cell agent's gRPC service, api.Cell, over one
// pod.Manager: ApplyPod (the pod, env, volume files, credentials, the
// disks the host attached, which pod.Manager finds, formats when blank and
// mounts; see cell/pod's package comment),
// WatchStatus (the current status first, then every change, coalesced,
// each update carrying the pod events not yet delivered), Logs, Exec (TTY,
// resize, stdin, exit code in the last message), Attach (the main
// process's output and exit code, plus stdin, TTY and resize for
// containers with stdin/tty, stdinOnce honoured), PortForward (127.0.0.1:port inside the pod's network
// namespace), Stats (cgroup CPU and memory of the running containers; unless
// only CPU and memory are asked for, the pod's network interfaces read in
// its network namespace, its volumes' (a disk's: its own filesystem's
// figures and usage) and the containers' writable layers'
// and logs' disk usage, and the cell's disk), DeletePod (which returns
// once the containers stopped and the pod's disks are unmounted and free,
// so that the host may detach them) and ApplyServices (the host's table of
// ClusterIP services, handed to a cell/clusterip Proxy that programs the
// pod's network namespace). Serve runs it over mutual TLS with the agent's
// Identity (identity.go, api.JoinService): the key the agent made and keeps
// in its state directory, and the certificate the host signed for it when
// it joined the cell (the Join service); until then every call but Join's fails
// FailedPrecondition "not joined". Once joined, the host renews the
// certificate before it expires (the Join service's Renew and
// CompleteRenew): a new key, a new certificate served from the next
// handshake on, connections open keeping theirs.
//
// WatchInstanceMetadata reads the cloud's notices about the instance (the
// spot interruption notice, the rebalance recommendation) from its
// metadata (cell/imds) into Notices, which WatchStatus sends with every
// update.
//
// Serve puts both on a gRPC server through cell/api's adapters
// (api.RegisterCell, api.RegisterJoin), which speak the wire, send the
// headers that commit an Exec, Attach or PortForward, and cut logs into
// messages of at most api.MaxChunk: the generated gRPC code stays inside
// cell/api.
//
// gRPC errors (status errors whose codes the host depends on): NotFound
// for an unknown container or missing log, FailedPrecondition for a
// container that is not running, a pod being deleted or a second pod,
// InvalidArgument for a malformed request; ApplyServices answers
// FailedPrecondition for a delta against a table the cell does not have,
// Internal when programming failed and Unimplemented when the cell
// programs no services.
//
// It imports cell/api, cell/api/logs, cell/imds, cell/pod, cell/runtime,
// cell/clusterip, gRPC and k8s.io/api.
package server
