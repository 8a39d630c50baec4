// Package registry runs an in-process OCI registry over plain HTTP for
// Kip's tests, so that no test image ever comes from the internet.
//
// It serves go-containerregistry's in-memory registry (pkg/registry) on a
// TCP listener, by default on 127.0.0.1 with a kernel-chosen port, and can
// require HTTP basic auth to mimic a private registry behind an
// imagePullSecret:
//
//	reg, err := registry.Start(ctx, registry.Options{Username: "u", Password: "p"})
//	if err != nil { ... }
//	defer reg.Close()
//	ref := reg.Ref("kip-e2e/hello", "v1") // "127.0.0.1:PORT/kip-e2e/hello:v1"
//
// Package test/images builds the test images and pushes them here.
//
// # Reaching the registry from a cell
//
// A cell in its own network namespace cannot reach 127.0.0.1 of the machine:
// loopback is per namespace. For such tests listen on every address
// (Options.Addr "0.0.0.0:0" or "0.0.0.0:PORT") and set
// Options.AdvertiseHost to an address of the machine that the cell can
// route to (for example the host side of its veth pair). Host and Ref then
// report that address, while LocalHost still gives an address this process
// can use. containerd treats only loopback registries as plain HTTP by
// default: a puller of a non-loopback Host must enable plain HTTP for it
// (docker.WithPlainHTTP in containerd's resolver, name.Insecure in
// go-containerregistry).
//
// The package imports only the standard library and go-containerregistry; it
// never imports host or cell.
package registry
