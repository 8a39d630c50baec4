// Package framework is Kip's end-to-end harness: it brings up one real
// control plane per test run (test/controlplane), hands tests clients with
// admin and node identities, creates namespaces, waits for pods and
// conditions with timeouts, and when a test fails dumps the namespace's
// events, the pods' states and the control plane's logs into the test
// output.
//
// It also starts what a node needs (StartCells, StartKip), a real kubelet
// node for the cluster's own add-ons (InfraNode, test/kubeletnode), and
// the add-ons, which run there as in any cluster: DeployDNS builds CoreDNS
// (cached), pushes it to the cells' registry, applies
// deploy/coredns/coredns.yaml and waits for its pod, DeployMetricsServer
// does the same for metrics-server; a Placement moves either to a given
// node (CellDNS: a second CoreDNS in a cell of a Kip node). ClusterDNS
// says whether the run and make demo deploy the cluster DNS
// ($KIP_E2E_CLUSTER_DNS).
//
// kip's admin server answers /metrics and /cells only to tokens the
// cluster authorizes: each Kip carries a token of the ServiceAccount
// AdminReader, bound to deploy/rbac's reader ClusterRoles (AdminToken;
// AdminGet sends it), and ServiceAccountToken makes others.
//
// Its files, by what they do: framework.go (the control plane, clients,
// namespaces, Poll), pods.go (CreatePod, the one way a test creates a
// pod, and WaitForPods), build.go (kip, kip-cell, the plugins),
// cells.go (containerd, the registry, the cells' bridges), kip.go
// (KipOptions, StartKip), kipconfig.go (kip.yaml: a struct marshalled,
// and the e2e runs' settings), sims.go (the plugins and their clouds'
// simulators), ready.go (waiting for kip to start), process.go (the kip
// process: Kill, Restart, Signal, Stop), logs.go (log tails, logs kept
// with KIP_E2E_KEEP_LOGS), lightcells.go, rbac.go (deploy/rbac for a
// node), election.go, bootstrap.go and admin.go (kip's identities and
// tokens), dump.go (a failed test's dump), and the add-ons (dns.go,
// metrics.go, render.go, infra.go).
//
// It imports client-go and Kip's test packages (test/controlplane,
// test/kubeletnode, test/images, test/registry, test/containerdtest, the
// EC2 simulator);
// tests under test/e2e use it from TestMain, and make demo's kip-demo.
package framework
