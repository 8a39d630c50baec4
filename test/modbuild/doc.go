// Package modbuild builds programs of published Go modules (Kubernetes,
// etcd, CoreDNS) from the Go module proxy for Kip's tests, the way the
// Makefile reads karpenter's module: in a throwaway module outside any
// workspace (GOWORK=off), so that no go.mod of the repository changes and
// the module's own requirements decide its dependencies.
//
// It holds the steps its callers share: the toolchain's version, a
// module's go.mod and its go directive (a module that needs a newer Go than
// the machine's is refused before a long build starts), go commands run
// outside the workspace with CGO_ENABLED=0, and a stamp file that marks a
// directory of built binaries as current for one module version and one Go
// toolchain, and a lock (Lock, an flock in the cache directory) so that
// two processes that build the same program at once, such as two test
// binaries that go test runs in parallel, build it once: the second waits,
// then finds it current. Program builds one command of a module that way,
// cached with such a stamp. The callers decide what to build: test/controlplane builds
// Kubernetes and etcd, test/images builds CoreDNS and metrics-server
// (Program), test/scale virtual-kubelet's mock node (Program).
//
// It imports only the standard library; it never imports host or cell.
package modbuild
