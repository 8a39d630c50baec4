// Package troubleshooting keeps docs/troubleshooting.md equal to the
// reasons kip emits. Scan reads kip's Go source with go/parser and lists
// every event reason and status reason it can emit: the Reason constants,
// and the string literals that reach a reason argument of an event (a
// recorder's Event or Eventf, the cell agent's emit) or a Reason field of
// a pod, container or node status. Its test fails when the page has no
// heading for one of them, or a heading for one the code no longer emits.
//
// It imports only the standard library.
package troubleshooting
