// Package pluginapi is Kip's cloud-plugin contract and the Go SDK for
// writing a plugin.
//
// A cloud plugin is a separate binary, kip-plugin-<name>, that the kip host
// starts as a subprocess and talks to over gRPC (hashicorp/go-plugin,
// protocol kip.plugin.v1). The plugin knows one cloud's compute API; the
// host knows Kubernetes. A plugin author:
//
//  1. implements Provider (provider.go: every call, its request and
//     response, and its idempotency and retry rules), returning the error
//     kinds of errors.go;
//  2. writes main as one call: pluginapi.Serve(mycloud.New);
//  3. runs the conformance suite in a test: plugintest.Run(t, factory, config).
//
// The wire contract is proto/kip/plugin/v1/plugin.proto; its generated Go
// code is internal, behind the Go types here, so authors never depend on it.
// The host side uses PluginSets, Handshake and GRPCDialOptions to start and
// dispense a plugin, and gets a Client whose answers are validated.
//
// This module imports only the standard library, gRPC, protobuf, go-plugin
// and hclog: never the host, the cell agent, client-go or any plugin.
package pluginapi
