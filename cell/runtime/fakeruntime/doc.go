// Package fakeruntime is a container runtime without containers: a
// runtime.Runtime whose containers "run" as a few bytes of memory and no
// process, so that a light cell (test/lightcell: the real agent, pod
// logic and cell protocol over this runtime) costs little enough for a
// thousand of them to run on one machine.
//
// What it does, by rule, so that tests can see each outcome:
//
//   - EnsureImage pulls nothing: it answers the image after
//     Config.PullDelay (an image ID derived from the reference), and
//     refuses with ErrImageNeverPull an image not ensured before under
//     pull policy Never.
//   - Start writes the container's argv as one line to its stdout, then
//     the container runs until it is signalled or deleted, unless its
//     command says otherwise: ["exit", "N"] ends at once with code N;
//     ["sleep", "S"] ends with code 0 after S seconds (a decimal). The
//     command's first word is matched by its base name (/bin/sleep is
//     sleep).
//   - Signal ends a running container as a process with the default
//     handlers would: 128 plus the signal's number (137 for SIGKILL);
//     signal 0 does nothing.
//   - Exec writes its argv as one line to its stdout, then copies its
//     stdin there until it ends; it exits 0, or N for ["exit", "N"].
//   - Metrics are small and plausible: a millicore of CPU time since
//     the start, 4 MiB of memory in use, one process, and the
//     container's memory limit.
//   - Reattach finds only a container this runtime started (a new agent
//     in the same process); any other is ErrNotFound, since nothing
//     outlives the process that holds it.
//   - MountImage makes its target a directory holding one file,
//     ImageFile, with the image's reference; UnmountImage removes it.
//   - Cleanup ends every container and forgets every image.
//
// It imports cell/runtime and the standard library.
package fakeruntime
