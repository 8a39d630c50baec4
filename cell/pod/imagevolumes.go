package pod

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kipcell/kip/cell/runtime"
)

// This file gives the pod its image volumes (volumes: [{image: {reference,
// pullPolicy}}]) as the kubelet of v1.36 does with containerd:
//
//   - before the containers start, every image volume's image is ensured
//     by its pull policy, whether a container mounts it or not
//     (kuberuntime_manager.go, getImageVolumes), with the image manager's
//     events (Pulling, Pulled, Failed "Failed to pull image", BackOff
//     "Back-off pulling image", ErrImageNeverPull) about the pod itself,
//     with no field path: the kubelet hands the image manager the pod's
//     reference, not a container's;
//   - a container that mounts a volume whose image failed does not start
//     (toKubeContainerImageVolumes): it waits with the pull's reason,
//     ErrImagePull and then ImagePullBackOff while the pull backs off
//     (ErrImageNeverPull under policy Never), the kubelet's messages, and
//     a Failed event "Error: <reason>" about it; the pull is tried again
//     after the back-off, and the container starts once it succeeds. A
//     container that mounts none of the failed volumes runs (the node
//     e2e test "should succeed if image volume is not existing but
//     unused");
//   - the image's root filesystem is mounted read-only in the volumes'
//     directory (Runtime.MountImage: a snapshot view, as containerd's
//     CRI plugin mounts it) and bound read-only into each container that
//     mounts it, whatever its volumeMount says (pkg/volume/image's
//     mounter is read-only); a subPath must be a directory of the image,
//     else the container waits with CreateContainerError, as containerd
//     refuses it (ensureImageSubPath);
//   - the mount is released when the pod is deleted, before the runtime
//     removes the images (releaseImageVolumes).

// imageVolume is the state of one image volume of the pod.
type imageVolume struct {
	// mu serializes the volume's pulls and mount: the pod's start and
	// each container that mounts it may ask at once.
	mu      sync.Mutex
	mounted bool
	// reason and msg are the last failure's (reason empty: none); the
	// next try is at retryAt, delay after failedAt.
	reason, msg       string
	failedAt, retryAt time.Time
	delay             time.Duration
	// toldBackOff: the BackOff event of this back-off was emitted.
	toldBackOff bool
}

// imageVolumes are the pod's image volumes, by name.
type imageVolumes struct {
	mu   sync.Mutex
	vols map[string]*imageVolume
}

func (iv *imageVolumes) get(name string) *imageVolume {
	iv.mu.Lock()
	defer iv.mu.Unlock()
	if iv.vols == nil {
		iv.vols = map[string]*imageVolume{}
	}
	v := iv.vols[name]
	if v == nil {
		v = &imageVolume{}
		iv.vols[name] = v
	}
	return v
}

// Reasons of a container waiting for an image volume, the kubelet's.
const (
	reasonErrImagePull         = "ErrImagePull"
	reasonImagePullBackOff     = "ImagePullBackOff"
	reasonCreateContainerError = "CreateContainerError"
)

// createContainerError is what the kubelet learns only when the runtime
// refuses to create the container (CreateContainerError), not while it
// makes the container's configuration (CreateContainerConfigError): an
// image volume's subPath, which containerd checks.
type createContainerError struct{ err error }

func (e createContainerError) Error() string { return e.err.Error() }
func (e createContainerError) Unwrap() error { return e.err }

// pullImageVolumes ensures the image of every image volume of d's pod, as
// the kubelet does before it starts the pod's containers; failures are
// kept for the containers that mount them (imageVolumesOf).
func (m *Manager) pullImageVolumes(ctx context.Context, d *Desired) {
	for i := range d.Pod.Spec.Volumes {
		if vol := &d.Pod.Spec.Volumes[i]; vol.Image != nil {
			m.ensureImageVolume(ctx, vol, d)
		}
	}
}

// imageVolumesOf ensures the image volumes container c mounts. It returns
// the first one's failure (reason empty when all are mounted), the
// message and event text the container reports, and how long to wait
// before asking again.
func (m *Manager) imageVolumesOf(ctx context.Context, c *corev1.Container, d *Desired) (reason, msg, event string, wait time.Duration) {
	seen := map[string]bool{}
	for _, vm := range c.VolumeMounts {
		if seen[vm.Name] {
			continue
		}
		seen[vm.Name] = true
		for i := range d.Pod.Spec.Volumes {
			vol := &d.Pod.Spec.Volumes[i]
			if vol.Name != vm.Name || vol.Image == nil {
				continue
			}
			if reason, msg, wait = m.ensureImageVolume(ctx, vol, d); reason != "" {
				// The kubelet's Failed event names the reason of a pull
				// (toKubeContainerImageVolumes), the runtime's message of a
				// failed creation (startContainer).
				event = reason
				if reason == reasonCreateContainerError {
					event = msg
				}
				return reason, msg, event, wait
			}
		}
	}
	return "", "", "", 0
}

// ensureImageVolume pulls and mounts image volume vol unless it is
// mounted or its last failure is backing off. It returns the failure
// (reason empty: mounted) and how long to wait before asking again: a
// moment after a failed pull, which the kubelet shows as ErrImagePull
// before its next sync finds the pull backing off, then the rest of the
// back-off (ImagePullBackOff).
func (m *Manager) ensureImageVolume(ctx context.Context, vol *corev1.Volume, d *Desired) (reason, msg string, wait time.Duration) {
	v := m.imgVols.get(vol.Name)
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.mounted {
		return "", "", 0
	}
	ref := vol.Image.Reference
	now := m.now()
	if v.reason != "" && now.Before(v.retryAt) {
		if fresh := v.failedAt.Add(errShownFor(v.delay)); v.reason == reasonErrImagePull && now.Before(fresh) {
			return v.reason, v.msg, fresh.Sub(now)
		}
		if v.reason != reasonErrImagePull {
			return v.reason, v.msg, v.retryAt.Sub(now)
		}
		if !v.toldBackOff {
			v.toldBackOff = true
			m.emit(EventNormal, "BackOff", "", "Back-off pulling image %q", ref)
		}
		return reasonImagePullBackOff, fmt.Sprintf("Back-off pulling image %q: %s: %s", ref, reasonErrImagePull, v.msg), v.retryAt.Sub(now)
	}
	img, err := m.ensureImage(ctx, "", ref, imagePullPolicy(vol.Image.PullPolicy, ref), d.Credentials)
	if err != nil {
		if ctx.Err() != nil {
			return "", "", 0 // the pod is going: no failure to keep
		}
		reason, msg = pullFailure(ref, err)
		m.log.WarnContext(ctx, "pulling the image of an image volume", "volume", vol.Name, "image", ref, "error", err)
		if reason == reasonErrImagePull {
			m.emit(EventWarning, "Failed", "", "Failed to pull image %q: %s", ref, msg)
		} else {
			m.emit(EventWarning, reason, "", "%s", msg)
		}
		return v.fail(m, reason, msg, now)
	}
	if err := m.mountImageVolume(ctx, vol.Name, img); err != nil {
		m.log.WarnContext(ctx, "mounting an image volume", "volume", vol.Name, "image", ref, "error", err)
		// containerd's message (container_create.go, mutateMounts).
		return v.fail(m, reasonCreateContainerError, fmt.Sprintf("failed to mount image volume: ImageVolumeMountFailed: %v", err), now)
	}
	m.log.InfoContext(ctx, "image volume mounted", "volume", vol.Name, "image", ref, "image_id", img.ID)
	v.mounted, v.reason, v.msg, v.delay = true, "", "", 0
	return "", "", 0
}

// fail records a failure of v at now and returns it with the wait before
// the container asks again (ensureImageVolume).
func (v *imageVolume) fail(m *Manager, reason, msg string, now time.Time) (string, string, time.Duration) {
	v.delay = m.nextDelay(v.delay)
	v.reason, v.msg, v.failedAt, v.retryAt, v.toldBackOff = reason, msg, now, now.Add(v.delay), false
	if reason == reasonErrImagePull {
		return reason, msg, errShownFor(v.delay)
	}
	return reason, msg, v.delay
}

// errShownFor is how long a container shows ErrImagePull before
// ImagePullBackOff, as pullBackOff shows it for a container's image.
func errShownFor(delay time.Duration) time.Duration { return min(delay/4, time.Second) }

// mountImageVolume mounts img's root filesystem as volume name, in the
// volumes' directory where the runtime sees the agent's mounts.
func (m *Manager) mountImageVolume(ctx context.Context, name string, img runtime.Image) error {
	v := m.vols
	switch {
	case v.dir == "":
		return errors.New("the agent has no volume directory")
	case v.noTmpfs != nil:
		return fmt.Errorf("the container runtime would not see the image's mount: %w", v.noTmpfs)
	}
	dir := filepath.Join(v.dir, name)
	if err := m.cfg.Runtime.MountImage(ctx, img, dir); err != nil {
		return err
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	v.paths[name] = dir
	delete(v.errs, name)
	return nil
}

// imageSubPath checks that the subPath source src of an image volume is a
// directory, the one kind containerd mounts (ensureImageSubPath: "only
// directory subpath is supported").
func imageSubPath(src, sub string) error {
	info, err := os.Stat(src)
	if err != nil {
		return createContainerError{fmt.Errorf("failed to ensure image subpath %q: %w", sub, err)}
	}
	if !info.IsDir() {
		return createContainerError{fmt.Errorf("failed to ensure image subpath %q: only directory subpath is supported", sub)}
	}
	return nil
}

// releaseImageVolumes unmounts the pod's image volumes (those an earlier
// agent mounted too) and releases their views, before the runtime's
// Cleanup removes the images under them.
func (m *Manager) releaseImageVolumes(ctx context.Context) error {
	m.mu.Lock()
	d := m.desired
	m.mu.Unlock()
	if d == nil || m.vols.dir == "" {
		return nil
	}
	var errs []error
	for _, vol := range d.Pod.Spec.Volumes {
		if vol.Image == nil {
			continue
		}
		if err := m.cfg.Runtime.UnmountImage(ctx, filepath.Join(m.vols.dir, vol.Name)); err != nil {
			errs = append(errs, fmt.Errorf("releasing image volume %q: %w", vol.Name, err))
		}
	}
	return errors.Join(errs...)
}
