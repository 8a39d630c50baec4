// Package controlplane builds and runs a real Kubernetes control plane on
// loopback, without Docker: etcd, kube-apiserver, kube-scheduler and
// kube-controller-manager (and kubectl) are built from source through the
// Go module proxy into a per-version cache directory, then started as
// processes with a generated PKI into a state directory.
//
// The kip-cluster command (make cluster-up, cluster-down, cluster-env) and
// the end-to-end harness in test/e2e both use it. The API server runs with
// the Node authorizer and the NodeRestriction admission plugin, and every
// virtual node gets a system:node:<name> kubeconfig, so kip runs with a real
// node identity rather than as an administrator.
//
// It imports only the standard library and test/modbuild, which holds the
// steps of a build from the module proxy that test/images shares; it never
// imports host or cell.
package controlplane
