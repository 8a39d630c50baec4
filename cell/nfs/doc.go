// Package nfs mounts a pod's NFS shares on its cell, as the kubelet's nfs
// volume plugin and the NFS CSI node plugins do on a node: inline nfs
// volumes and the claims the host resolved to NFS shares (spec.nfs,
// csi-driver-nfs, Filestore, Azure Files over NFS).
//
// # Where the mount comes from
//
// The agent runs in the instance's network namespace, not the pod's, so
// the share's server is resolved and reached from the instance. Every
// address a server's name resolves to is checked first: an address only
// the instance reaches (cell/api/share: loopback, link-local where the
// clouds' metadata lives, Azure's WireServer) or one of the instance's
// own is refused, naming the server and why, so that a pod cannot use
// the agent to reach what its own network namespace keeps from it.
//
// # The kernel's client, or the agent's own
//
// Mount first asks the kernel (mount(2) of type nfs or nfs4 with the
// server's address in addr=, as mount.nfs passes it; no helper program
// is needed), trying NFS 4.2, 4.1, 4.0 and then 3 as mount.nfs
// negotiates, unless the options name a version (vers= or nfsvers=,
// minorversion=). Other options go to the kernel as nfs(5) spells them;
// the generic ones (ro, noatime, nosuid, ...) become mount flags. Every
// share is mounted nodev: a device node on a share must not open a
// device of the instance.
//
// Where the kernel has no NFS client (mount(2) answers ENODEV: a kernel
// built without it, as on the machine kip's own tests run on), Mount
// falls back on the agent's userspace NFSv3 client over FUSE
// (cell/nfsfuse), run as a child process of the agent's own executable
// (Mounter.Exe nfs-fuse ...) in a session of its own, so that it outlives
// an agent that dies and is started again. That client speaks NFS 3 only:
// a share whose options ask for version 4 is refused with an error that
// says the kernel's client is needed.
//
// Unmounting is the caller's: the agent unmounts a pod's volumes when the
// pod is deleted, and the FUSE child exits once its mount is gone.
package nfs
