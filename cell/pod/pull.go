package pod

import (
	"context"
	"errors"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kipcell/kip/cell/runtime"
)

// pullImage ensures the container's image as the kubelet's image manager
// does, with its events: Pulled "already present" when the policy lets a
// present image be used, else Pulling and, once done, Pulled with the time
// it took.
func (m *Manager) pullImage(ctx context.Context, cs *containerState, c *corev1.Container, d *Desired) (runtime.Image, error) {
	policy := pullPolicy(c)
	if policy != runtime.PullAlways {
		img, err := m.cfg.Runtime.EnsureImage(ctx, c.Image, runtime.PullNever, d.Credentials)
		switch {
		case err == nil:
			m.emit(EventNormal, "Pulled", cs.name, "Container image %q already present on machine", c.Image)
			return img, nil
		case policy == runtime.PullNever || !errors.Is(err, runtime.ErrImageNeverPull):
			return runtime.Image{}, err
		}
	}
	m.emit(EventNormal, "Pulling", cs.name, "Pulling image %q", c.Image)
	start := m.now()
	img, err := m.cfg.Runtime.EnsureImage(ctx, c.Image, policy, d.Credentials)
	if err != nil {
		// Unwrapped: the runtime's message is the status message.
		return runtime.Image{}, err
	}
	m.emit(EventNormal, "Pulled", cs.name, "Successfully pulled image %q in %s", c.Image, roundDuration(m.now().Sub(start)))
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
