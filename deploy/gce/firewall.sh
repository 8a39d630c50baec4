#!/bin/sh
# The firewall rule kip's cells need on Compute Engine: the agent's port,
# TCP 6421 (mutual TLS), from kip's address only, to the instances that
# carry the cells' network tag (the plugin's networkTags). Run it once per
# VPC network with the Google Cloud CLI, authorized to create firewall
# rules in the project (roles/compute.securityAdmin):
#
#   PROJECT=my-project NETWORK=kip KIP_ADDRESS=10.10.0.2 deploy/gce/firewall.sh
#
# KIP_ADDRESS is the address kip dials the cells from: the private address
# of kip's VM in the same VPC (or the range of a peered network or of a
# GKE cluster's pods where kip runs, as 10.4.0.0/14). CELL_TAG defaults to
# kip-cell; list the same tag in the plugin's networkTags. DRY_RUN=1 prints
# the command instead of running it.
#
# VPC networks allow all egress by default; cells need it for the image
# registry, kip-cell's download (unless baked) and the API server. The
# default network's other ingress rules (default-allow-ssh, -rdp, -icmp,
# -internal) also reach cells: use a network of your own for them, or
# remove those rules (deploy/gce/README.md, "Network").
set -eu
: "${PROJECT:?set PROJECT to the project of the cells}"
: "${NETWORK:?set NETWORK to the cells network (the plugin's network)}"
: "${KIP_ADDRESS:?set KIP_ADDRESS to the address or range kip dials the cells from}"
CELL_TAG=${CELL_TAG:-kip-cell}
RULE=${RULE:-kip-agent-from-host}

case "$KIP_ADDRESS" in
*/*) source=$KIP_ADDRESS ;;
*) source=$KIP_ADDRESS/32 ;;
esac

run() {
  if [ "${DRY_RUN:-0}" = 1 ]; then
    echo "$@"
  else
    "$@"
  fi
}

run gcloud compute firewall-rules create "$RULE" \
  --project "$PROJECT" \
  --network "$NETWORK" \
  --direction INGRESS \
  --action ALLOW \
  --rules tcp:6421 \
  --source-ranges "$source" \
  --target-tags "$CELL_TAG" \
  --priority 1000 \
  --description "kip: the cells' agent (TCP 6421, mutual TLS) from kip only"
