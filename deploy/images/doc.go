// Package images builds Kip's release images without Docker: OCI image
// indexes for several platforms (linux/amd64 and linux/arm64 by default),
// reproducible, made with go-containerregistry, and pushes them to a
// registry. make images runs its command, deploy/images/cmd/kip-images:
//
//	make images REGISTRY=registry.example.com/kip [PLATFORMS=linux/amd64,linux/arm64] [TAG=v1.2.3]
//	make image-plugin PLUGIN=aws REGISTRY=registry.example.com/kip
//
// # The images
//
// Images returns them; <registry>/<name>:<tag> each:
//
//   - kip: /usr/local/bin/kip, /usr/local/bin/kip-cell (the local plugin's
//     cells run it beside kip) and the plugins it ships (Plugins: local,
//     aws, gce, azure; Options.Plugins, kip-images --plugins, chooses
//     fewer) as /usr/local/lib/kip/plugins/kip-plugin-<name>;
//     entrypoint /usr/local/bin/kip, default arguments
//     run --config /etc/kip/kip.yaml. kip.yaml (or KIP_PLUGIN_DIR) sets
//     plugin.dir: /usr/local/lib/kip/plugins to use them, or the directory
//     an init container fills (below).
//   - kip-cell: /usr/local/bin/kip-cell, the cell agent, its entrypoint.
//   - kip-plugin-<name>, one per plugin: the same layer as in the kip image
//     (/usr/local/lib/kip/plugins/kip-plugin-<name>), the plugin its
//     entrypoint, no default arguments. Every plugin's main is
//     pluginapi.Serve, so `kip-plugin-<name> install DIR` copies the binary
//     to DIR/kip-plugin-<name> atomically: an init container running
//     `install /var/lib/kip/plugins` fills an emptyDir that kip's container
//     mounts as plugin.dir (docs/plugins.md, "Shipping as an image").
//
// Each is a base layer plus one layer per binary. The base is made here,
// from no other image (distroless-like): /etc/passwd and /etc/group with
// root and the non-root user kip, UID and GID 65532 (distroless's
// nonroot), which every image runs as (User "65532:65532");
// /etc/ssl/certs/ca-certificates.crt, copied from the build machine's
// Debian ca-certificates package (make deps installs it); /etc/nsswitch.conf
// (files, then dns); /tmp (1777); /home/kip (kip's, 0700); and the
// directories above. No shell, no package manager, no C library: the
// binaries are static (CGO_ENABLED=0). The images run with a read-only
// root file system.
//
// Every image carries the OCI labels (and its index the same annotations)
// org.opencontainers.image.title, source, revision (the commit), version
// and created (the commit's time).
//
// # Reproducible
//
// The same commit, built with the same Go toolchain, gives the same
// digests on any machine: binaries are built as make dist builds them
// (CGO_ENABLED=0, -trimpath, -X <package>.Version=<version>, GOWORK=off for
// plugins/gce) plus -buildid=, so they hold no path of the build machine
// and no build ID; every file, history entry and image has the time of
// the commit (SOURCE_DATE_EPOCH when set, which kip-images reads as
// reproducible-builds.org says, else git's commit time); layer entries
// are sorted by name, owned by root (but /home/kip) and gzipped in process
// (Gzip: compress/gzip, whose output depends on the input and the Go
// version only, where a gzip command's would depend on its version); the
// index lists platforms sorted. TestBuildIsReproducible builds twice and
// compares digests.
//
// # Sharing
//
// NewLayer, File and the Compressors are what test/images builds its test
// images with too.
//
// The package imports only the standard library and go-containerregistry:
// nothing of Kip, and it links no Kubernetes client, plugin or cloud SDK
// (it runs go build on them).
package images
