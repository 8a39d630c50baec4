#!/usr/bin/env bash
# make demo: what Kip can show today. The control plane (issue 3) and the kip
# daemon (issue 4) come next; until then the demo shows the plugin system.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; "$@"; }

step bin/kip version
step bin/kip plugins list --plugin-dir bin
step bin/kip-plugin-local describe
step bin/kip plugins verify local --config deploy/examples/kip-local.yaml --plugin-dir bin

cat <<'MSG'

The plugin host works: kip found kip-plugin-local, handshook with it over
gRPC (go-plugin, AutoMTLS), and the plugin accepted its configuration.
Not yet here: the local Kubernetes control plane and the kip daemon (the
virtual node). When they land, `make demo` starts them and runs
deploy/examples/hello.yaml with each pod in its own cell.
MSG
