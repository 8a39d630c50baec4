// Package troubleshooting keeps docs/troubleshooting.md equal to the
// reasons kip emits. Scan reads kip's Go source with go/parser and lists
// every event reason and status reason it can emit: the Reason constants,
// and the string literals that reach a reason argument of an event (a
// recorder's Event or Eventf, the cell agent's emit) or a Reason field of
// a pod, container or node status. Its test adds the reasons of the
// modules kip runs that post events on its pods (virtual-kubelet's pod
// controller), and fails when the page has no heading for one of them,
// or a heading for one nothing emits.
//
// It imports only the standard library.
package troubleshooting
