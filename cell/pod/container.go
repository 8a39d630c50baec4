package pod

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kipcell/kip/cell/api/expansion"
	"github.com/kipcell/kip/cell/api/logs"
	"github.com/kipcell/kip/cell/runtime"
)

// containerState is one container's status and its running attempt. All
// fields are guarded by Manager.mu.
type containerState struct {
	name   string
	isInit bool
	// sidecar: an init container with restartPolicy Always, which keeps
	// running beside the app containers.
	sidecar bool
	// ephemeral: an ephemeral container (kubectl debug), started once
	// and never restarted (ephemeral.go).
	ephemeral bool
	// pidNS is the PID namespace an ephemeral container joins, its
	// target's, found before each start; empty: one of its own.
	pidNS  string
	status corev1.ContainerStatus
	// task is the running attempt, nil between attempts.
	task runtime.Task
	// aio is the running attempt's stdio for attach sessions.
	aio *attachIO
	// attempts is how many attempts were started (log file numbers).
	attempts int
	// succeeded: an init container that exited 0.
	succeeded bool
	// resumed is what an earlier agent left of the container (Restore),
	// taken over by the first turn of runContainer.
	resumed *resumedAttempt
}

func newContainerState(name, image string, isInit, afterInits bool) *containerState {
	reason := "ContainerCreating"
	if isInit || afterInits {
		reason = "PodInitializing"
	}
	return &containerState{name: name, isInit: isInit, status: corev1.ContainerStatus{
		Name: name, Image: image,
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason}},
	}}
}

// readiness reports whether the container has a readiness of its own:
// app containers and sidecars do; a regular init container is Ready only
// once it succeeded.
func (cs *containerState) readiness() bool { return !cs.ephemeral && (!cs.isInit || cs.sidecar) }

// restartPolicy is the container's: a sidecar's is Always, a regular
// init container's is the pod's but OnFailure for Always.
func (cs *containerState) restartPolicy(p *corev1.Pod) corev1.RestartPolicy {
	switch policy := p.Spec.RestartPolicy; {
	case cs.ephemeral:
		// The kubelet never restarts an ephemeral container
		// (computePodActions starts one only while it has no status).
		return corev1.RestartPolicyNever
	case cs.sidecar:
		return corev1.RestartPolicyAlways
	case cs.isInit && policy == corev1.RestartPolicyAlways:
		return corev1.RestartPolicyOnFailure
	default:
		return policy
	}
}

// waitForImageVolumes holds the container while an image volume it
// mounts is not there (true), waiting with the volume's reason until the
// pull is tried again or ctx ends.
func (m *Manager) waitForImageVolumes(ctx context.Context, cs *containerState, c *corev1.Container, d *Desired, log *slog.Logger) bool {
	reason, msg, event, wait := m.imageVolumesOf(ctx, c, d)
	if reason == "" {
		return false
	}
	if ctx.Err() != nil {
		return true
	}
	log.WarnContext(ctx, "waiting for an image volume", "reason", reason, "message", msg, "retry_in", wait)
	m.update(func() {
		cs.status.State = waiting(reason, msg)
		m.emitLocked(EventWarning, "Failed", cs.name, "Error: %s", event)
	})
	sleep(ctx, wait)
	return true
}

// runContainer runs a container's attempts until it should not restart or
// the pod is deleted. It reports whether the container completed
// successfully (what an init container must do before the next may start).
func (m *Manager) runContainer(ctx context.Context, cs *containerState) bool {
	log := m.log.With("container", cs.name)
	var (
		delay   time.Duration // next restart back-off
		pullDly time.Duration
		cfgDly  time.Duration // back-off of a container that cannot be configured
		img     runtime.Image
		pulled  string // the image ref img was pulled for
	)
	for {
		if ctx.Err() != nil {
			return false
		}
		c, d, specCh := m.containerSpec(cs)
		if c == nil {
			return false
		}
		var (
			ranFor time.Duration
			exit   *runtime.ExitStatus
			ok     bool
		)
		if r := m.takeResumed(cs); r != nil {
			img, pulled = m.resumedImage(ctx, cs, c, d), c.Image
			ranFor, exit, ok = m.resumeAttempt(ctx, cs, c, d, img, r, specCh)
		} else {
			// The image volumes it mounts first, as the kubelet fails a
			// container on them before it pulls the container's image.
			if m.waitForImageVolumes(ctx, cs, c, d, log) {
				continue // the loop's start ends it once ctx has ended
			}
			// Pull (IfNotPresent is cheap once the image is there).
			if pulled != c.Image {
				m.update(func() {
					cs.status.Image = c.Image
					if cs.status.State.Waiting != nil && cs.status.State.Waiting.Reason == "PodInitializing" && !cs.isInit {
						cs.status.State.Waiting = &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}
					}
				})
				var err error
				img, err = m.pullImage(ctx, cs, c, d)
				if err != nil {
					if ctx.Err() != nil {
						return false
					}
					pullDly = m.nextDelay(pullDly)
					log.WarnContext(ctx, "pulling image", "image", c.Image, "error", err, "retry_in", pullDly)
					if !m.pullBackOff(ctx, cs, c.Image, err, pullDly) {
						return false
					}
					continue
				}
				pullDly, pulled = 0, c.Image
			}

			// A disk that failed to set up is tried again (at most once per
			// Backoff.Initial); until it is, the container cannot start.
			m.mountDisks(ctx, d, 0, true)
			_, vars := containerEnv(c, d)
			mounts, err := m.vols.mounts(d.Pod, c, vars)
			var devices []runtime.Device
			if err == nil {
				devices, err = m.vols.devices(d.Pod, c)
			}
			if err == nil {
				var etc []runtime.Mount
				etc, err = m.etc.mounts(c)
				mounts = append(mounts, etc...)
			}
			var sec runtime.Security
			if err == nil {
				sec, err = containerSecurity(d.Pod, c, img.Config, d.SeccompDefault)
			}
			if err == nil {
				err = m.findTarget(cs, d)
			}
			if err != nil {
				cfgDly = m.nextDelay(cfgDly)
				log.WarnContext(ctx, "configuring the container", "error", err, "retry_in", cfgDly)
				reason := "CreateContainerConfigError"
				if errors.As(err, new(createContainerError)) {
					reason = reasonCreateContainerError
				}
				m.update(func() {
					cs.status.State = waiting(reason, err.Error())
					m.emitLocked(EventWarning, "Failed", cs.name, "Error: %s", err)
				})
				if !sleep(ctx, cfgDly) {
					return false
				}
				continue
			}
			cfgDly = 0
			ranFor, exit, ok = m.runAttempt(ctx, cs, c, d, img, mounts, devices, sec, specCh)
		}
		if !ok {
			return false
		}
		if ranFor >= m.cfg.Backoff.Reset {
			delay = 0
		}
		policy := cs.restartPolicy(d.Pod)
		switch {
		case exit == nil:
			// Restarted for a new spec: no back-off.
			continue
		case cs.sidecar:
			// Restarted whatever its exit code, as long as the pod runs.
		case cs.isInit && exit.Code == 0:
			m.update(func() { cs.succeeded, cs.status.Ready = true, true })
			return true
		case policy == corev1.RestartPolicyNever,
			policy == corev1.RestartPolicyOnFailure && exit.Code == 0:
			if cs.isInit {
				m.update(func() { m.initFail = true })
			}
			return exit.Code == 0
		}
		delay = m.nextDelay(delay)
		log.InfoContext(ctx, "container exited, restarting after back-off", "exit_code", exit.Code, "backoff", delay)
		m.update(func() {
			cs.status.LastTerminationState = cs.status.State
			cs.status.State = waiting("CrashLoopBackOff",
				fmt.Sprintf("back-off %s restarting failed container=%s pod=%s_%s(%s)",
					delay, cs.name, d.Pod.Name, d.Pod.Namespace, d.Pod.UID))
			m.emitLocked(EventWarning, "BackOff", cs.name, "Back-off restarting failed container %s in pod %s_%s(%s)",
				cs.name, d.Pod.Name, d.Pod.Namespace, d.Pod.UID)
		})
		if !sleep(ctx, delay) {
			return false
		}
	}
}

// pullBackOff reports a failed pull and waits delay before the next;
// it reports false when ctx ended first.
func (m *Manager) pullBackOff(ctx context.Context, cs *containerState, image string, err error, delay time.Duration) bool {
	reason, msg := pullFailure(image, err)
	m.update(func() {
		cs.status.State = waiting(reason, msg)
		if reason == "ErrImagePull" {
			m.emitLocked(EventWarning, "Failed", cs.name, "Failed to pull image %q: %s", image, msg)
		} else {
			m.emitLocked(EventWarning, reason, cs.name, "%s", msg)
		}
		m.emitLocked(EventWarning, "Failed", cs.name, "Error: %s", reason)
	})
	// Show ErrImagePull for a moment, as the kubelet does, then
	// ImagePullBackOff until the retry.
	if !sleep(ctx, min(delay/4, time.Second)) {
		return false
	}
	if reason == "ErrImagePull" {
		m.update(func() {
			cs.status.State = waiting("ImagePullBackOff",
				fmt.Sprintf("Back-off pulling image %q: ErrImagePull: %s", image, msg))
			m.emitLocked(EventNormal, "BackOff", cs.name, "Back-off pulling image %q", image)
			m.emitLocked(EventWarning, "Failed", cs.name, "Error: ImagePullBackOff")
		})
	}
	return sleep(ctx, delay-min(delay/4, time.Second))
}

// runAttempt starts one attempt and waits for it to end. exit is nil when
// the attempt was stopped because the desired spec changed; ok is false
// when the pod is being deleted (the attempt has then been stopped).
func (m *Manager) runAttempt(ctx context.Context, cs *containerState, c *corev1.Container, d *Desired, img runtime.Image, mounts []runtime.Mount, devices []runtime.Device, sec runtime.Security, specCh <-chan struct{}) (ranFor time.Duration, exit *runtime.ExitStatus, ok bool) {
	log := m.log.With("container", cs.name)
	m.mu.Lock()
	attempt := cs.attempts
	cs.attempts++
	m.mu.Unlock()
	lf, err := m.cfg.Logs.Create(cs.name, attempt)
	if err != nil {
		log.ErrorContext(ctx, "creating log file", "error", err)
		m.update(func() { cs.status.State = waiting("CreateContainerError", err.Error()) })
		return 0, &runtime.ExitStatus{Code: 128}, true
	}
	spec := m.containerRuntimeSpec(cs, c, d, img, attempt)
	spec.Mounts, spec.Devices, spec.Security = mounts, devices, sec
	termFile := ""
	if tm, ok, err := m.terminationFile(c, attempt); err != nil {
		log.WarnContext(ctx, "creating the termination message file", "error", err)
	} else if ok {
		spec.Mounts, termFile = append(append([]runtime.Mount(nil), mounts...), tm), tm.Source
	}
	aio := newAttachIO(c.Stdin, c.TTY, c.StdinOnce)
	spec.Stdout, spec.Stderr = outputs(lf, aio, log)
	spec.Stdin, spec.TTY = aio.stdinReader(), c.TTY
	task, err := m.cfg.Runtime.Start(context.WithoutCancel(ctx), spec)
	if err != nil {
		aio.close()
		_ = lf.Close()
		if termFile != "" {
			_ = os.Remove(termFile)
		}
		log.WarnContext(ctx, "starting container", "error", err)
		now := metav1.NewTime(m.now())
		m.update(func() {
			m.emitLocked(EventWarning, "Failed", cs.name, "Error: %s", err)
			if attempt > 0 {
				cs.status.RestartCount++
			}
			cs.status.LastTerminationState = corev1.ContainerState{}
			cs.status.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: 128, Reason: "StartError", Message: err.Error(), StartedAt: now, FinishedAt: now,
			}}
		})
		return 0, &runtime.ExitStatus{Code: 128}, true
	}
	started := task.StartedAt()
	m.mu.Lock()
	tgt := m.newTargetLocked(c, task)
	m.mu.Unlock()
	m.update(func() {
		if attempt > 0 {
			cs.status.RestartCount++
			if cs.status.State.Terminated != nil {
				cs.status.LastTerminationState = cs.status.State
			}
		}
		cs.task = task
		aio.setTask(task)
		cs.aio = aio
		cs.status.ContainerID = "containerd://" + task.ID()
		cs.status.ImageID = img.ID
		cs.status.Image = c.Image
		m.emitLocked(EventNormal, "Created", cs.name, "Created container %s", cs.name)
		m.emitLocked(EventNormal, "Started", cs.name, "Started container %s", cs.name)
	})
	log.InfoContext(ctx, "container started", "id", task.ID(), "attempt", attempt)

	// The container shows Running once its postStart hook has succeeded,
	// as on a kubelet; a failed hook kills it.
	hookFailed := m.postStart(ctx, cs, tgt, d.Pod, img)
	m.update(func() {
		if cs.task != task || hookFailed {
			return
		}
		cs.status.State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(started)}}
		if cs.ephemeral {
			// The kubelet's prober sets started only for the pod's
			// containers and init containers.
			return
		}
		started := c.StartupProbe == nil
		cs.status.Started = &started
		cs.status.Ready = cs.readiness() && started && c.ReadinessProbe == nil
	})
	return m.awaitAttempt(ctx, cs, d, img, liveAttempt{target: tgt, lf: lf, aio: aio, termFile: termFile, started: started}, specCh)
}

// liveAttempt is a running attempt: its task, log file, stdio for attach
// sessions and termination message file.
type liveAttempt struct {
	target
	lf       *logs.File
	aio      *attachIO
	termFile string
	started  time.Time
	// alreadyStarted: taken over from an earlier agent after its startup
	// probe, if any, had succeeded.
	alreadyStarted bool
}

// awaitAttempt supervises a running attempt until it ends, then records
// how it ended; it returns what runAttempt returns.
func (m *Manager) awaitAttempt(ctx context.Context, cs *containerState, d *Desired, img runtime.Image, a liveAttempt, specCh <-chan struct{}) (ranFor time.Duration, exit *runtime.ExitStatus, ok bool) {
	log := m.log.With("container", cs.name)
	c, task, lf, started := a.c, a.task, a.lf, a.started
	restartForSpec := m.supervise(ctx, cs, a.target, d, img, specCh, started, a.alreadyStarted)
	st := task.Status()
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	if err := task.Delete(dctx); err != nil {
		log.WarnContext(ctx, "deleting container", "error", err)
	}
	cancel()
	logPath := ""
	if lf != nil { // nil: a resumed attempt whose log could not be opened
		logPath = lf.Path()
		if err := lf.Close(); err != nil {
			log.WarnContext(ctx, "closing log", "error", err)
		}
	}
	a.aio.close()
	reason := "Completed"
	switch {
	case st.OOMKilled:
		reason = "OOMKilled"
	case st.Code != 0:
		reason = "Error"
	}
	msg := m.terminationMessage(context.WithoutCancel(ctx), c, a.termFile, st.Code, logPath)
	log.InfoContext(ctx, "container exited", "exit_code", st.Code, "reason", reason)
	m.update(func() {
		cs.task = nil
		cs.aio = nil
		cs.status.Ready = false
		if !cs.ephemeral {
			f := false
			cs.status.Started = &f
		}
		cs.status.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: st.Code, Reason: reason, Message: msg, StartedAt: metav1.NewTime(started),
			FinishedAt: metav1.NewTime(st.ExitedAt), ContainerID: cs.status.ContainerID,
		}}
	})
	if ctx.Err() != nil {
		return 0, nil, false
	}
	if restartForSpec {
		return 0, nil, true
	}
	return st.ExitedAt.Sub(started), &st, true
}

// supervise probes a running attempt until it exits, stopping it when
// the pod is deleted, a liveness or startup probe fails, or a newer spec
// changes its image; it reports the last (restart without back-off).
func (m *Manager) supervise(ctx context.Context, cs *containerState, tgt target, d *Desired, img runtime.Image, specCh <-chan struct{}, started time.Time, alreadyStarted bool) (restartForSpec bool) {
	log := m.log.With("container", cs.name)
	probeCtx, stopProbes := context.WithCancel(ctx)
	var probes sync.WaitGroup
	kill := m.startProbes(probeCtx, &probes, cs, tgt, d.Pod, started, alreadyStarted)
	select {
	case <-tgt.task.Exited():
	case <-ctx.Done():
		m.stop(cs, tgt, img, "", m.deleteGrace(d.Pod))
	case k := <-kill:
		log.InfoContext(ctx, "probe failed, stopping container", "reason", k.message)
		m.stop(cs, tgt, img, k.message, k.grace)
	case <-m.imageChanged(cs, tgt.c.Image, specCh):
		restartForSpec = true
		log.InfoContext(ctx, "image changed, restarting container")
		m.stop(cs, tgt, img, fmt.Sprintf("Container %s definition changed, will be restarted", cs.name), podGrace(d.Pod))
	}
	<-tgt.task.Exited()
	stopProbes()
	probes.Wait()
	return restartForSpec
}

// imageChanged returns a channel closed once a newer desired spec gives
// the container another image.
func (m *Manager) imageChanged(cs *containerState, image string, specCh <-chan struct{}) <-chan struct{} {
	out := make(chan struct{})
	go func() {
		ch := specCh
		for {
			select {
			case <-ch:
			case <-cs.exitedOrNil(m):
				return
			}
			c, _, next := m.containerSpec(cs)
			if c == nil || c.Image != image {
				close(out)
				return
			}
			ch = next
		}
	}()
	return out
}

// exitedOrNil returns the running task's exit channel (or a closed one).
func (cs *containerState) exitedOrNil(m *Manager) <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	if cs.task == nil {
		ch := make(chan struct{})
		close(ch)
		return ch
	}
	return cs.task.Exited()
}

// deleteGrace is the grace period of a pod being stopped: the one Delete
// was given, else an eviction's, else the pod's.
func (m *Manager) deleteGrace(p *corev1.Pod) time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.deleting {
		return m.grace
	}
	if m.evicted != "" {
		return evictionGrace
	}
	return podGrace(p)
}

// minStopGrace is the kubelet's minimumGracePeriodInSeconds: what a
// container has left for its stop signal after a preStop hook used up its
// grace period.
const minStopGrace = 2 * time.Second

// stop stops a container as the kubelet's killContainer does: a Killing
// event (message, or "Stopping container <name>"), the preStop hook
// within the grace period, the stop signal, and SIGKILL once the rest of
// the grace period has passed.
func (m *Manager) stop(cs *containerState, t target, img runtime.Image, message string, grace time.Duration) {
	ctx := context.Background()
	if message == "" {
		message = fmt.Sprintf("Stopping container %s", cs.name)
	}
	log := m.log.With("container", cs.name)
	m.emit(EventNormal, "Killing", cs.name, "%s", message)
	if h := t.c.Lifecycle; h != nil && h.PreStop != nil && grace > 0 {
		begin := time.Now()
		m.runPreStop(ctx, cs, t, h.PreStop, grace)
		// The kubelet counts in whole seconds.
		grace = max(grace-time.Since(begin).Truncate(time.Second), minStopGrace)
	}
	sig := stopSignal(img.Config.StopSignal)
	log.InfoContext(ctx, "stopping container", "signal", unix.SignalName(sig), "grace", grace)
	if grace > 0 {
		if err := t.task.Signal(ctx, sig, false); err != nil {
			log.WarnContext(ctx, "signalling container", "error", err)
		}
		timer := time.NewTimer(grace)
		defer timer.Stop()
		select {
		case <-t.task.Exited():
			return
		case <-timer.C:
		}
	}
	if err := t.task.Signal(ctx, syscall.SIGKILL, true); err != nil {
		log.WarnContext(ctx, "killing container", "error", err)
	}
}

// runPreStop runs the preStop hook for at most grace; a failure is a
// FailedPreStopHook event without the hook's output (it may hold
// secrets), as on a kubelet.
func (m *Manager) runPreStop(ctx context.Context, cs *containerState, t target, h *corev1.LifecycleHandler, grace time.Duration) {
	hctx, cancel := context.WithTimeout(ctx, grace)
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		if msg, err := runHook(hctx, h, t, m.podName()); err != nil && hctx.Err() == nil {
			m.log.WarnContext(ctx, "preStop hook failed", "container", cs.name, "error", err, "message", msg)
			m.emit(EventWarning, "FailedPreStopHook", cs.name, "PreStopHook failed")
		}
	}()
	select {
	case <-done:
	case <-hctx.Done():
		m.log.InfoContext(ctx, "preStop hook not completed in grace period", "container", cs.name, "grace", grace)
	}
}

// postStart runs the container's postStart hook, if any, and reports
// whether it failed; then the container has been killed, as by the
// kubelet (a FailedPostStartHook event, the Killing message
// "FailedPostStartHook").
func (m *Manager) postStart(ctx context.Context, cs *containerState, t target, p *corev1.Pod, img runtime.Image) bool {
	h := t.c.Lifecycle
	if h == nil || h.PostStart == nil {
		return false
	}
	hctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-t.task.Exited():
			cancel()
		case <-hctx.Done():
		}
	}()
	msg, err := runHook(hctx, h.PostStart, t, m.podName())
	if err == nil || ctx.Err() != nil {
		return false
	}
	m.log.WarnContext(ctx, "postStart hook failed", "container", cs.name, "error", err, "message", msg)
	m.emit(EventWarning, "FailedPostStartHook", cs.name, "PostStartHook failed")
	m.stop(cs, t, img, "FailedPostStartHook", podGrace(p))
	return true
}

// newTargetLocked is what a container's probes and hooks run against.
func (m *Manager) newTargetLocked(c *corev1.Container, task runtime.Task) target {
	return target{c: c, task: task, podIP: m.podIPLocked(), netns: m.NetNS, warn: func(reason, msg string) { m.emit(EventWarning, reason, "", "%s", msg) }}
}

// podName is "<name>_<namespace>(<uid>)", the kubelet's format.Pod.
func (m *Manager) podName() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.desired == nil {
		return ""
	}
	p := m.desired.Pod
	return fmt.Sprintf("%s_%s(%s)", p.Name, p.Namespace, p.UID)
}

// containerSpec returns the container's desired spec, the desired pod and
// a channel closed when it changes.
func (m *Manager) containerSpec(cs *containerState) (*corev1.Container, *Desired, <-chan struct{}) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if cs.ephemeral {
		return ephemeralSpec(m.desired.Pod, cs.name), m.desired, m.specCh
	}
	list := m.desired.Pod.Spec.Containers
	if cs.isInit {
		list = m.desired.Pod.Spec.InitContainers
	}
	for i := range list {
		if list[i].Name == cs.name {
			return &list[i], m.desired, m.specCh
		}
	}
	return nil, m.desired, m.specCh
}

// containerRuntimeSpec resolves a container attempt for the runtime.
func (m *Manager) containerRuntimeSpec(cs *containerState, c *corev1.Container, d *Desired, img runtime.Image, attempt int) runtime.ContainerSpec {
	env, vars := containerEnv(c, d)
	var args []string
	switch {
	case len(c.Command) > 0:
		args = append(append(args, c.Command...), c.Args...)
	case len(c.Args) > 0:
		args = append(append(args, img.Config.Entrypoint...), c.Args...)
	default:
		args = append(append(args, img.Config.Entrypoint...), img.Config.Cmd...)
	}
	if len(c.Command) > 0 || len(c.Args) > 0 {
		for i := range args {
			args[i] = expansion.Expand(args[i], vars)
		}
	}
	var res runtime.Resources
	if q, ok := c.Resources.Limits[corev1.ResourceMemory]; ok {
		res.MemoryLimitBytes = q.Value()
	}
	if q, ok := c.Resources.Limits[corev1.ResourceCPU]; ok {
		res.CPUQuotaMillis = q.MilliValue()
	}
	if q, ok := c.Resources.Requests[corev1.ResourceCPU]; ok {
		res.CPUShares = max(uint64(q.MilliValue())*1024/1000, 2)
	}
	res.OOMScoreAdj = containerOOMScoreAdj(d.Pod, c, m.cfg.MemoryCapacity)
	return runtime.ContainerSpec{
		ID:         c.Name + "-" + strconv.Itoa(attempt),
		Name:       c.Name,
		Image:      img,
		Args:       args,
		Env:        env,
		WorkingDir: c.WorkingDir,
		Hostname:   m.etc.containerHostname(),
		NetNSPath:  m.NetNS(),
		PIDNSPath:  m.pidNSOf(cs),
		Resources:  res,
	}
}

// containerEnv is the container's environment ("NAME=value") and the
// same as a map for $(VAR) expansion: the host's resolution, else the
// literal values of the spec.
func containerEnv(c *corev1.Container, d *Desired) ([]string, map[string]string) {
	var env []string
	vars := map[string]string{}
	if resolved, ok := d.Env[c.Name]; ok {
		for _, e := range resolved {
			env = append(env, e.Name+"="+e.Value)
			vars[e.Name] = e.Value
		}
	} else {
		for _, e := range c.Env {
			if e.ValueFrom != nil {
				continue
			}
			v := expansion.Expand(e.Value, vars)
			env = append(env, e.Name+"="+v)
			vars[e.Name] = v
		}
	}
	return env, vars
}

func pullPolicy(c *corev1.Container) runtime.PullPolicy {
	return imagePullPolicy(c.ImagePullPolicy, c.Image)
}

// imagePullPolicy is policy, or when empty the API server's default for
// image ref (a container's imagePullPolicy, an image volume's pullPolicy).
func imagePullPolicy(policy corev1.PullPolicy, image string) runtime.PullPolicy {
	switch policy {
	case corev1.PullAlways:
		return runtime.PullAlways
	case corev1.PullNever:
		return runtime.PullNever
	case corev1.PullIfNotPresent:
		return runtime.PullIfNotPresent
	}
	// Defaulting, as the API server does.
	ref := image
	if i := strings.LastIndexByte(ref, '/'); i >= 0 {
		ref = ref[i+1:]
	}
	if strings.Contains(ref, "@") || (strings.Contains(ref, ":") && !strings.HasSuffix(ref, ":latest")) {
		return runtime.PullIfNotPresent
	}
	return runtime.PullAlways
}

func pullFailure(image string, err error) (reason, message string) {
	if errors.Is(err, runtime.ErrImageNeverPull) {
		return "ErrImageNeverPull", fmt.Sprintf("Container image %q is not present with pull policy of Never", image)
	}
	msg := err.Error()
	msg = strings.TrimPrefix(msg, runtime.ErrImagePull.Error()+": ")
	return "ErrImagePull", msg
}

func waiting(reason, message string) corev1.ContainerState {
	return corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: message}}
}

// nextDelay doubles the back-off delay from Initial up to Max.
func (m *Manager) nextDelay(prev time.Duration) time.Duration {
	if prev <= 0 {
		return m.cfg.Backoff.Initial
	}
	return min(2*prev, m.cfg.Backoff.Max)
}

// sleep waits d or until ctx ends; it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// stopSignal parses an image's StopSignal ("SIGQUIT", "QUIT", "3").
func stopSignal(s string) syscall.Signal {
	if s == "" {
		return syscall.SIGTERM
	}
	if n, err := strconv.Atoi(s); err == nil && n > 0 && n < 65 {
		return syscall.Signal(n)
	}
	s = strings.ToUpper(s)
	if !strings.HasPrefix(s, "SIG") {
		s = "SIG" + s
	}
	if sig := unix.SignalNum(s); sig != 0 {
		return sig
	}
	return syscall.SIGTERM
}
