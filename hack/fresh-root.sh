#!/usr/bin/env bash
# Runs the README's commands on a clean clone inside a fresh Debian bookworm
# root file system that starts with Go and GNU make and nothing else the
# project needs, so that a package missing from hack/install-deps.sh fails
# here even when this machine has it. Run as root:
#   hack/fresh-root.sh                 make check (what CI runs)
#   hack/fresh-root.sh demo-check      any make targets
#   KIP_FRESH_KEEP=1 hack/fresh-root.sh   keep the root afterwards, to look inside
#   KIP_FRESH_CACHES=1 hack/fresh-root.sh keep the root's Go caches (modules, builds,
#                                         tools, control plane) between runs in
#                                         ~/.cache/kip/fresh-root/home: for iterating
#                                         on a failure; the proof runs without it
#
# What it does:
#   1. once: debootstrap --variant=minbase bookworm into a tarball cached in
#      ~/.cache/kip/fresh-root (Debian's essential packages, apt, nothing more);
#   2. unpacks it into a new directory under /var/tmp, copies this machine's Go
#      (`go env GOROOT`) to /usr/local/go, installs make (the README's
#      prerequisites: Go and make), and clones HEAD of this repository to
#      /src/kip (a clean clone: committed files only);
#   3. in new mount and PID namespaces (so that every mount and process ends
#      with it), mounts /proc, /sys, /dev and a fresh /run and /tmp, makes the
#      root the namespace's / (pivot_root, so that containers work as on a
#      machine), and runs `make TARGET...` in the clone with an empty
#      environment but for PATH, HOME and TERM: empty Go caches, no Debian
#      package but those the project's own scripts install.
# The network is this machine's (Debian mirror and Go module proxy).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)

[ "$(id -u)" -eq 0 ] || { echo "$0: run as root (debootstrap, chroot, mounts)" >&2; exit 1; }
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(check)

cache="${XDG_CACHE_HOME:-$HOME/.cache}/kip/fresh-root"
base="$cache/bookworm-minbase.tar.gz"
mirror=${KIP_FRESH_MIRROR:-http://deb.debian.org/debian}
if [ ! -f "$base" ]; then
  command -v debootstrap >/dev/null || {
    echo "installing debootstrap (for this check only)"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null
  }
  mkdir -p "$cache"
  tmp=$(mktemp -d /var/tmp/kip-debootstrap-XXXXXX)
  trap 'rm -rf "$tmp"' EXIT
  echo "debootstrap bookworm (minbase) from $mirror (once; cached in $base)"
  debootstrap --variant=minbase bookworm "$tmp" "$mirror" >"$cache/debootstrap.log" 2>&1 ||
    { echo "debootstrap failed; its log: $cache/debootstrap.log" >&2; exit 1; }
  tar -C "$tmp" -czf "$base.part" . && mv "$base.part" "$base"
  rm -rf "$tmp"
  trap - EXIT
fi

work=$(mktemp -d /var/tmp/kip-fresh-XXXXXX)
root=$work/root
cleanup() {
  if [ -n "${KIP_FRESH_KEEP:-}" ]; then echo "the root stays in $root"; return; fi
  # The mounts lived in the namespace that just ended; never remove through one.
  for m in proc sys dev run tmp root/.cache root/go; do
    if mountpoint -q "$root/$m"; then echo "$root/$m is still mounted: not removing $work" >&2; return; fi
  done
  rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$root"
tar -C "$root" -xzf "$base"
goroot=$(go env GOROOT)
echo "copying Go from $goroot ($(go version | cut -d' ' -f3))"
cp -a "$goroot" "$root/usr/local/go"
cp /etc/resolv.conf "$root/etc/resolv.conf"
# The root shares this machine's network, so it trusts the same local CAs
# (a proxy's, say): certificates in /etc/ssl/certs that Debian's
# ca-certificates did not put there, and /usr/local/share/ca-certificates.
# They land where the ca-certificates package, once the project's scripts
# install it, adds them to the bundle; without that package Go trusts nothing.
mkdir -p "$root/usr/local/share/ca-certificates"
for f in /etc/ssl/certs/*.pem /usr/local/share/ca-certificates/*.crt; do
  [ -f "$f" ] || continue
  case "$(readlink -f "$f")" in /usr/share/ca-certificates/*|*/ssl-cert-snakeoil.pem) continue ;; esac
  name=$(basename "$f"); cp "$f" "$root/usr/local/share/ca-certificates/host-${name%.*}.crt"
done
echo "cloning HEAD ($(git rev-parse --short HEAD)) to /src/kip"
git clone -q --no-local "$repo" "$root/src/kip"
mkdir -p "$root/root"
caches=
if [ -n "${KIP_FRESH_CACHES:-}" ]; then
  caches="$cache/home"
  mkdir -p "$caches/.cache" "$caches/go"
  echo "keeping the root's Go caches in $caches (KIP_FRESH_CACHES)"
fi

# The namespaced part: mounts and processes end with it. The fresh root
# becomes the mount namespace's root with pivot_root, not chroot: under a
# chroot, runc places a container's bind mounts outside its root.
inner=$(cat <<'EOF'
set -euo pipefail
root=$1 caches=$2; shift 2
# The root's / must be a mount point, as on a machine (pivot_root needs it,
# and ip -n remounts / as a slave).
mount --bind "$root" "$root"
if [ -n "$caches" ]; then
  mkdir -p "$root/root/.cache" "$root/root/go"
  mount --bind "$caches/.cache" "$root/root/.cache"
  mount --bind "$caches/go" "$root/root/go"
fi
mount -t proc proc "$root/proc"
mount --rbind /sys "$root/sys"
mount --rbind /dev "$root/dev"
mount -t tmpfs tmpfs "$root/run"
mount -t tmpfs tmpfs "$root/tmp"
cd "$root"
mkdir -p .old-root
pivot_root . .old-root
exec /usr/bin/env -i HOME=/root TERM=dumb PATH=/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  /bin/bash -c 'set -e
    cd / && umount -l /.old-root && rmdir /.old-root
    echo "== the fresh root has: $(go version), then installs make"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends make >/dev/null
    cd /src/kip && make "$@"' fresh-root "$@"
EOF
)
start=$(date +%s)
status=0
unshare --mount --pid --fork --propagation private bash -c "$inner" inner "$root" "$caches" "${targets[@]}" || status=$?
echo "== fresh root: make ${targets[*]} exited $status after $(( $(date +%s) - start )) s"
exit $status
