// Package framework is Kip's end-to-end harness: it brings up one real
// control plane per test run (test/controlplane), hands tests clients with
// admin and node identities, creates namespaces, waits for pods and
// conditions with timeouts, and when a test fails dumps the namespace's
// events, the pods' states and the control plane's logs into the test
// output.
//
// It imports client-go and test/controlplane; tests under test/e2e use it
// from TestMain.
package framework
