// Package pod runs one pod on a cell with the kubelet's semantics, over a
// runtime.Runtime.
//
// A Manager is level-triggered on the desired pod: Apply hands it the whole
// pod with a generation, and it converges to the highest generation it has
// seen (older ones are ignored). On the first Apply it starts the pod:
//
//   - images are pulled per container with the pod's registry credentials;
//     a failure shows as Waiting ErrImagePull with the registry's message,
//     then ImagePullBackOff while it waits to retry (exponential back-off);
//   - init containers run one after the other, each until it succeeds
//     (restarted with back-off, or failing the pod under restartPolicy
//     Never);
//   - then the app containers run side by side, each restarted per
//     restartPolicy (Always, OnFailure, Never) with the kubelet's back-off:
//     Backoff.Initial (10s) doubling up to Backoff.Max (5m), reset once a
//     run lasted Backoff.Reset (10m); while it waits the container is
//     Waiting CrashLoopBackOff with its last state Terminated;
//   - a later generation that changes a container's image restarts that
//     container with the new image.
//
// Status is the core/v1 PodStatus the kubelet would report: phase, the
// Initialized, ContainersReady and Ready conditions (PodScheduled is the
// host's), container statuses with state, last state, restart count, ready,
// started, image, imageID and containerID ("containerd://<id>"), podIP(s),
// hostIP(s) and startTime. Watchers are told of every change.
//
// Delete stops every container with its stop signal (the image's
// StopSignal, else SIGTERM), sends SIGKILL to those still running after the
// grace period, and then removes everything from the runtime; the pod ends
// Succeeded if every container exited 0, Failed otherwise.
//
// Not yet: probes (startup, liveness, readiness — a container is ready as
// soon as it runs; the worker loop is where a prober would hook in),
// lifecycle hooks, sidecar init containers (restartPolicy Always), volumes,
// securityContext, a TTY or stdin for the main process, and
// activeDeadlineSeconds.
//
// It imports cell/runtime, cell/logs, k8s.io/api and the standard library.
package pod
