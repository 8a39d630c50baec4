// Package logs keeps the cell's container logs as a kubelet does: files per
// container attempt, written in the kubelet's CRI log format, rotated by
// size, and read back as streams with the options of `kubectl logs` (tail,
// follow, since, timestamps, limit).
//
// File layout, under the agent's state directory (on the cell's disk, never
// a tmpfs: a page of a tmpfs would count against the agent's memory):
//
//	logs/<container>/<restart count>.log               the current file
//	logs/<container>/<restart count>.log.rotated-<n>   rotated out of it, oldest n first
//
// Each line is a record:
//
//	<RFC3339Nano time> <stdout|stderr> <F|P> <content>
//
// F ends a line, P is a partial line: a line longer than MaxLineSize is
// split into records of at most MaxLineSize, and output that ended without
// a newline ends with a P record.
//
// Rotation (Rotation, the kubelet's containerLogMaxSize and
// containerLogMaxFiles; DefaultRotation is 10 MiB and 5 files) happens as
// the file is written: once the current file is past MaxSize it is renamed
// and a new one started, and the oldest rotated files beyond MaxFiles go.
// The files of a container's current and previous attempts are kept;
// Store.Create removes older ones. Store.Append opens an attempt's file
// again at its end, for an agent that took the attempt over from an
// earlier one.
//
// Memory does not grow with a log: a File holds at most one unfinished
// record per stream and one write's records, and Store.Read streams the
// files through fixed buffers, finding a tail by reading backwards from
// the end; a record longer than its buffer (a file not written here) is
// served in pieces. A follower reads on across rotations.
//
// It imports only the standard library.
package logs
