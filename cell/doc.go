// Package cell is the cell agent, kip-cell: Run wires the containerd
// runtime (cell/runtime), the pod state machine (cell/pod), the log store
// (cell/api/logs) and the gRPC service (cell/server) together and serves
// the host over mutual TLS on port 6421 (cell/api).
//
// # One cell, one pod, one containerd namespace
//
// Every cell runs one pod. Its containers live in the containerd namespace
// "kip-<cellID>", so many cells can share one containerd daemon without
// seeing each other's containers, and the agent can remove everything of
// its cell by removing that namespace. The agent cleans the namespace when
// it stops (SIGTERM: the cell is going away).
//
// Cells that share a machine (the local plugin's, many on one containerd)
// are started with --shared-namespace instead (Config.SharedNamespace):
// one namespace for all of them, where an image is pulled and unpacked
// once for every cell, not once per cell. There a cell owns its
// containers (IDs prefixed with the cell ID, labelled with it), their
// rootfs snapshots and a lease on the images it uses; cleaning up removes
// only those and leaves the images to the machine (runtime.Containerd's
// Cleanup). A cloud cell, alone on its instance, keeps its own namespace.
// They are also started with --cgroup-parent (Config.CgroupParent): the
// pod's group in the cell's cgroup, beside the agent's, where the
// containers' cgroups are made, so that the cell's limits bound the pod
// as a cloud instance's size does.
//
// # The agent outlives its pod's memory
//
// The agent and the pod share the cell's memory in separate cgroups
// (runtime.PlanPodCgroup): the agent makes the pod's group,
// Config.CgroupParent or, on a machine that is the cell, /kip-<cell ID>
// (containerd's parent of the cell's containers), and limits it to the
// cell's memory less Config.AgentMemory (64 MiB), or to the pod's own
// limit (its containers' together) when that is less, before the pod's
// first container starts. A pod that exhausts it is OOM-killed in its
// own group, reported OOMKilled with its restart policy applied, and the
// agent lives on. The agent lowers its OOM score adjustment
// (Config.OOMScoreAdj, kip-cell's -998) and gives each container the
// kubelet's by QoS class (-997 Guaranteed, 1000 BestEffort, Burstable by
// its memory request), so that even the machine's OOM killer takes the
// pod's processes first. What a cloud instance's boot recipe adds is in
// docs/plugins.md.
//
// # An agent that dies leaves its pod running
//
// An agent killed (kill -9) or crashed stops nothing: the containers run
// on under containerd, and the pod's state is in StateDir (StateFile,
// kept by cell/pod). The cell's service manager starts the agent again
// (systemd on a cloud instance, Restart=always; the local plugin for a
// local cell), and Run, finding that state for the bootstrap's pod,
// resumes the pod (pod.Manager.Restore): it takes the running containers
// over without restarting them, keeps the volumes and /etc files, and
// reports the same status as before; the host's connections simply come
// back. Only when there is no state (or it is another pod's) does Run
// clean up what an earlier agent left: the namespace (in a shared one, the
// cell's containers and lease), volumes, /etc files and termination
// messages.
//
// # Networks: where containers run and where images come from
//
// The cell's network namespace is the one given by --netns: by default
// the agent's own (/proc/<agent pid>/ns/net; not /proc/self, which runc
// would resolve in its own process), with the cell's address (--pod-ip,
// default $KIP_CELL_ADDRESS), which the agent reports as hostIP. On a
// cloud cell that is the instance's network, and with the local plugin
// the agent is started inside the cell's network namespace with `nsenter
// --net`, so in both cases the default is right.
//
// When the host sends the pod an address of its own (ApplyPodRequest's
// pod_address, the plugin's pluginapi.AddressPod), the pod gets a network
// namespace of its own with it (cell/podnet, pinned under PodNetDir, so
// that a restarted agent finds it), apart from the cell's, and reports it
// as podIP; the ClusterIP services are programmed there (the service
// proxy holds the host's table until then). Without one, and for a
// hostNetwork pod, the containers join the cell's namespace and the pod's
// IP is the cell's, as before (pod.Config.Network). An agent given its
// namespace (--netns: a light cell) gives no pod one of its own: it
// refuses a pod address (UNIMPLEMENTED, pod.ErrNoPodNetwork), and the
// host sends the pod again without it, its downward API resolved for the
// cell's address. The pod's IP is reported once its network is up, as a
// kubelet reports none before the pod's sandbox has its network.
//
// # Mounts: where secrets live
//
// Secret and projected volumes (service account tokens) and emptyDirs of
// medium Memory go on a tmpfs the agent mounts, so that secrets never
// touch the disk, but only when containerd, which starts runc, shares the
// agent's mount namespace (runtime.MountsShared asks the kernel for the
// daemon's process behind its socket and compares namespaces): a tmpfs in
// another namespace is invisible to runc, and the containers would see the
// empty directory underneath. That is why the local plugin enters only the
// network namespace (`ip netns exec` would also unshare the mount
// namespace), as a cloud cell's agent, a systemd service, shares the
// machine's with containerd. Where the namespaces differ or cannot be
// read, the volumes are directories on disk, which the containers see, and
// each pod gets a VolumeOnDisk Warning event saying so and why. A pod's
// disks (persistent volumes the host attached) are mounted the same way
// and need the shared namespace too: without it a disk is refused
// (FailedMount) rather than mounted where runc cannot see it; a Block
// volume's device node needs no mount and works either way.
//
// Image pulls are made by the agent process (the containerd client
// resolves and fetches, then streams into the daemon), from the agent's
// network namespace — the pod's. This keeps cloud cells simple (the
// instance reaches its registries like any machine) and means that a
// registry must be reachable from the cell: with the local plugin in netns
// mode a registry on the machine's 127.0.0.1 is NOT reachable; run it on an
// address the cell routes to (the bridge gateway, or 0.0.0.0 and advertise
// the gateway). The agent does not reach back into the root namespace for
// pulls: that would be a local-only special case with its own privileges.
//
// # DNS: what dnsPolicy Default means on a cell
//
// A pod's /etc/resolv.conf is written by the agent (cell/pod) from the
// cluster DNS settings the host sends and, for dnsPolicy Default (and a
// ClusterFirst pod when the cluster has no DNS, and the host part of the
// ClusterFirst search path), from the cell's own resolver configuration:
// --resolv-conf, default /etc/resolv.conf, as a kubelet's --resolv-conf.
// The cell is the pod's node, so Default means what the instance itself
// uses. On a cloud cell that is the instance's /etc/resolv.conf (the
// VPC's resolver); the pod shares the instance's network, so even a
// loopback resolver there works. With the local plugin it is this
// machine's /etc/resolv.conf as the agent sees it (`ip netns exec`
// replaces it by /etc/netns/<namespace>/resolv.conf where that exists),
// and the pod runs in the cell's network namespace: a loopback
// nameserver such as systemd-resolved's 127.0.0.53 does not answer there,
// so point --resolv-conf at a file with reachable servers
// (/run/systemd/resolve/resolv.conf), as a kubelet on such a host does.
//
// Plain HTTP is used for loopback registries and for those named with
// --insecure-registry (repeatable, host or host:port); every other registry
// is pulled from over HTTPS. A per-cluster list would belong in the
// Bootstrap document (proposal: Bootstrap.InsecureRegistries []string, set
// from the host's config); until cell/api has it, the local plugin passes
// the flag through its agentArgs.
//
// # The cloud's notices: spot interruptions
//
// EC2 announces the reclaim of a spot instance two minutes ahead, and
// recommends a rebalance earlier, only in the instance's metadata (and in
// EventBridge). With --imds-endpoint (EC2's address by default; a unix
// socket for the EC2 simulator; "none" where there is no EC2 metadata, as
// the local plugin says through $KIP_CELL_IMDS_ENDPOINT) the agent reads
// both every five seconds through cell/imds and reports them with every
// status update (api.InstanceNotice), for the host to evict the pod in
// time. A metadata service that never answers (a cell on another cloud)
// is given up after a few tries.
//
// # The instance's identity
//
// When the host joins the cell, the agent sends the cloud's signed
// identity of its instance for the host's plugin to check: on EC2 the
// identity document and its signature from --imds-endpoint; with
// --gce-metadata-endpoint (Compute Engine: http://metadata.google.internal;
// a unix socket for the Compute Engine simulator) the instance's identity
// token instead, a JWT Google signs, minted for the audience
// pluginapi/identity.Audience(bootstrap clusterID, cellID), which the gce
// plugin checks (deploy/gce/startup.sh passes the flag).
//
// # Light cells: the same agent over a fake runtime
//
// Config.Runtime replaces containerd with another runtime.Runtime:
// test/lightcell runs this Run over cell/runtime/fakeruntime, whose
// containers run no process, so that a thousand cells fit on one machine
// for scale tests and everything else (join, pod logic, status, logs,
// exec, stats, services) is the real agent's. Config.Listener serves on a
// socket another process opened (a light cell hosted by a process that
// holds many), Config.ServicePrograms takes the ClusterIP services
// instead of iptables. Flags (kip-cell's command line) and ReadBootstrap
// are shared by kip-cell and the light cells' commands.
//
// It imports the cell packages, cell/api, pluginapi/identity,
// pluginapi/userdata, containerd's client and gRPC.
package cell
