// Package toy is a Kip cloud plugin for a toy cloud, written the way a third
// party writes one: in its own module, from docs/plugins.md and go doc,
// importing only pluginapi and the standard library. The guide's
// walkthrough quotes it, and `make examples` keeps both true.
//
// The toy cloud is a directory (config key dir): an instance is one JSON
// file in it, <dir>/<instance ID>.json. Every process of the plugin pointed
// at the directory sees the same cloud, so a restarted plugin finds what
// the old one launched, and the file system makes Launch idempotent: the
// instance ID is derived from the cluster and cell IDs, and the file is
// created only if it is absent. Nothing boots: an instance is running
// bootSeconds after its launch, at an address where no cell agent listens,
// so kip can list, verify and drive the plugin, but a pod given a toy cell
// never starts.
//
// The cloud has disks too, <dir>/disks/<handle>.json, which the plugin
// attaches to its instances (the optional pluginapi.VolumeAttacher, for
// PersistentVolumes of the CSI driver toy.csi.example.com): CreateDisk
// and DeleteDisk stand in for the cloud's own disk API.
//
//	provider.go  New, GetInfo, Configure, ListInstanceTypes: the plugin's face
//	cloud.go     Launch, Describe, List, Terminate over the directory
//	disks.go     AttachVolume, DetachVolume, DescribeVolumeAttachments over its disks
//
// It imports only the standard library and pluginapi (with its kit,
// pluginapi/kit).
package toy
