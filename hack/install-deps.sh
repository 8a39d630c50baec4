#!/usr/bin/env bash
# Installs the Debian packages Kip's build, tests and demo need, only those
# missing, so a second run costs nothing.
#   protobuf-compiler  protoc, for make generate / make verify
#   iproute2           ip, for the local plugin's network namespaces
set -euo pipefail

packages=(protobuf-compiler iproute2)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
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
echo "installing Debian packages: ${missing[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
