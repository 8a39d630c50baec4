// Package runtime is the cell's narrow view of a container runtime: pull an
// image, start a container attempt in the cell's network namespace with
// cgroup limits, bind mounts (volumes), device nodes (block volumes, with
// their device cgroup rule, as containerd's oci.WithDevices makes them),
// optionally a stdin and a terminal (resizable), and its output going to
// the agent, wait for it, signal it, exec into it, read its metrics, and
// remove everything the cell created.
//
// Runtime is the interface the pod logic uses (tests use a hand-written
// fake); Containerd implements it over containerd's Go client, following
// /work/shared/research/containerd.md: one containerd namespace per cell
// ("kip-<cellID>"), the overlayfs snapshotter, runc, output through FIFOs
// copied by the agent, a fresh container and rootfs per attempt (Kubernetes
// semantics: a restarted container does not keep its writes).
//
// Cells on one machine may share a namespace instead (ContainerdConfig.Cell,
// the local plugin's cells): containerd 1.6 shares content blobs across
// namespaces but not unpacked snapshots (its namespace.shareable label
// changes nothing there), so one namespace is the way not to unpack an
// image once per cell. Images are then the namespace's; a cell's
// containers have IDs "<cell>.<attempt ID>" (hashed down to containerd's
// 76 characters when longer; Task.ID is still the attempt ID) and carry
// CellLabel, as do their rootfs snapshots; the cell's lease (named after
// it, no expiry) holds every image it pulled or found, so that an image
// record removed or re-tagged by someone else does not let garbage
// collection take its layers from under the cell. Cleanup removes the
// cell's containers, snapshots and lease and leaves the images (see there).
//
// Image pulls run in the agent's process: the containerd client resolves and
// fetches from the registry itself and streams the blobs into the daemon,
// so the registry must be reachable from the agent's network namespace (see
// the cell package comment). Loopback registries and the hosts listed in
// ContainerdConfig.InsecureRegistries are pulled from over plain HTTP;
// every other registry over HTTPS.
//
// A ContainerSpec's Security (security.go) is applied with the spec
// options containerd's CRI plugin uses, in its order: no_new_privs off
// unless asked, masked and read-only paths, capabilities ("ALL" first),
// privileged (every capability, the host's devices, writable sysfs and
// cgroups, no seccomp), no ambient capabilities, a read-only root,
// sysctls, the user and groups resolved in the image's /etc/passwd and
// /etc/group, and containerd's default seccomp profile
// (contrib/seccomp). An exec copies the container's process spec, so it
// runs with the same user, groups and privileges.
//
// Reattach takes over an attempt an earlier agent of the cell started
// (the agent restarted): the container is loaded by ID and its task
// attached with cio.NewAttach to the FIFOs it was started with, which are
// under StateDir and which the shim kept open, so its output goes on to
// the new writers and its exit, even one while no agent ran, is seen.
// Start removes a container an earlier agent created under the same ID
// but never recorded.
//
// MountImage gives an image volume its files (imagemount.go), as
// containerd's CRI plugin does: the image unpacked, a View snapshot of its
// root filesystem (read-only: a bind of a one-layer image, an overlay of
// lower directories only) mounted by the agent's process at the path it
// asks, labelled ImageViewLabel and kept from garbage collection by a
// root label until UnmountImage or Cleanup removes it; in a shared
// namespace it carries CellLabel too, so that the cell's Cleanup takes
// only its own views.
//
// MountsShared tells the agent whether containerd sees the mounts it
// makes (same mount namespace), which decides whether secrets may live on
// a tmpfs (see the cell package comment).
//
// The pod's cgroup (cgroup.go: PlanPodCgroup, PodCgroup.Make) is made
// and limited by the agent in cgroup v1's memory hierarchy or v2's
// unified one, beside the agent's own group in the cell's; containers'
// groups go in it (ContainerdConfig.CgroupParent), their CPU quotas held
// under the lowest quota above them, their OOM kills read from their
// group (v1 memory.oom_control, v2 memory.events), their OOM score
// adjustment (Resources.OOMScoreAdj) never below what the agent may set
// (OOMScoreAdjFloor, as containerd's restrict_oom_score_adj).
//
// It imports containerd, the OCI specs, x/sys/unix, moby's mountinfo and
// the standard library; nothing of Kubernetes.
package runtime
