// Package fake is an in-memory Kip cloud plugin for tests: Provider
// implements pluginapi.Provider, pluginapi.EventWatcher,
// pluginapi.RegistryAuthenticator, pluginapi.InstanceIdentityVerifier
// (IdentityDocument and IdentitySignature make an identity it accepts) and
// pluginapi.VolumeAttacher over a Store, the simulated cloud.
//
// Host tests use it directly or behind plugintest.Serve's real gRPC wire:
//
//	store := fake.NewStore()
//	p := fake.New(fake.WithStore(store), fake.WithBootDelay(2*time.Second))
//	p.FailNext("Launch", pluginapi.NewInsufficientCapacity("fake.small", "fake-a", pluginapi.CapacityOnDemand, "none left"))
//	... drive the host ...
//	if got := p.Calls("Launch"); got != 2 { t.Errorf(...) }
//
// Several providers on one Store see one cloud, each its own cluster, as
// real plugins configured with different cluster IDs do; Store.SetState
// simulates the cloud changing an instance (a crash, a spot reclaim). A
// plugin binary can serve the fake and survive kill -9 with WithStateFile:
//
//	func main() {
//		pluginapi.Serve(func(*slog.Logger) pluginapi.Provider {
//			return fake.New(fake.WithStateFile(os.Getenv("FAKE_STATE")))
//		})
//	}
//
// Behaviour, as the contract asks: every call but GetInfo and Configure
// fails with a pluginapi.NotConfiguredError (ErrNotConfigured) until
// Configure succeeds; Launch is idempotent on the cell ID per cluster and
// tags with pluginapi.StandardTags; List and Describe see only the
// configured cluster; Terminate removes the instance at once (Describe and
// List no longer show it), answering it terminated, and a later Terminate
// gets NotFound; a Launch of a terminated cell answers its instance,
// terminated, and starts nothing. Configure takes an empty config for {},
// and refuses an empty cluster ID (InvalidConfig key "clusterID"), a config
// that is not a JSON object (key "plugin.config") and a config with a
// "fail" key (key "fail"). Launch answers InvalidConfig key "instanceType"
// for a type not in the catalog, Unsupported naming the field
// (pluginapi.FieldSecurityGroups, ...) for a feature without its
// capability, and InsufficientCapacity when no available offering matches.
//
// Volumes, as EC2 attaches them: Store.CreateVolume makes a disk in a zone
// (its handle, "vol-00000001", is a PersistentVolume's volumeHandle for
// the driver VolumeDriver, the one GetInfo reports with
// pluginapi.CapabilityVolumes); a disk is attached to at most one
// instance. AttachVolume answers attaching, attached after WithAttachDelay
// (at once by default), with the device serial EC2's NVMe disks show;
// DetachVolume makes it detaching, then gone. Both are idempotent;
// DetachVolume of a disk not attached to the instance is NotFound.
// AttachVolume refuses with NotFound (unknown or ended instance or disk),
// VolumeConflict in-use (attached to another instance), wrong-zone (the
// disk in another zone than the instance), wrong-type (a disk
// Store.CreateTypedVolume made for instance types that cannot take it),
// attachment-limit (past Store.SetAttachmentLimit,
// DefaultAttachmentLimit by default), Transient
// (a pending instance, or a disk still detaching from it) and Unsupported
// (another driver; read-only, which EC2 does not offer). An instance that
// terminates loses its attachments, as EC2 detaches a terminated
// instance's volumes.
//
// This package imports only the standard library and pluginapi.
package fake
