// Package fake is an in-memory Kip cloud plugin for tests: Provider
// implements pluginapi.Provider, pluginapi.EventWatcher,
// pluginapi.RegistryAuthenticator and pluginapi.InstanceIdentityVerifier
// (IdentityDocument and IdentitySignature make an identity it accepts) over
// a Store, the simulated cloud.
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
// This package imports only the standard library and pluginapi.
package fake
