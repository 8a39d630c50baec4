// Package local is Kip's default cloud plugin: a "local instance" is a cell
// agent process on this machine. It needs no cloud account, so it is what
// `make demo` and the end-to-end tests run on, and it is the reference a
// third-party plugin author copies.
//
// Read it in this order; each file holds one concern:
//
//	provider.go   New, GetInfo, Configure, ListInstanceTypes: the plugin's face
//	config.go     the configuration: one struct, its keys and JSON Schema in its
//	              tags (pluginapi.DecodeConfig, ConfigSchema), validation, defaults
//	catalog.go    the built-in instance types and their nominal prices
//	launch.go     Launch: idempotent on the cell ID, across processes
//	describe.go   Describe and List: what the "cloud" says about a cell now
//	terminate.go  Terminate: undo everything Launch did
//	ended.go      tombstones: a terminated cell's Launch answers it, terminated
//	record.go     the on-disk record of a cell (instance.json): the truth
//	lock.go       per-cell and per-state-dir locks (mutex + flock)
//	address.go    race-free address allocation derived from the records, round the subnet
//	network.go    network namespaces, bridge and veth through iproute2
//	mountns.go    where commands run: the plugin's mount namespace or the machine's
//	cgroup.go     CPU and memory limits through cgroup v1 or v2
//	process.go    starting, watching and signalling the agent process
//	supervise.go  restarting an agent that died while its cell runs
//	volume.go     the local cloud's disks: sparse files and their records;
//	              CreateVolume and DeleteVolume, how disks come to exist
//	attach.go     AttachVolume, DetachVolume, DescribeVolumeAttachments:
//	              a disk's attachment as its record and the kernel have it
//	loop.go       binding and unbinding loop devices through their ioctls
//
// The contract a plugin implements is pluginapi.Provider; its rules (every
// call retryable, Launch idempotent, no state only in memory) shape this
// package. The "cloud" here is a state directory: every cell has
// <stateDir>/cells/<cellID>/ holding instance.json, the bootstrap file and
// agent.log. Any process pointed at the same state directory sees the same
// cells, which is how a restarted plugin finds the cells of the old one.
// A terminated cell leaves only <stateDir>/ended/<cellID>.json, kept a day.
//
// Volumes: the local cloud's disks are sparse files,
// <stateDir>/volumes/<handle>.img, each with a record (<handle>.json: its
// zone, size and attachment) made by CreateVolume (the conformance test's,
// and an operator's, until kip provisions local disks itself). The plugin
// reports capability volumes with driver local.csi.kipcell.io; attaching
// a disk to a running cell binds a loop device to its file, and the answer
// names the device, /dev/loopN, which the cell's agent sees since it runs
// in the mount namespace the plugin binds it in. The attachment is
// recorded before the kernel is touched and checked against the kernel
// (/sys/block/loopN/loop/backing_file) whenever it is answered, so a
// restarted plugin finds its attachments and never binds a disk twice.
// Terminate, and the end of a cell given up, detach its disks.
//
// The package imports only the standard library, pluginapi and
// golang.org/x/sys/unix (setns, for mountns.go; the loop ioctls, for
// loop.go).
package local
