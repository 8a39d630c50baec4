#!/usr/bin/env bash
# Installs the Debian packages Kip's build, tests and demo need, only those
# missing, so a second run costs nothing. Named one by one, because the
# install leaves out recommended packages: a machine that has one from
# elsewhere must not hide that it is missing here (hack/fresh-root.sh proves
# the list on a Debian root that starts with Go and make only).
#   ca-certificates    TLS roots for the Go module proxy
#   git                make verify (git ls-files), versions (git describe)
#   gcc, libc6-dev     cgo, which go test -race needs
#   protobuf-compiler  protoc, for make generate / make verify
#   libprotobuf-dev    the well-known .proto files (google/protobuf/*.proto)
#   iproute2           ip, for the local plugin's network namespaces
#   iptables           cell network rules
#   containerd, runc   the cell agent's container runtime (runc: crun fails on
#                      these machines' hybrid cgroups)
#   busybox-static     test images built locally, no image from the internet
#   containernetworking-plugins  CNI bridge, host-local, loopback, portmap for
#                      the local cluster's real kubelet node (test/kubeletnode)
#   procps             sysctl, which turns on forwarding in the kubelet node's
#                      network namespace (minbase Debian has none)
# The Kubernetes control plane is not a Debian package: kip-cluster builds it
# from source through the Go module proxy (test/controlplane).
set -euo pipefail

packages=(ca-certificates git gcc libc6-dev protobuf-compiler libprotobuf-dev iproute2 iptables containerd runc busybox-static containernetworking-plugins procps)

missing=()
for p in "${packages[@]}"; do
  [ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" = "install ok installed" ] || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  sudo=sudo
  command -v sudo >/dev/null || { echo "missing Debian packages ${missing[*]}: install them as root (apt-get install ${missing[*]})" >&2; exit 1; }
else
  sudo=
fi
# apt's and debconf's own lines (warnings such as "W: Download is
# performed unsandboxed as root", debconf's about a missing terminal) go
# to a log, not to the screen of a first make demo (issue 32); a failure
# prints its end.
log=$(mktemp "${TMPDIR:-/tmp}/kip-install-deps-XXXXXX.log")
echo "installing Debian packages, once: ${missing[*]}"
if ! { $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"; } >"$log" 2>&1; then
  echo "installing the Debian packages failed; the end of $log:" >&2
  tail -20 "$log" >&2
  exit 1
fi
rm -f "$log"
