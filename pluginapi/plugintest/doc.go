// Package plugintest is the test kit for Kip cloud-plugin authors: an
// in-process gRPC harness and a conformance suite for pluginapi.Provider.
//
// Serve (or Client, for a test) runs a Provider on a real gRPC server in
// memory and returns the pluginapi.Client the host would use, so every
// answer crosses the wire: protobuf encoding, the mapping of error kinds to
// gRPC statuses and back, and the host's validation of answers.
//
// Run checks a plugin against the contract of pluginapi.Provider, one
// subtest per case (Cases lists them): GetInfo before Configure and
// well-formed capabilities (info); NotConfigured for every other call
// before Configure (not-configured); Configure accepting the valid config
// and refusing the invalid ones, and an empty cluster ID, with
// InvalidConfig naming their key (config); no config answered as {}, and
// one that is not a JSON object refused with key "plugin.config"
// (empty-config); a valid, non-empty catalog; Launch reaching running with
// an address and the standard tags; Launch idempotent on the cell ID, one
// call after the other and at once; List showing only the configured
// cluster's instances; Terminate twice, then Describe and List showing the
// instance ended or absent; Launch of a terminated cell answering that
// instance and starting nothing (launch-after-terminate); Terminate and
// Describe of an unknown ID; Unsupported naming the field for each Launch
// feature whose capability the plugin lacks (unsupported-fields); eight
// concurrent launches; answers to cancelled contexts that are context
// errors (context-cancellation); every call returning within 200 ms of a
// 50 ms deadline, watched on the plugin's side of the wire (deadline);
// error kinds surviving the wire. For a plugin that reports
// pluginapi.CapabilityVolumes, the volume cases attach disks the harness
// creates (Config.CreateVolume, required then) to running instances:
// AttachVolume answering attaching or attached, idempotent with the same
// device, and DescribeVolumeAttachments showing attaching then attached
// (volume-attach); VolumeConflict in-use for a disk attached to another
// instance (volume-in-use) and wrong-zone for a disk of another zone
// (volume-wrong-zone, Config.OtherZone); wrong-type for a disk the
// instance's type cannot take (volume-wrong-type, Config.IncompatibleVolume
// on Config.IncompatibleInstanceType; a plugin whose cloud has none says
// why in Config.NoIncompatibleVolume, and the case is skipped with that
// reason, never counted as passed); DetachVolume idempotent, the
// attachment detaching then gone, then NotFound (volume-detach);
// Unsupported naming FieldVolumeDriver for a driver the plugin does not
// attach, and NotFound for an unknown instance (volume-refusals). Each case
// terminates what it launched and deletes the disks it created
// (Config.DeleteVolume). Check runs the same cases without a testing.T and
// returns their Results.
//
// A plugin's conformance test:
//
//	func TestConformance(t *testing.T) {
//		if testing.Short() {
//			t.Skip("launches real instances")
//		}
//		plugintest.Run(t, mycloud.New, plugintest.Config{
//			Plugin: []byte(`{"region":"eu-west-1","subnets":["subnet-0abc"]}`),
//			Invalid: []plugintest.InvalidConfig{
//				{Config: []byte(`{"region":""}`), Key: "region"},
//				{Config: []byte(`{"region":"eu-west-1","subnets":[]}`), Key: "subnets"},
//			},
//			InstanceType: "t3.micro",
//			ReadyTimeout: 5 * time.Minute,
//			// With CapabilityVolumes: disks the suite attaches.
//			CreateVolume: func(ctx context.Context, zone string) (string, error) {
//				return createTestDisk(ctx, zone) // the harness's own cloud call
//			},
//			DeleteVolume: deleteTestDiskOnceDetached,
//		})
//	}
//
// Every Provider the factory returns must see the same cloud, as separate
// processes of a real plugin do: some cases configure two providers with
// different cluster IDs (ClusterID and ClusterID+"-b") and check that each
// sees only its own instances. For an in-memory provider, close the factory
// over one shared backend (for the fake, one fake.Store).
//
// Golden compares what a plugin renders (a launch request, a boot recipe,
// its configuration's JSON Schema) with a golden file under testdata,
// which a test binary's -update flag rewrites.
//
// This package imports only the standard library, gRPC and pluginapi.
package plugintest
