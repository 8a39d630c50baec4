#!/usr/bin/env bash
# make demo: a local control plane, kip with the local plugin, a sample
# workload. The kip daemon (the virtual node) is not written yet: until it
# is, the demo stops after the control plane and the plugin checks, and
# says so.
set -euo pipefail
cd "$(dirname "$0")/.."
state=${CLUSTER_STATE:?CLUSTER_STATE is set by make demo}

step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; "$@"; }

step bin/kip version
step bin/kip plugins list
step bin/kip plugins verify local --config deploy/examples/kip-local.yaml

printf '\n\033[1m$ bin/kip-cluster up\033[0m   (the first run builds Kubernetes from source: about 9 minutes)\n'
eval "$(bin/kip-cluster --state "$state" up)"
step kubectl get namespaces
step kubectl get nodes

cat <<MSG

The control plane is up (state in $state):
  eval "\$(make -s cluster-env)"   # KUBECONFIG and a matching kubectl for your shell
  make demo-down                   # stop it

Not yet here: the kip daemon, which registers the virtual node "kip" and runs
each pod in its own cell. When it lands, make demo starts it with the local
plugin and applies deploy/examples/hello.yaml.
MSG
