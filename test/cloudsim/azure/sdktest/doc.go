// Package sdktest tests the ARM simulator (test/cloudsim/azure, package
// azuresim) with the real Azure SDK for Go (armcompute/v8 v8.3.0,
// armnetwork/v9 v9.0.0, azcore v1.24.0) over TLS, so that the simulator
// answers what the SDK sends (paths, api-version, bodies), the SDK reads
// what the simulator answers, and the long-running-operation protocol is
// the SDK's own: BeginCreateOrUpdate and BeginDelete follow
// Azure-AsyncOperation, Location and Retry-After with azcore's pollers,
// resume tokens included, and a failed operation surfaces as an
// *azcore.ResponseError.
//
// It is a module of its own so that the root module, which kip is built
// from, never requires the Azure SDK; it is in go.work (and the
// Makefile's MODULES), since the SDK's requirements (azcore, x/net,
// x/text) raise nothing there: plugins/azure already brings the same
// versions, and the root module the same x/net and x/text. It imports
// the root module's azuresim and test/cloudsim/simcells, and holds tests
// only.
package sdktest
