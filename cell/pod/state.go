package pod

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kipcell/kip/cell/api/logs"
	"github.com/kipcell/kip/cell/runtime"
)

// This file keeps the pod's state on the cell's disk (Config.StatePath)
// and resumes it in a new agent (Restore): an agent that died (kill -9,
// a crash, an upgrade) leaves its containers running, and the next one
// takes them over without restarting them.
//
// What is kept: the last desired pod (generation, pod, resolved
// environment, registry credentials, cluster DNS; not the files of
// configMap, secret, downwardAPI and projected volumes, which are in
// their directories already, on a tmpfs where secrets are), the pod's
// start time, whether its init containers are done or failed, its
// deadline passed and it was evicted (with the message), the status last published (conditions keep their
// transition times), and per container the number of attempts, whether
// an init container succeeded, and the running attempt's container ID and
// start time. The file is 0600 (the environment may hold secrets, as the
// container's OCI spec that containerd keeps does).
//
// It is written whenever the published status changes and when a new
// generation is accepted: a few writes per container start or exit and
// per readiness change, never per probe or per status read. A write is a
// temporary file renamed over the old one, so a reader sees a whole
// file; it is not synced: the state matters only while the machine runs
// (a reboot ends the containers too).

// stateVersion is the format of the state file.
const stateVersion = 1

// savedState is the state file.
type savedState struct {
	Version int `json:"version"`
	// Desired is a savedDesired.
	Desired    json.RawMessage  `json:"desired"`
	StartTime  *metav1.Time     `json:"startTime,omitempty"`
	InitDone   bool             `json:"initDone,omitempty"`
	InitFail   bool             `json:"initFail,omitempty"`
	Deadline   bool             `json:"deadline,omitempty"`
	Evicted    string           `json:"evicted,omitempty"`
	Status     corev1.PodStatus `json:"status"`
	Containers []savedContainer `json:"containers"`
}

// savedDesired is Desired without the volumes' files.
type savedDesired struct {
	Generation  int64                `json:"generation"`
	Pod         *corev1.Pod          `json:"pod"`
	Env         map[string][]EnvVar  `json:"env,omitempty"`
	Credentials []runtime.Credential `json:"credentials,omitempty"`
	DNS         ClusterDNS           `json:"dns"`
	PodAddress  string               `json:"podAddress,omitempty"`
	// SeccompDefault and LogRotation are the node's: a restarted agent
	// starts the pod's next attempts with them too.
	SeccompDefault bool          `json:"seccompDefault,omitempty"`
	LogRotation    logs.Rotation `json:"logRotation,omitzero"`
	// Disks are how the pod's disks are found and mounted: a restarted
	// agent takes over the mounted ones and sets up the others.
	Disks map[string]Disk `json:"disks,omitempty"`
	// Shares are the claims' NFS shares, for a restarted agent.
	Shares map[string]Share `json:"shares,omitempty"`
}

// savedContainer is what a container's status does not say.
type savedContainer struct {
	Name string `json:"name"`
	Init bool   `json:"init,omitempty"`
	// Ephemeral: an ephemeral container (ephemeral.go).
	Ephemeral bool `json:"ephemeral,omitempty"`
	Attempts  int  `json:"attempts"`
	Succeeded bool `json:"succeeded,omitempty"`
	// TaskID is the running attempt's container ID, empty between
	// attempts; StartedAt is when it started.
	TaskID    string    `json:"taskID,omitempty"`
	StartedAt time.Time `json:"startedAt,omitzero"`
}

// setDesiredLocked makes d the desired pod and its saved form.
func (m *Manager) setDesiredLocked(d *Desired) {
	m.desired = d
	m.useRotation(d)
	if m.cfg.StatePath == "" {
		return
	}
	data, err := json.Marshal(savedDesired{Generation: d.Generation, Pod: d.Pod, Env: d.Env, Credentials: d.Credentials, DNS: d.DNS, PodAddress: d.PodAddress, SeccompDefault: d.SeccompDefault, LogRotation: d.LogRotation, Disks: d.Disks, Shares: d.Shares})
	if err != nil {
		m.log.Error("encoding the desired pod for the state file", "error", err)
		return
	}
	m.desiredJSON = data
}

// saveLocked writes the state file when what it would hold changed.
func (m *Manager) saveLocked() {
	if m.cfg.StatePath == "" || m.desiredJSON == nil || m.deleting {
		return
	}
	st := savedState{Version: stateVersion, Desired: m.desiredJSON, StartTime: m.startTime,
		InitDone: m.initDone, InitFail: m.initFail, Deadline: m.deadline, Evicted: m.evicted, Status: m.status}
	for _, cs := range append(m.containersLocked(), m.ephems...) {
		sc := savedContainer{Name: cs.name, Init: cs.isInit, Ephemeral: cs.ephemeral, Attempts: cs.attempts, Succeeded: cs.succeeded}
		if cs.task != nil {
			sc.TaskID, sc.StartedAt = cs.task.ID(), cs.task.StartedAt()
		}
		st.Containers = append(st.Containers, sc)
	}
	data, err := json.Marshal(st)
	if err != nil {
		m.log.Error("encoding the state file", "error", err)
		return
	}
	if bytes.Equal(data, m.savedJSON) {
		return
	}
	if err := writeFileAtomic(m.cfg.StatePath, data); err != nil {
		m.log.Warn("writing the state file", "error", err)
		return
	}
	m.savedJSON = data
}

// removeStateLocked removes the state file.
func (m *Manager) removeStateLocked() error {
	if m.cfg.StatePath == "" {
		return nil
	}
	if err := os.Remove(m.cfg.StatePath); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("removing the state file: %w", err)
	}
	return nil
}

// containersLocked returns the init containers, then the app containers.
func (m *Manager) containersLocked() []*containerState {
	return append(append([]*containerState(nil), m.inits...), m.apps...)
}

// writeFileAtomic writes data to a temporary file beside path and renames
// it over path.
func writeFileAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // nothing left to remove after the rename
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// Restore resumes the pod an earlier agent of the cell ran, from the
// state file: the desired pod, the status, and every container attempt
// still running, taken over through Runtime.Reattach with its output
// appended to the attempt's log, its probes started again (startup not
// again for a started container) and exec and attach working. An attempt
// that exited while no agent ran is reported Terminated with its exit code
// and restarted per the restart policy; one whose container is gone is
// Terminated with reason ContainerStatusUnknown (exit code 137, as the
// kubelet reports a container it lost). Nothing is restarted that runs.
//
// It reports false, having changed nothing, when there is no state, or
// the state is of another pod than podUID (when podUID is set); then the
// caller starts afresh. So it does, with an error, when the state's pod
// has an address of its own the manager cannot give it (ErrNoPodNetwork,
// as Apply refuses one). It must be called before the first Apply.
func (m *Manager) Restore(ctx context.Context, podUID string) (bool, error) {
	if m.cfg.StatePath == "" {
		return false, nil
	}
	data, err := os.ReadFile(m.cfg.StatePath)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("reading the state file: %w", err)
	}
	var st savedState
	if err := json.Unmarshal(data, &st); err != nil {
		return false, fmt.Errorf("decoding the state file: %w", err)
	}
	if st.Version != stateVersion {
		return false, fmt.Errorf("decoding the state file: version %d, want %d", st.Version, stateVersion)
	}
	var sd savedDesired
	if err := json.Unmarshal(st.Desired, &sd); err != nil {
		return false, fmt.Errorf("decoding the state file's pod: %w", err)
	}
	if sd.Pod == nil {
		return false, errors.New("decoding the state file: no pod")
	}
	if podUID != "" && string(sd.Pod.UID) != podUID {
		m.log.InfoContext(ctx, "the state file is of another pod; not resuming it", "saved_uid", sd.Pod.UID, "uid", podUID)
		return false, nil
	}
	d := &Desired{Generation: sd.Generation, Pod: sd.Pod, Env: sd.Env, Credentials: sd.Credentials, DNS: sd.DNS, PodAddress: sd.PodAddress, SeccompDefault: sd.SeccompDefault, LogRotation: sd.LogRotation, Disks: sd.Disks, Shares: sd.Shares}
	if err := m.checkAddress(d); err != nil {
		// An agent of another kind left it: the pod was resolved for an
		// address this one cannot give it.
		return false, fmt.Errorf("restoring the pod: %w", err)
	}

	m.mu.Lock()
	if m.started || m.deleting {
		m.mu.Unlock()
		return false, errors.New("restoring the pod: the manager already runs one")
	}
	m.desired, m.desiredJSON = d, st.Desired
	m.useRotation(d)
	m.beginLocked(d)
	m.restoreEphemeralsLocked(d, st.Containers)
	m.startTime, m.initDone, m.initFail, m.deadline, m.evicted = st.StartTime, st.InitDone, st.InitFail, st.Deadline, st.Evicted
	m.status = st.Status
	// The earlier agent reported the pod's IP: its network is there (a
	// pinned namespace, or the cell's), as a sandbox outlives a kubelet.
	m.networkUp = st.Status.PodIP != ""
	saved := map[string]savedContainer{}
	for _, sc := range st.Containers {
		saved[containerKey(sc.Init, sc.Name)] = sc
	}
	statuses := map[string]corev1.ContainerStatus{}
	for _, s := range st.Status.InitContainerStatuses {
		statuses[containerKey(true, s.Name)] = s
	}
	for _, s := range st.Status.ContainerStatuses {
		statuses[containerKey(false, s.Name)] = s
	}
	// An ephemeral container's name is the pod's alone (the API server
	// makes all names in a pod unique): its key is an app container's.
	for _, s := range st.Status.EphemeralContainerStatuses {
		statuses[containerKey(false, s.Name)] = s
	}
	var running []*containerState
	for _, cs := range append(m.containersLocked(), m.ephems...) {
		key := containerKey(cs.isInit, cs.name)
		if s, ok := statuses[key]; ok {
			cs.status = s
		}
		sc := saved[key]
		cs.attempts, cs.succeeded = sc.Attempts, sc.Succeeded
		switch {
		case sc.TaskID != "":
			cs.resumed = &resumedAttempt{id: sc.TaskID, started: sc.StartedAt}
			running = append(running, cs)
		case cs.status.State.Terminated != nil:
			// Ended before the agent did: the restart policy decides.
			t := cs.status.State.Terminated
			cs.resumed = &resumedAttempt{ended: &runtime.ExitStatus{Code: t.ExitCode, ExitedAt: t.FinishedAt.Time}}
		}
	}
	m.mu.Unlock()

	m.vols.restore(d)
	_ = m.etc.sync(ctx, d) // the same files again; their warnings were told
	for _, cs := range running {
		m.reattach(ctx, cs)
	}

	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.deadline && m.evicted == "" {
		m.startWorkersLocked(ctx)
		m.resumeEphemeralsLocked()
		m.startEphemeralsLocked(d)
	}
	m.publishLocked()
	m.saveLocked()
	m.log.InfoContext(ctx, "resumed the pod of an earlier agent", "generation", d.Generation, "running", len(running))
	return true, nil
}

func containerKey(isInit bool, name string) string {
	if isInit {
		return "init/" + name
	}
	return "app/" + name
}

// resumedAttempt is what Restore found of a container: a running attempt
// (id, taken over: task, or lost: task nil), or the exit of one that had
// ended (ended).
type resumedAttempt struct {
	id      string
	started time.Time
	live    *liveAttempt
	ended   *runtime.ExitStatus
}

// reattach takes over a running attempt of cs, with its output appended
// to the attempt's log, so that exec, attach and logs work at once.
func (m *Manager) reattach(ctx context.Context, cs *containerState) {
	c, _, _ := m.containerSpec(cs)
	r := cs.resumed
	if c == nil {
		return
	}
	log := m.log.With("container", cs.name)
	attempt := max(cs.attempts-1, 0)
	lf, err := m.cfg.Logs.Append(cs.name, attempt)
	if err != nil {
		// Taken over all the same, its output dropped.
		log.WarnContext(ctx, "opening the log of a resumed container", "error", err)
	}
	aio := newAttachIO(c.Stdin, c.TTY, c.StdinOnce)
	stdout, stderr := outputs(lf, aio, log)
	task, err := m.cfg.Runtime.Reattach(ctx, runtime.ReattachSpec{
		ID: r.id, StartedAt: r.started, Stdout: stdout, Stderr: stderr, Stdin: aio.stdinReader(), TTY: c.TTY,
	})
	if err != nil {
		log.WarnContext(ctx, "taking over a container of the earlier agent", "id", r.id, "error", err)
		aio.close()
		if lf != nil {
			_ = lf.Close()
		}
		return // lost: r.live stays nil
	}
	log.InfoContext(ctx, "took over a container of the earlier agent", "id", r.id, "attempt", attempt)
	m.mu.Lock()
	defer m.mu.Unlock()
	cs.task, cs.aio = task, aio
	aio.setTask(task)
	r.live = &liveAttempt{
		target:   m.newTargetLocked(c, task),
		lf:       lf,
		aio:      aio,
		termFile: m.terminationPath(c, attempt),
		started:  r.started,
		// A container in its postStart hook, or not yet started by its
		// startup probe, is started from scratch by the probes.
		alreadyStarted: cs.status.Started != nil && *cs.status.Started,
	}
}

// takeResumed returns (once) what Restore found of cs.
func (m *Manager) takeResumed(cs *containerState) *resumedAttempt {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := cs.resumed
	cs.resumed = nil
	return r
}

// resumedImage is the image of a resumed container: described again
// (it is there; nothing is pulled), or what the status says.
func (m *Manager) resumedImage(ctx context.Context, cs *containerState, c *corev1.Container, d *Desired) runtime.Image {
	img, err := m.cfg.Runtime.EnsureImage(ctx, c.Image, runtime.PullNever, d.Credentials)
	if err != nil {
		m.mu.Lock()
		id := cs.status.ImageID
		m.mu.Unlock()
		return runtime.Image{Ref: c.Image, ID: id}
	}
	return img
}

// resumeAttempt carries on with what Restore found of a container, as
// runAttempt would with an attempt it started.
func (m *Manager) resumeAttempt(ctx context.Context, cs *containerState, c *corev1.Container, d *Desired, img runtime.Image, r *resumedAttempt, specCh <-chan struct{}) (time.Duration, *runtime.ExitStatus, bool) {
	switch {
	case r.ended != nil:
		return 0, r.ended, true
	case r.live == nil:
		now := metav1.NewTime(m.now())
		m.update(func() {
			cs.task, cs.aio = nil, nil
			cs.status.Ready = false
			f := false
			cs.status.Started = &f
			cs.status.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: 137, Reason: "ContainerStatusUnknown",
				Message:    "The container could not be located when the cell agent restarted",
				StartedAt:  metav1.NewTime(r.started),
				FinishedAt: now, ContainerID: cs.status.ContainerID,
			}}
		})
		return 0, &runtime.ExitStatus{Code: 137, ExitedAt: now.Time}, true
	}
	a := *r.live
	a.c = c
	m.update(func() {
		if cs.status.State.Running == nil {
			// The earlier agent died in the postStart hook: it is not run
			// again.
			cs.status.State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(a.started)}}
			started := c.StartupProbe == nil
			cs.status.Started = &started
			cs.status.Ready = cs.readiness() && started && c.ReadinessProbe == nil
		}
	})
	return m.awaitAttempt(ctx, cs, d, img, a, specCh)
}

// useRotation makes the log rotation d carries (the node's) the one of the
// container logs opened from now on; none leaves the store's.
func (m *Manager) useRotation(d *Desired) {
	if d.LogRotation != (logs.Rotation{}) {
		m.cfg.Logs.SetRotation(d.LogRotation)
	}
}
