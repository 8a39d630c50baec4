// Package pod runs one pod on a cell with the kubelet's semantics, over a
// runtime.Runtime.
//
// A Manager is level-triggered on the desired pod: Apply hands it the whole
// pod with a generation, and it converges to the highest generation it has
// seen (older ones are ignored). On the first Apply it starts the pod:
//
//   - images are pulled per container with the pod's registry credentials;
//     a failure shows as Waiting ErrImagePull with the registry's message,
//     then ImagePullBackOff while it waits to retry (exponential back-off);
//   - init containers run one after the other, each until it succeeds
//     (restarted with back-off, or failing the pod under restartPolicy
//     Never);
//   - then the app containers run side by side, each restarted per
//     restartPolicy (Always, OnFailure, Never) with the kubelet's back-off:
//     Backoff.Initial (10s) doubling up to Backoff.Max (5m), reset once a
//     run lasted Backoff.Reset (10m); while it waits the container is
//     Waiting CrashLoopBackOff with its last state Terminated;
//   - a later generation that changes a container's image restarts that
//     container with the new image.
//
// Ephemeral containers (kubectl debug), added by a later generation, are
// started once each and never restarted, in the pod's network namespace
// and, with targetContainerName, in the target's PID namespace; they
// are reported in ephemeralContainerStatuses (ephemeral.go).
//
// Status is the core/v1 PodStatus the kubelet would report: phase, the
// Initialized, ContainersReady and Ready conditions (PodScheduled is the
// host's), container statuses with state, last state, restart count, ready,
// started, image, imageID and containerID ("containerd://<id>"), podIP(s),
// hostIP(s) and startTime. Watchers are told of every change.
//
// Events: the manager records the kubelet's events for the host (Events,
// AckEvents): Pulling, Pulled (with the pull time, or "already
// present"), Failed (pull errors, "Error: ErrImagePull",
// CreateContainerConfigError, start errors), BackOff (image pulls and
// crash loops), Created, Started and Killing. Each event wakes the
// watchers like a status change; up to MaxPendingEvents wait for the
// host, the oldest dropped (and counted) beyond.
//
// Volumes live under Config.VolumesDir, a directory per volume: emptyDir
// (a tmpfs with medium Memory, sized by sizeLimit), configMap, secret,
// downwardAPI and projected (the host's files, written kubelet-style
// behind a "..data" symlink that a new generation swaps atomically, so a
// refreshed token or a changed Secret reaches running containers; secrets
// and projections on a tmpfs) and hostPath (checked or created per its
// type). A tmpfs is mounted only where the runtime sees it
// (Config.NoTmpfs is nil); otherwise those volumes are on disk and the pod
// gets a Warning event VolumeOnDisk per volume, saying why. Containers get them as bind
// mounts per volumeMounts (readOnly, subPath, subPathExpr; file volumes
// always read-only). A subPath stays inside its volume and is pinned
// (subpath.go): opened beneath the volume and bind-mounted under
// .subpaths/<container>/<index>, which the runtime mounts, so a symlink
// swapped in afterwards cannot redirect it. A volume that cannot be set up, or of a kind the cell
// does not offer (csi, nfs, ...), keeps every container
// Waiting CreateContainerConfigError with a message naming the volume and
// its kind. Delete unmounts and removes them.
//
// Disks (disks.go): a persistentVolumeClaim volume, or a generic
// ephemeral one, gets the disk the host attached to the instance for it
// (Desired.Disks; without one it is a kind the cell does not offer), as a
// CSI node plugin gives it on a kubelet's node. Before any container
// starts, the manager finds the device: the first block device whose
// serial (/sys/block/<dev>/serial, or device/serial for NVMe) matches,
// dashes aside (an EBS volume's NVMe serial is its ID without the dash),
// else the disk's path with symlinks resolved, waiting for it up to
// Config.DiskWait (DefaultDiskWait, two minutes; a WaitingForDisk Warning
// event after ten seconds). In filesystem mode it probes the device with
// blkid as mount-utils' SafeFormatAndMount does: a blank one is formatted
// with the PV's fsType (ext4 when none; mkfs.ext4 -F -m0, mkfs.xfs -f),
// one holding another filesystem or a partition table is refused and
// never formatted, a blank one asked read-only refused too; an ext
// filesystem mounted writable is checked with fsck -a first. It is
// mounted at the volume's directory (read-only with the disk's ReadOnly
// or the claim volume's readOnly, with the PV's mountOptions) and bound into the containers per their
// volumeMounts like any volume (readOnly, subPath, whose missing directory
// is made with the root's mode, subPathExpr); with an fsGroup and not
// read-only it is given to the group as the kubelet's SetVolumeOwnership
// does, skipped under fsGroupChangePolicy OnRootMismatch when the root is
// the group's already. In volumeMode Block the device itself goes to each
// container per its volumeDevices (a device node at devicePath, allowed in
// its device cgroup, read-only when the disk is). A device that never
// appears, cannot be formatted or mounted, or holds the wrong filesystem
// keeps every container Waiting CreateContainerConfigError naming the
// volume and why, with a FailedMount Warning event in the kubelet's words
// (MountVolume.WaitForAttach / MountDevice / SetUp failed for volume …);
// the containers' retries try the disk again, at most once per
// Backoff.Initial. A device mounted outside the pod's volumes (the cell's
// own disk, named by mistake) is refused. Delete, once the containers are
// gone, unmounts every mount of each disk's filesystem under the volumes'
// directory (pinned subPaths first) without MNT_DETACH, retrying while it
// is busy, and returns only once nothing holds the device (an exclusive
// open succeeds), since the host detaches the disk next. A restarted agent
// takes over the disks mounted at their directories and sets up the
// others.
//
// Image volumes (imagevolumes.go): before the containers start each
// image volume's image is ensured by its pullPolicy, with the image
// manager's events on the pod (no container), and its root filesystem is
// mounted read-only at the volume's directory (Runtime.MountImage); a
// container that mounts one whose pull failed waits ErrImagePull, then
// ImagePullBackOff (ErrImageNeverPull under Never), the pull tried again
// after the back-off; containers get it read-only, a subPath only if it
// is a directory of the image (else CreateContainerError). Delete
// releases the views before the runtime's Cleanup.
//
// The /etc files (etcfiles.go, dns.go): every container gets the pod's
// /etc/hosts, /etc/hostname and /etc/resolv.conf as bind mounts of files
// under Config.EtcDir, as on a node the kubelet (hosts) and containerd
// (hostname, resolv.conf) provide them, never written into an image.
// They are ported from the kubelet rule by rule: resolv.conf per
// dnsPolicy (ClusterFirst: the host's cluster DNS servers, the search path
// <ns>.svc.<domain> svc.<domain> <domain> before the cell's own, ndots:5;
// without a cluster DNS it falls back to Default with a MissingClusterDNS
// warning event; Default: the cell's own resolv.conf, Config.ResolvConf;
// None: only dnsConfig; ClusterFirstWithHostNet; dnsConfig merged over
// each; the resolver's limits with DNSConfigForming events); hosts as the
// kubelet manages it (localhost, the pod IP with its hostname and, with a
// subdomain, <hostname>.<subdomain>.<ns>.svc.<domain>, then hostAliases;
// a hostNetwork pod gets the cell's own hosts file and its aliases);
// hostname from hostnameOverride, hostname or the pod name (63
// characters at most), the FQDN with setHostnameAsFQDN. A container that
// mounts a volume at one of those paths keeps its own. Each generation
// writes them again, in place, so running containers see a changed
// cluster DNS; a pod whose files cannot be made (a FQDN longer than 64
// characters) keeps its containers Waiting CreateContainerConfigError.
//
// Attach: a container with stdin: true gets a stdin pipe for its whole
// attempt and, with tty: true, a terminal; its output goes to the log and
// to every attach session (Attach). Sessions may follow one another; with
// stdinOnce the first session that ends closes the process's stdin.
//
// Probes (prober.go, probe.go, ported from the kubelet's prober): startup,
// liveness and readiness probes of kind exec (in the container, $(VAR)
// from its literal env, output kept to 10 KiB, a timeout is a failure
// "command timed out"), httpGet (the kubelet's request and User-Agent,
// https without verification, 2xx-3xx succeed, a redirect to another host
// is a ProbeWarning), tcpSocket and grpc (grpc.health.v1), with initial
// delay, period, timeout and thresholds. A container with a startup probe
// is not started, and its liveness and readiness probes wait, until that
// probe succeeds; readiness starts false; a liveness or startup failure
// kills the container (Killing "Container x failed liveness probe, will be
// restarted", the probe's terminationGracePeriodSeconds when set) and the
// restart policy decides what follows; every failure is an Unhealthy
// event.
//
// Lifecycle: a postStart hook (exec, httpGet, sleep) runs once the
// container started, which shows Running only after it; a failed hook is a
// FailedPostStartHook event and kills the container. Stopping a container
// (delete, a liveness failure, a new image) runs its preStop hook within
// the grace period (a failure is a FailedPreStopHook event without the
// hook's output), then sends the stop signal (the image's StopSignal, else
// SIGTERM) and SIGKILL once the rest of the grace period has passed (at
// least 2 s after a hook, the kubelet's minimum; a grace period of 0
// kills at once). Delete then removes everything from the runtime; the
// pod ends Succeeded if every container exited 0, Failed otherwise.
//
// activeDeadlineSeconds: counted from the pod's start time (a later
// generation may shorten it); once passed the pod is Failed with reason
// DeadlineExceeded and the kubelet's message, a DeadlineExceeded event,
// and its containers are stopped and not restarted.
//
// Evict (cell/ephemeral calls it when the pod passes its local storage
// limits) ends the pod as the kubelet's eviction manager does: Failed
// with reason Evicted and the message, a Warning event Evicted, its
// containers stopped with a grace period of one second and not restarted;
// a restarted agent keeps it so.
//
// Sidecars: an init container with restartPolicy Always starts in its
// turn, the next init container waits until it has started (its startup
// probe succeeded), it is restarted whatever its exit code, its readiness
// counts for the pod's, and it is stopped once the app containers have
// ended, so a Job's pod with a sidecar completes; its exit code does not
// count for the phase.
//
// Termination messages (termination.go): each attempt gets an empty file,
// mode 0666, under Config.TerminationDir, mounted at its
// terminationMessagePath; the file's last 4 KiB become the Terminated
// state's message, or with FallbackToLogsOnError, an empty file and a
// failure, the last 2 KiB of the log's last 80 lines.
//
// Security context (security.go): each container attempt gets the
// settings the kubelet would hand a CRI runtime, the container's
// securityContext over the pod's: the user (runAsUser, else the image's
// USER), runAsGroup, supplementalGroups and fsGroup as groups,
// capabilities, privileged, no_new_privs (allowPrivilegeEscalation:
// false), a read-only root, seccomp RuntimeDefault or Unconfined, the
// kubelet's masked and read-only paths and the pod's sysctls (normalized
// by cell/api/sysctl); the runtime turns them into the OCI spec as
// containerd's CRI does, and an exec gets the same. runAsNonRoot that the
// user breaks, and a Localhost seccomp profile (a cell has none), keep the
// container Waiting CreateContainerConfigError with the kubelet's message.
// With an fsGroup, emptyDir and file volumes belong to that group
// (volumes.go, setVolumeOwnership). What a cell does not apply (AppArmor,
// SELinux, hostUsers: false) gets a Warning event
// SecurityContextNotHonoured when the pod starts (kip's host refuses
// hostUsers: false before a cell exists; an agent driven otherwise still
// says so). Which pods may be privileged, set unsafe sysctls, use host
// namespaces, hostPath volumes or capabilities beyond Pod Security's
// baseline is the host's decision (host/cells admits them before a cell
// exists).
//
// Restarts of the agent (state.go): the manager keeps what a new agent
// needs to resume the pod in Config.StatePath, rewritten atomically when
// the published status changes or a generation is accepted (the desired
// pod without its volumes' files, the status, and per container the
// attempts, whether an init container succeeded, and the running
// attempt's container ID and start time), and removes it on Delete.
// Restore, in a new manager, resumes that pod: running attempts are taken
// over (Runtime.Reattach) with their logs appended, attach and exec
// working and probes running again (a started container is not probed
// for startup again, its readiness kept until the readiness probe says
// otherwise); an attempt that exited while no agent ran is Terminated
// with its exit code and restarted per policy; one that is gone is
// Terminated with reason ContainerStatusUnknown; volumes and /etc files
// are taken over as they are. The status is what it was: same container
// IDs, start times, restart counts and condition times.
//
// Not yet: mount propagation.
//
// It imports cell/runtime, cell/api/logs, cell/api/expansion,
// cell/api/sysctl, k8s.io/api, apimachinery's validation, grpc's health
// client (gRPC probes) and the standard library.
package pod
