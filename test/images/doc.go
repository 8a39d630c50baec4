// Package images builds Kip's test images locally and pushes them to the
// in-process registry of package test/registry, so that no test image comes
// from the internet.
//
// Every image is an OCI image for linux/runtime.GOARCH with a busybox base:
//
//   - Busybox is one layer made of Debian's statically linked /bin/busybox
//     (the busybox-static package, installed by make deps), a symlink under
//     /bin for each applet in Applets, a minimal /etc/passwd and /etc/group,
//     and Cmd ["sh"].
//   - GoProgram adds a second layer holding a Go main package built with
//     CGO_ENABLED=0 as /app, with Entrypoint ["/app"].
//   - The programs under programs/ are the tiny workloads the end-to-end
//     tests run: hello (prints "hello from <hostname>" and answers HTTP
//     and UDP with it; with -get URL it is the tests' client instead: asks
//     a URL, http, https or udp, n times on new connections and prints the
//     answers, and finds a Service by name through the pod's resolver),
//     crash (exits with $EXIT_CODE), logger (prints numbered lines) and
//     nfsserver (serves a directory over NFSv3 and MOUNT on port 2049 with
//     go-nfs: a test server, no authentication and no portmapper).
//
// PushAll pushes busybox, hello, crash, logger and nfsserver as
// <registry host>/kip-e2e/<name>:v1 and returns their references and
// digests:
//
//	reg, err := registry.Start(ctx, registry.Options{})
//	...
//	set, err := images.PushAll(ctx, reg)
//	...
//	pod.Spec.Containers[0].Image = set.Hello.Ref
//
// Images are built once per process, in about two seconds with the Go build
// cache warm, and are reproducible: their layers are made as the release
// images' are (deploy/images.NewLayer: entries sorted, file times fixed),
// so the same inputs give the same digests, but gzipped by the gzip
// command when there is one, as compress/flate is very slow under -race. $KIP_BUSYBOX replaces
// the path of the busybox binary, /bin/busybox by default.
//
// CoreDNS, the cluster DNS of the local cluster (deploy/coredns), is built
// the same way but apart, since its build is costly: BuildCoreDNS compiles
// CoreDNSVersion from the Go module proxy into ~/.cache/kip/coredns (cold:
// about two and a half minutes on two cores, then cached by version and Go
// toolchain), and PushCoreDNS pushes busybox plus /coredns as
// kip-e2e/coredns:<CoreDNSTag>. The end-to-end harness and the demo push it
// (test/e2e/framework's DeployDNS); make test builds only a stand-in.
// metrics-server (deploy/metrics-server), behind kubectl top and the
// HorizontalPodAutoscaler, is built and pushed the same way
// (BuildMetricsServer into ~/.cache/kip/metrics-server, PushMetricsServer
// as kip-e2e/metrics-server:<MetricsServerTag>; proxybuild.go holds what
// the two share, over test/modbuild's Program).
//
// IPTables is busybox plus this machine's iptables (the binary, the shared
// libraries ldd lists for it, the extensions a service mesh's REDIRECT
// rules load), for a pod whose init container rewrites its own network;
// PushIPTables pushes it as kip-e2e/iptables:<IPTablesTag>. It is made
// from what make deps installed, at test time, never committed.
//
// TestContainerdRunsImages, run as root where containerd and runc are
// installed, proves the images run: it starts Debian's containerd as a child
// process, pulls them over plain HTTP with basic auth and runs them with
// runc.
//
// The package imports only the standard library, go-containerregistry,
// deploy/images, test/registry and test/modbuild; it never imports host or
// cell.
package images
