package pod

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// This file runs a container attempt's startup, liveness and readiness
// probes with the kubelet's rules (pkg/kubelet/prober/worker.go v1.36):
//
//   - without a startup probe a running container is started at once;
//     with one it is not started until the probe succeeds, and liveness and
//     readiness probes wait for that;
//   - a probe first runs initialDelaySeconds after the container started,
//     then every periodSeconds; a result counts once it repeated
//     successThreshold (failureThreshold) times in a row;
//   - readiness starts as failure: the container is Ready only after the
//     probe succeeded (without a readiness probe, as soon as it started);
//   - a liveness or startup failure kills the container ("Container x
//     failed liveness probe, will be restarted"), with the probe's
//     terminationGracePeriodSeconds when set, and the restart policy
//     decides what follows;
//   - every failed probe is a Warning Unhealthy event with the probe's
//     output; a probe that could not run is retried up to 3 times, then
//     counts as a failure ("probe errored"); a redirect to another host is
//     a success with a ProbeWarning event.

// probeKind is startup, liveness or readiness.
type probeKind int

const (
	startupProbe probeKind = iota
	livenessProbe
	readinessProbe
)

func (k probeKind) String() string {
	return [...]string{"Startup", "Liveness", "Readiness"}[k]
}

// maxProbeRetries is how often a probe that could not run is retried
// before it counts as failed.
const maxProbeRetries = 3

// killRequest is why the probes want the attempt stopped.
type killRequest struct {
	message string
	grace   time.Duration
}

// attemptProbes are the probes of one running attempt.
type attemptProbes struct {
	m       *Manager
	cs      *containerState
	t       target
	pod     *corev1.Pod
	since   time.Time     // when the container started
	started chan struct{} // closed once the container counts as started
	kill    chan killRequest
	once    sync.Once
}

// startProbes starts the attempt's probes; they run until ctx ends. The
// returned channel receives at most one request to kill the attempt. An
// attempt taken over from an earlier agent that had already started
// (alreadyStarted) is not probed for startup again, as the kubelet's
// prober keeps a started container started across its restarts; its
// readiness stays what it was until the readiness probe says otherwise.
func (m *Manager) startProbes(ctx context.Context, wg *sync.WaitGroup, cs *containerState, t target, pod *corev1.Pod, since time.Time, alreadyStarted bool) <-chan killRequest {
	a := &attemptProbes{m: m, cs: cs, t: t, pod: pod, since: since, started: make(chan struct{}), kill: make(chan killRequest, 1)}
	if t.c.StartupProbe == nil || alreadyStarted {
		close(a.started)
	}
	for kind, p := range map[probeKind]*corev1.Probe{startupProbe: t.c.StartupProbe, livenessProbe: t.c.LivenessProbe, readinessProbe: t.c.ReadinessProbe} {
		if p == nil || (kind == startupProbe && alreadyStarted) {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			a.run(ctx, kind, withProbeDefaults(p))
		}()
	}
	return a.kill
}

// withProbeDefaults fills what the API server defaults (a pod from a
// client that skipped defaulting still probes as the kubelet would).
func withProbeDefaults(p *corev1.Probe) *corev1.Probe {
	q := *p
	if q.TimeoutSeconds <= 0 {
		q.TimeoutSeconds = 1
	}
	if q.PeriodSeconds <= 0 {
		q.PeriodSeconds = 10
	}
	if q.SuccessThreshold <= 0 {
		q.SuccessThreshold = 1
	}
	if q.FailureThreshold <= 0 {
		q.FailureThreshold = 3
	}
	return &q
}

// run is one probe's worker.
func (a *attemptProbes) run(ctx context.Context, kind probeKind, p *corev1.Probe) {
	unit := a.m.probeUnit
	if kind != startupProbe {
		select {
		case <-a.started:
		case <-ctx.Done():
			return
		}
	}
	if !sleep(ctx, time.Until(a.since.Add(time.Duration(p.InitialDelaySeconds)*unit))) {
		return
	}
	last, run := probeUnknown, 0
	for {
		res := a.probeOnce(ctx, kind, p)
		if ctx.Err() != nil {
			return
		}
		if res == last {
			run++
		} else {
			last, run = res, 1
		}
		switch {
		case res == probeFailure && run >= int(p.FailureThreshold):
			if kind != readinessProbe {
				a.requestKill(kind, p)
				return
			}
			a.setReady(false)
		case res == probeSuccess && run >= int(p.SuccessThreshold):
			switch kind {
			case startupProbe:
				a.markStarted()
				return
			case readinessProbe:
				a.setReady(true)
			}
		}
		if !sleep(ctx, time.Duration(p.PeriodSeconds)*unit) {
			return
		}
	}
}

// probeOnce runs the probe (retrying one that could not run), records the
// kubelet's events, and returns success or failure.
func (a *attemptProbes) probeOnce(ctx context.Context, kind probeKind, p *corev1.Probe) probeResult {
	var (
		res    probeResult
		output string
		err    error
	)
	for range maxProbeRetries {
		res, output, err = runProbe(ctx, p, a.t, a.m.probeUnit)
		if err == nil || ctx.Err() != nil {
			break
		}
	}
	if ctx.Err() != nil {
		return probeUnknown
	}
	name := a.cs.name
	switch {
	case err != nil:
		a.m.log.InfoContext(ctx, "probe errored", "container", name, "probe", kind, "error", err)
		a.m.emit(EventWarning, "Unhealthy", name, "%s probe errored and resulted in %s state: %s", kind, res, err)
		return probeFailure
	case res == probeSuccess:
		return probeSuccess
	case res == probeWarning:
		a.m.emit(EventWarning, "ProbeWarning", name, "%s probe warning: %s", kind, output)
		return probeSuccess
	case res == probeFailure:
		a.m.log.InfoContext(ctx, "probe failed", "container", name, "probe", kind, "output", output)
		a.m.emit(EventWarning, "Unhealthy", name, "%s probe failed: %s", kind, output)
	}
	return probeFailure
}

// requestKill asks runAttempt to stop the container after a liveness or
// startup failure, with the kubelet's message and grace period.
func (a *attemptProbes) requestKill(kind probeKind, p *corev1.Probe) {
	msg := fmt.Sprintf("Container %s failed %s probe", a.cs.name, map[probeKind]string{livenessProbe: "liveness", startupProbe: "startup"}[kind])
	if a.pod.Spec.RestartPolicy != corev1.RestartPolicyNever {
		msg += ", will be restarted"
	}
	grace := podGrace(a.pod)
	if p.TerminationGracePeriodSeconds != nil {
		grace = time.Duration(*p.TerminationGracePeriodSeconds) * time.Second
	}
	a.once.Do(func() { a.kill <- killRequest{message: msg, grace: grace} })
}

// markStarted records a successful startup probe.
func (a *attemptProbes) markStarted() {
	a.m.update(func() {
		if a.cs.task != a.t.task {
			return
		}
		t := true
		a.cs.status.Started = &t
		a.cs.status.Ready = a.cs.readiness() && a.t.c.ReadinessProbe == nil
	})
	close(a.started)
}

// setReady records a readiness result that reached its threshold.
func (a *attemptProbes) setReady(ready bool) {
	a.m.mu.Lock()
	defer a.m.mu.Unlock()
	if a.cs.task != a.t.task || a.cs.status.Started == nil || !*a.cs.status.Started || a.cs.status.Ready == ready {
		return // nothing changed: no status to compute again
	}
	a.cs.status.Ready = ready
	a.m.publishLocked()
}

// podGrace is the pod's terminationGracePeriodSeconds (30 s when unset).
func podGrace(p *corev1.Pod) time.Duration {
	if p.Spec.TerminationGracePeriodSeconds != nil {
		return time.Duration(*p.Spec.TerminationGracePeriodSeconds) * time.Second
	}
	return 30 * time.Second
}
