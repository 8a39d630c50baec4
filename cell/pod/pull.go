package pod

import (
	"context"
	"errors"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kipcell/kip/cell/runtime"
)

// pullImage ensures the container's image (ensureImage), with the events
// on the container.
func (m *Manager) pullImage(ctx context.Context, cs *containerState, c *corev1.Container, d *Desired) (runtime.Image, error) {
	return m.ensureImage(ctx, cs.name, c.Image, pullPolicy(c), d.Credentials)
}

// ensureImage ensures image ref as the kubelet's image manager does
// (images.EnsureImageExists), with its events about container (empty:
// about the pod, as for an image volume): Pulled "already present" when
// the policy lets a present image be used, else Pulling and, once done,
// Pulled with the time it took.
func (m *Manager) ensureImage(ctx context.Context, container, ref string, policy runtime.PullPolicy, creds []runtime.Credential) (runtime.Image, error) {
	if policy != runtime.PullAlways {
		img, err := m.cfg.Runtime.EnsureImage(ctx, ref, runtime.PullNever, creds)
		switch {
		case err == nil:
			m.emit(EventNormal, "Pulled", container, "Container image %q already present on machine", ref)
			return img, nil
		case policy == runtime.PullNever || !errors.Is(err, runtime.ErrImageNeverPull):
			return runtime.Image{}, err
		}
	}
	m.emit(EventNormal, "Pulling", container, "Pulling image %q", ref)
	start := m.now()
	img, err := m.cfg.Runtime.EnsureImage(ctx, ref, policy, creds)
	if err != nil {
		// Unwrapped: the runtime's message is the status message.
		return runtime.Image{}, err
	}
	m.emit(EventNormal, "Pulled", container, "Successfully pulled image %q in %s", ref, roundDuration(m.now().Sub(start)))
	return img, nil
}

// roundDuration shortens a duration for event messages.
func roundDuration(d time.Duration) time.Duration {
	switch {
	case d >= time.Second:
		return d.Round(time.Millisecond)
	case d >= time.Millisecond:
		return d.Round(time.Microsecond)
	}
	return d
}
