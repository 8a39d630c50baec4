#!/usr/bin/env bash
# make demo: a local control plane, kip with the local plugin, and
# deploy/examples/hello.yaml with each pod in its own cell.
#   hack/demo.sh up     start everything (make demo)
#   hack/demo.sh down   stop everything (make demo-down)
# The screen gets one line per phase (== …) and per step, with a line for
# each build from source a first run makes and about how long it takes;
# the Go tool's own output goes to the logs. The demo's state and logs live
# in $CLUSTER_STATE/demo: build.log (make build-demo), cluster.log (kip-cluster
# up: the control plane's build and start), resolve.log (the add-ons'
# modules, downloaded beside it), demo.log (kip-demo: the kubelet
# node's, CoreDNS's and metrics-server's builds, kip's start), progress
# (kip-demo's steps, shown on the screen), times (each run's phases and
# steps, timed), kip/ (kip.yaml, kip.log, the cells), containerd/, and
# cells.json (the registry's address, kept so that every run deploys the
# same workload). $KIP_DEMO_FLAGS passes more options to kip-demo
# (--insecure-registry HOST:PORT|:PORT, --untainted: see its doc comment),
# $KIP_CLUSTER_FLAGS more to kip-cluster up (--apiserver-arg FLAG).
set -euo pipefail
cd "$(dirname "$0")/.."
state=${CLUSTER_STATE:?CLUSTER_STATE is set by make}
demo=$state/demo
mkdir -p "$demo"

# $demo/times gets, for each make demo, a line per phase and step with
# the seconds since it started (issue 32: where a run's time goes);
# kip-demo's own steps, timed the same way, are in demo.log.
usec() { local t=${EPOCHREALTIME//[!0-9]/}; echo $((10#$t)); }
started=$(usec)
timed() { local d=$((($(usec) - started) / 100000)); printf '%5d.%ds %s\n' $((d / 10)) $((d % 10)) "$*" >> "$demo/times"; }
step() { timed "\$ $*"; printf '\n\033[1m$ %s\033[0m\n' "$*"; "$@"; }
phase() { timed "== $*"; printf '\033[1m== %s\033[0m\n' "$*"; }

down() {
  if [ -f "$demo/pid" ] && kill -0 "$(cat "$demo/pid")" 2>/dev/null; then
    echo "stopping the demo (deleting the workload, then kip, its cells, containerd and the registry)"
    kill -TERM "$(cat "$demo/pid")"
    for _ in $(seq 1 120); do kill -0 "$(cat "$demo/pid")" 2>/dev/null || break; sleep 0.5; done
  fi
  rm -f "$demo/pid" "$demo/ready"
  bin/kip-cluster --state "$state" down
}

case "${1:-up}" in
  down) down; exit 0 ;;
  up) ;;
  *) echo "usage: $0 up|down" >&2; exit 2 ;;
esac

echo "# make demo, $(date -u +%Y-%m-%dT%H:%M:%SZ)" >> "$demo/times"
if [ "$(id -u)" -ne 0 ]; then
  echo "make demo runs containers (containerd, runc, network namespaces): run it as root" >&2
  exit 1
fi
if [ -f "$demo/pid" ] && kill -0 "$(cat "$demo/pid")" 2>/dev/null; then
  echo "the demo is already running (make demo-down stops it)"
else
  # make build-demo: what the demo runs, no cloud plugin. The first run
  # downloads kip's modules and compiles them: about 455 CPU seconds of
  # compile on an empty build cache (docs/benchmarks.md, make demo), so
  # about 4 to 5 minutes on two cores with the downloads; a second run
  # takes seconds.
  phase "building kip's binaries (make build-demo): about 5 minutes the first time, seconds after; Go's output: $demo/build.log"
  make -s build-demo > "$demo/build.log" 2>&1 ||
    { echo "make build-demo failed; the end of $demo/build.log:" >&2; tail -20 "$demo/build.log" >&2; exit 1; }
  # kip-demo --resolve downloads the Go modules of what kip-demo builds
  # (CoreDNS, metrics-server, the kubelet node) in the background while
  # kip-cluster up builds the control plane, so that a first run's
  # downloads wait on the network beside the compiler and kip-demo's
  # builds only compile; warm, it returns at once. Its own process group,
  # ended with the script, go commands and all.
  setsid bin/kip-demo --resolve > "$demo/resolve.log" 2>&1 < /dev/null &
  resolver=$!
  trap 'kill -- -"$resolver" 2>/dev/null || true' EXIT
  # kip-cluster prints a line for each cold build, with how long it takes
  # (test/controlplane/build.go: about 7 minutes for the control plane, the
  # time issue 32 measured), and the control plane up.
  phase "starting the control plane (kip-cluster up); its log: $demo/cluster.log"
  : > "$demo/cluster.log"
  # KIP_CLUSTER_FLAGS: more kip-cluster up options (--apiserver-arg FLAG).
  # shellcheck disable=SC2086
  bin/kip-cluster --state "$state" up --log "$demo/cluster.log" ${KIP_CLUSTER_FLAGS:-} >/dev/null ||
    { echo "the control plane did not start; the end of $demo/cluster.log:" >&2; tail -20 "$demo/cluster.log" >&2; exit 1; }
  # What it did not download, kip-demo's builds download themselves.
  if kill -0 "$resolver" 2>/dev/null; then
    echo "  still downloading the Go modules of CoreDNS, metrics-server and the kubelet, once; its log: $demo/resolve.log"
  fi
  wait "$resolver" || echo "kip-demo --resolve failed (kip-demo's builds resolve again); its log: $demo/resolve.log" >&2
  trap - EXIT
  rm -f "$demo/ready"
  phase "starting the demo (kip-demo); its log: $demo/demo.log"
  : > "$demo/progress"
  # KIP_DEMO_FLAGS: more kip-demo options (--insecure-registry, --untainted),
  # e.g. for the conformance suite (docs/conformance.md). kip-demo prints
  # its steps on stdout (shown below as they come), its log on stderr.
  # shellcheck disable=SC2086
  setsid bin/kip-demo --state "$state" --dir "$demo" --bin bin --ready "$demo/ready" ${KIP_DEMO_FLAGS:-} > "$demo/progress" 2> "$demo/demo.log" < /dev/null &
  echo $! > "$demo/pid"
  # relay shows the steps kip-demo printed since the last call.
  shown=0
  relay() {
    local n
    n=$(wc -l < "$demo/progress")
    if [ "$n" -gt "$shown" ]; then sed -n "$((shown + 1)),${n}s/^/  /p" "$demo/progress"; shown=$n; fi
  }
  # Up to 12 minutes: the first run builds the kubelet node (about a
  # minute after the control plane's build), CoreDNS (about 3 minutes)
  # and metrics-server (about 2 to 4) from source: the cold times
  # test/controlplane/build.go and test/images give, which kip-demo's
  # steps print.
  for _ in $(seq 1 1440); do
    relay
    [ -f "$demo/ready" ] && break
    kill -0 "$(cat "$demo/pid")" 2>/dev/null || { relay; echo "the demo failed to start; the end of its log, $demo/demo.log:" >&2; tail -30 "$demo/demo.log" >&2; down >/dev/null 2>&1; exit 1; }
    sleep 0.5
  done
  relay
  [ -f "$demo/ready" ] || { echo "the demo did not start in 12 minutes; its log: $demo/demo.log" >&2; exit 1; }
fi

eval "$(bin/kip-cluster --state "$state" env)"
echo
phase "what Kip runs, as kubectl shows it"
step kubectl get nodes -o wide   # kip: the Kip node; kip-infra: a kubelet node for the add-ons
# Wait for what the user cares about: each Deployment rolled out, all its
# pods of the current template Running and Ready on node kip.
step kubectl rollout status deployment/hello --timeout=180s
step kubectl rollout status deployment/hello-big --timeout=180s
step kubectl get pods -o wide
step kubectl get pods -o 'custom-columns=POD:.metadata.name,CPU:.spec.containers[0].resources.requests.cpu,INSTANCE TYPE:.metadata.annotations.cell\.kipcell\.io/instance-type,$/HOUR:.metadata.annotations.cell\.kipcell\.io/hourly-price'
# A Running pod of the Deployment that is not being deleted.
pod=$(kubectl get pods -l app=hello --field-selector=status.phase=Running \
  -o go-template='{{range .items}}{{if not .metadata.deletionTimestamp}}{{.metadata.name}}{{"\n"}}{{end}}{{end}}' | sed -n 1p)
[ -n "$pod" ] || { echo "no Running hello pod: see kubectl get pods and $demo/kip/kip.log" >&2; exit 1; }
step kubectl logs --tail=2 "$pod"
step kubectl exec "$pod" -- hostname

# The cluster DNS, when kip-demo deployed it (KIP_E2E_CLUSTER_DNS): CoreDNS
# on the kubelet node kip-infra, and a pod in a cell calling the hello
# Service by its name.
dns=
if kubectl -n kube-system get deployment coredns >/dev/null 2>&1; then
  dns=1
  step kubectl -n kube-system rollout status deployment/coredns --timeout=180s
  step kubectl -n kube-system get pods,services -l k8s-app=kube-dns -o wide
  big=$(kubectl get pods -l app=hello-big --field-selector=status.phase=Running \
    -o go-template='{{range .items}}{{if not .metadata.deletionTimestamp}}{{.metadata.name}}{{"\n"}}{{end}}{{end}}' | sed -n 1p)
  [ -n "$big" ] || { echo "no Running hello-big pod: see kubectl get pods and $demo/kip/kip.log" >&2; exit 1; }
  # /app -get is the hello program as a client (Go's resolver reads the
  # pod's /etc/resolv.conf: its search path makes "hello" the Service).
  step kubectl exec "$big" -- /app -get http://hello
fi

# Persistent volumes (issue 31): the StatefulSet notes, each pod with a
# 1Gi disk of class kip-local that kip-local-provisioner (started by
# kip-demo) makes in the local plugin's state directory. A pod appends a
# line to its disk at start; the replacement of a deleted pod, in a new
# cell, finds the line of the pod before it. kip-demo applies it with the
# workload (so that its pods start while the steps above run) when kip
# attaches the local plugin's disks, which kip says as a kubelet says it
# of a CSI driver: the Kip node's CSINode lists the driver.
volumes=
if kubectl get statefulset notes >/dev/null 2>&1; then
  volumes=1
  step kubectl rollout status statefulset/notes --timeout=300s
  step kubectl get pvc -l app=notes
  step kubectl logs notes-0
  old=$(kubectl get pod notes-0 -o jsonpath='{.metadata.uid}')
  step kubectl delete pod notes-0 --wait=true
  # The StatefulSet makes notes-0 again: a new pod (a new UID), in a new
  # cell, with the same claim.
  for _ in $(seq 1 120); do
    uid=$(kubectl get pod notes-0 -o jsonpath='{.metadata.uid}' 2>/dev/null || true)
    [ -n "$uid" ] && [ "$uid" != "$old" ] && break
    sleep 0.5
  done
  step kubectl wait pod/notes-0 --for=condition=Ready --timeout=300s
  step kubectl logs notes-0   # the lines of the pods before it, then its own
  kubectl exec notes-0 -- grep -q "pod $old" /data/log.txt ||
    { echo "notes-0's disk does not hold the line of the pod it replaced ($old): see $demo/kip/kip.log" >&2; exit 1; }
else
  echo
  echo "skipping the persistent volume steps: kip does not report volume support yet (CSINode kip lists no driver local.csi.kipcell.io; see $demo/demo.log)"
fi

# metrics-server on the kubelet node scrapes the Kip node's kubelet API:
# kubectl top has the pods once it has scraped them twice (15 s apart).
step kubectl wait apiservice/v1beta1.metrics.k8s.io --for=condition=Available --timeout=180s
for _ in $(seq 1 45); do
  kubectl top pod --no-headers 2>/dev/null | grep -q . && break
  sleep 2
done
step kubectl top pod

echo
phase "the demo runs"
cat <<MSG
Each pod above runs in its own cell: a kip-cell agent in its own network
namespace, with the pod IP shown, driving containerd, on the cheapest local
instance type that fits it (hello-big asks for more CPU, so it got a bigger
one). Try:
  eval "\$(make -s cluster-env)"
  kubectl scale deployment hello --replicas=5
  kubectl get events --field-selector reason=CellRunning
  kubectl top pod                  # metrics-server, from each cell's cgroups
Logs: kip $demo/kip/kip.log, demo $demo/demo.log, provisioner $demo/provisioner.log,
control plane $demo/cluster.log, build $demo/build.log
MSG
if [ -n "$volumes" ]; then
  cat <<MSG
notes-0 and notes-1 each keep a disk of class kip-local (a file under
$demo/kip/local/volumes, a loop device in the pod's cell): delete a pod
and its replacement, in a new cell, reads what the pods before it wrote:
  kubectl delete pod notes-1 && kubectl wait pod/notes-1 --for=condition=Ready && kubectl logs notes-1
  kubectl get pvc,pv
MSG
fi
if [ -n "$dns" ]; then
  cat <<MSG
The cluster DNS is CoreDNS (deploy/coredns/coredns.yaml) on the kubelet
node kip-infra, as in any cluster, behind the kube-dns Service; every pod's
/etc/resolv.conf names it, and every cell leads ClusterIPs to their pods:
  kubectl exec $big -- cat /etc/resolv.conf
  kubectl exec $big -- /app -n 4 -get http://hello   # answers from the hello pods
  kubectl exec $big -- /app -api /api/v1/namespaces/default/pods/$big   # the pod's own token: 403 until RBAC allows it
MSG
fi
echo
phase "stop everything: make demo-down"
