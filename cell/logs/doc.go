// Package logs keeps the cell's container logs: one file per container
// attempt, written in the kubelet's CRI log format, and read back with the
// options of `kubectl logs` (tail, follow, since, timestamps, limit).
//
// File layout, under the agent's state directory:
//
//	logs/<container>/<restart count>.log
//
// Each line is
//
//	<RFC3339Nano time> <stdout|stderr> <F|P> <content>
//
// F ends a line, P is a partial line (a line longer than MaxLineSize, or
// output that ended without a newline). Files of a container's current and
// previous attempts are kept; Store.Create removes older ones.
// Store.Append opens an attempt's file again at its end, for an agent that
// took the attempt over from an earlier one.
//
// It imports only the standard library.
package logs
