#!/bin/sh
# Kip cell boot recipe for Compute Engine: Debian 12 images (project
# debian-cloud, families debian-12 and debian-12-arm64), or an image with
# kip-cell baked in.
#
# kip-plugin-gce sends this file (plugin config key startupScript) as every
# cell's metadata item startup-script, beside the cell's bootstrap in the
# metadata item kip-bootstrap. Google's guest agent runs it as root at
# every boot. Run without arguments (the startup script), it installs
# containerd, runc and iptables from Debian unless the image has them,
# saves itself as /usr/local/lib/kip/start-cell and starts kip-cell.service,
# which runs `start-cell start`: that saves the bootstrap and the cell's
# address from the metadata server, closes the metadata server to pods,
# downloads kip-cell and checks its SHA-256 (unless the image has
# /usr/local/bin/kip-cell), and runs `kip-cell --bootstrap`, which joins
# with the instance's identity token from the metadata server.
#
# Edit the settings below, or leave them and set the metadata items named
# beside them (the plugin's configuration can, see deploy/gce/README.md):
# KIP_CELL_URL must point at a kip-cell binary the cells can download (a
# release asset, a Cloud Storage object, an internal mirror) and the sums
# must be those of `make dist`'s SHA256SUMS: an agent whose sum is missing
# or wrong is refused, and the cell never answers (kip ends it at its boot
# deadline; the reason is on the instance's serial console). GCE allows 256
# KiB per metadata value; this file is far below it.
#
# The pod's network: the plugin gives the instance's network interface an
# alias IP range of one address, the pod's, and kip-cell gives it to a
# network namespace of the pod's own behind a veth (cell/podnet). Google's
# guest agent would make every alias IP a local address of the instance (a
# route in the local table), again at each metadata change, and the pod's
# traffic would end on the instance instead of reaching the pod:
# keep_alias_ip tells it to leave them alone, and kip-cell takes back what
# it did before that.
#
# The metadata server: on GCE it hands out the cell's service-account
# tokens to whoever asks from the instance, and kip-bootstrap is readable
# there. kip-cell drops a pod's traffic to it in FORWARD when the pod is in
# its own namespace. A pod in the instance's namespace (hostNetwork, where
# the operator allows it, or an instance launched without an alias IP)
# shares this machine's network: its requests leave through the OUTPUT
# chain. The rule below therefore drops, in OUTPUT, traffic to
# 169.254.169.254 (metadata.google.internal) from every process outside
# systemd's system.slice: the pod's containers live in containerd's cgroups
# (/kip-<cell ID>/...), while kip-cell, Google's guest agent and the other
# services keep the metadata server.
set -eu

# ---- settings ----
# Where kip-cell is downloaded from; {arch} becomes amd64 or arm64.
# Metadata item kip-cell-url overrides it.
KIP_CELL_URL=https://github.com/kipcell/kip/releases/download/v0.1.0/kip-cell-linux-{arch}
# The binary's SHA-256 per architecture (dist/SHA256SUMS of `make dist`).
# Metadata item kip-cell-sha256 (the sum for the instance's architecture)
# overrides both. Required: an agent without its sum, or with another, is
# refused. Not used when the image has kip-cell baked in.
KIP_CELL_SHA256_AMD64=
KIP_CELL_SHA256_ARM64=
KIP_CELL_SHA256=
# Pods cannot reach the metadata server (the agent can). Set 1 to let them,
# for pods that take the cell's service-account credentials from it; they
# can then read kip-bootstrap too, whose join token no longer works after
# the join.
KIP_POD_METADATA=0

metadata=http://metadata.google.internal/computeMetadata/v1

# fail says why on the serial console too (kip shows the console output of
# a cell that never answers), and waits: another download a second later
# would not make a wrong sum right.
fail() {
  echo "kip-cell boot: $*" >&2
  echo "kip-cell boot: $*" >/dev/console 2>/dev/null || true
  sleep 60
  exit 1
}

# md prints the metadata value at path (instance/attributes/kip-bootstrap).
md() {
  curl -fsS --retry 10 --retry-connrefused -H 'Metadata-Flavor: Google' "$metadata/$1"
}

# attribute prints the instance's metadata item key, or nothing when the
# instance has no such item.
attribute() {
  if md instance/attributes/ | grep -qx "$1"; then
    md "instance/attributes/$1"
  fi
}

# install_cell installs what the cell needs and starts kip-cell.service.
# Safe to run at every boot.
install_cell() {
  if ! command -v containerd >/dev/null || ! command -v runc >/dev/null || ! command -v iptables >/dev/null; then
    echo "kip-cell boot: installing containerd, runc and iptables"
    apt-get update -q
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q containerd runc iptables curl ca-certificates
  fi
  mkdir -p /usr/local/lib/kip
  md instance/attributes/startup-script >/usr/local/lib/kip/start-cell.tmp
  chmod 0755 /usr/local/lib/kip/start-cell.tmp
  mv /usr/local/lib/kip/start-cell.tmp /usr/local/lib/kip/start-cell
  cat >/etc/systemd/system/kip-cell.service <<'UNIT'
[Unit]
Description=Kip cell agent
Wants=network-online.target
After=network-online.target containerd.service
Requires=containerd.service
# Never give up restarting the agent: while it is down, the pod's
# containers run on and nobody reports them.
StartLimitIntervalSec=0

[Service]
ExecStart=/usr/local/lib/kip/start-cell start
# However it ended (kill -9, a crash, an exit), the agent is started again
# and takes over the running pod from its state directory
# (/var/lib/kip-cell/<cell ID>). KillMode=process: stopping the unit
# signals the agent only (it stops the pod itself on SIGTERM).
Restart=always
RestartSec=1
KillMode=process
# Below any container (-997 at least), so that the kernel's OOM killer
# takes the pod's processes first (docs/plugins.md, "The agent's memory
# and the pod's"); the agent sets it itself too, once it runs.
OOMScoreAdjust=-998

[Install]
WantedBy=multi-user.target
UNIT
  systemctl daemon-reload
  echo "kip-cell boot: starting kip-cell.service"
  systemctl enable --now --no-block kip-cell.service
}

# save_bootstrap saves the bootstrap and the cell's address from the
# metadata server under /run/kip (0600), once per boot.
save_bootstrap() {
  umask 077
  mkdir -p /run/kip
  if [ ! -s /run/kip/bootstrap.json ] || [ ! -s /run/kip/address ]; then
    attribute kip-bootstrap >/run/kip/bootstrap.json.tmp
    [ -s /run/kip/bootstrap.json.tmp ] || fail "the instance has no metadata item kip-bootstrap"
    mv /run/kip/bootstrap.json.tmp /run/kip/bootstrap.json
    md instance/network-interfaces/0/ip >/run/kip/address.tmp && mv /run/kip/address.tmp /run/kip/address
  fi
}

# close_metadata drops pods' traffic to the metadata server (see the top of
# this file): OUTPUT, not FORWARD, and everything outside system.slice
# (cgroup v2, Debian 12's default).
close_metadata() {
  pods="-d 169.254.169.254 -m cgroup ! --path system.slice -j DROP"
  if [ "${KIP_POD_METADATA:-0}" != 1 ] && ! iptables -C OUTPUT $pods 2>/dev/null; then
    iptables -I OUTPUT $pods || fail "cannot close the metadata server to pods (iptables -I OUTPUT $pods)"
  fi
}

# keep_alias_ip tells Google's guest agent not to make the instance's alias
# IP ranges local addresses (see the top of this file), and restarts it
# once so that it reads that.
keep_alias_ip() {
  cfg=/etc/default/instance_configs.cfg
  if ! grep -qx 'ip_aliases = false' "$cfg" 2>/dev/null; then
    printf '\n[IpForwarding]\nip_aliases = false\n' >>"$cfg"
    systemctl try-restart google-guest-agent.service || echo "kip-cell boot: could not restart google-guest-agent; the pod's alias IP may stay a local address until it restarts" >&2
  fi
}

# download_agent fetches kip-cell and checks its SHA-256, unless the image
# has it.
download_agent() {
  if [ -x /usr/local/bin/kip-cell ]; then
    return 0
  fi
  sum=$KIP_CELL_SHA256
  if [ -z "$sum" ]; then
    case "$arch" in amd64) sum=$KIP_CELL_SHA256_AMD64 ;; arm64) sum=$KIP_CELL_SHA256_ARM64 ;; esac
  fi
  echo "$sum" | grep -Eqx '[0-9a-f]{64}' ||
    fail "no SHA-256 for kip-cell on $arch (metadata item kip-cell-sha256, or KIP_CELL_SHA256_$(echo "$arch" | tr a-z A-Z) in the startup script); refusing an unchecked agent"
  url=$(echo "$KIP_CELL_URL" | sed "s/{arch}/$arch/g")
  curl -fsSL --retry 10 --retry-connrefused -o /usr/local/bin/kip-cell.download "$url" ||
    fail "cannot download kip-cell from $url"
  if ! echo "$sum  /usr/local/bin/kip-cell.download" | sha256sum -c --status -; then
    rm -f /usr/local/bin/kip-cell.download
    fail "kip-cell from $url does not have the SHA-256 $sum; refusing it"
  fi
  chmod 0755 /usr/local/bin/kip-cell.download
  mv /usr/local/bin/kip-cell.download /usr/local/bin/kip-cell
}

# start_cell runs the agent: kip-cell.service's ExecStart. Safe to run
# again (the service restarts it): what is saved is not fetched twice.
start_cell() {
  arch=$(dpkg --print-architecture)
  v=$(attribute kip-cell-url)
  [ -z "$v" ] || KIP_CELL_URL=$v
  v=$(attribute kip-cell-sha256)
  [ -z "$v" ] || KIP_CELL_SHA256=$v
  save_bootstrap
  close_metadata
  keep_alias_ip
  download_agent
  # --imds-endpoint none: the agent reads no EC2 instance metadata (EC2's
  # spot notices are its use of it); GCE's preemptions and maintenance
  # reach kip through the plugin's WatchEvents. --gce-metadata-endpoint:
  # the agent joins with the instance's identity token from the metadata
  # server, which kip-plugin-gce checks (the instance needs a service
  # account, the plugin's serviceAccount; kip-cell runs in system.slice,
  # which close_metadata leaves the metadata server to).
  # The agent's firewall for a pod in its own namespace follows the same
  # setting as close_metadata.
  export KIP_CELL_POD_METADATA="${KIP_POD_METADATA:-0}"
  exec /usr/local/bin/kip-cell \
    --bootstrap /run/kip/bootstrap.json \
    --pod-ip "$(cat /run/kip/address)" \
    --containerd-address /run/containerd/containerd.sock \
    --imds-endpoint none \
    --gce-metadata-endpoint http://metadata.google.internal
}

case "${1:-install}" in
install) install_cell ;;
start) start_cell ;;
*) fail "usage: $0 [install|start]" ;;
esac
