package ephemeral

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path/filepath"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/kipcell/kip/cell/runtime"
)

// DefaultInterval is how often Watch measures: the kubelet's eviction
// monitoring interval.
const DefaultInterval = 10 * time.Second

// Pod is the pod Watch holds to its limits (cell/pod's Manager).
type Pod interface {
	// Spec is the pod the cell runs, nil before there is one.
	Spec() *corev1.Pod
	// PodStatus is the pod's status: an ended pod is not measured.
	PodStatus() corev1.PodStatus
	// Tasks are the running containers, by name.
	Tasks() map[string]runtime.Task
	// VolumeDirs are the volumes' directories, by name.
	VolumeDirs() map[string]string
	// Evict ends the pod with message (reason Evicted).
	Evict(ctx context.Context, message string) bool
}

// Config is what Watch measures and how often.
type Config struct {
	Pod Pod
	// LogDir is the directory of a container's log files, all its
	// attempts' (cell/api/logs).
	LogDir func(container string) string
	// EtcDir holds the pod's /etc files; "": none.
	EtcDir string
	// Interval between measures; 0: DefaultInterval.
	Interval time.Duration
	Logger   *slog.Logger
}

// Watch measures the pod every Interval and evicts it when it holds more
// than a limit (see the package comment), until ctx ends.
func Watch(ctx context.Context, cfg Config) {
	interval := cfg.Interval
	if interval <= 0 {
		interval = DefaultInterval
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		p := cfg.Pod.Spec()
		if p == nil || !Limited(p) {
			continue
		}
		if ph := cfg.Pod.PodStatus().Phase; ph == corev1.PodSucceeded || ph == corev1.PodFailed {
			continue
		}
		u := Measure(ctx, cfg, p, log)
		if msg := Check(p, u); msg != "" && cfg.Pod.Evict(ctx, msg) {
			log.InfoContext(ctx, "evicted the pod for its local ephemeral storage", "message", msg, "used_bytes", u.Total(p))
		}
	}
}

// Usage is what a pod holds on its cell's disk, in bytes.
type Usage struct {
	// Containers is each container's writable layer and logs.
	Containers map[string]uint64
	// Volumes is each volume's, by name: the emptyDir ones and the local
	// ephemeral ones (IsLocalEphemeral).
	Volumes map[string]uint64
	// Etc is the pod's /etc files'.
	Etc uint64
}

// Total is what pod p holds: its containers', its local ephemeral
// volumes' (IsLocalEphemeral) and its /etc files' (the kubelet's
// calcEphemeralStorage).
func (u Usage) Total(p *corev1.Pod) uint64 {
	n := u.Etc
	for _, b := range u.Containers {
		n += b
	}
	for i := range p.Spec.Volumes {
		if IsLocalEphemeral(&p.Spec.Volumes[i]) {
			n += u.Volumes[p.Spec.Volumes[i].Name]
		}
	}
	return n
}

// IsLocalEphemeral is the kubelet's IsLocalEphemeralVolume (pkg/volume/
// util of v1.36): the volumes whose files count for the pod's ephemeral
// storage.
func IsLocalEphemeral(v *corev1.Volume) bool {
	return v.GitRepo != nil ||
		(v.EmptyDir != nil && v.EmptyDir.Medium == corev1.StorageMediumDefault) ||
		v.ConfigMap != nil
}

// Measure is what pod p holds on the cell's disk now. A figure that
// cannot be read counts as nothing and is logged.
func Measure(ctx context.Context, cfg Config, p *corev1.Pod, log *slog.Logger) Usage {
	u := Usage{Containers: map[string]uint64{}, Volumes: map[string]uint64{}}
	dirUsed := func(dir string) uint64 {
		d, err := DirUsage(dir)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			log.WarnContext(ctx, "measuring the pod's local storage", "dir", dir, "error", err)
		}
		return d.Bytes
	}
	tasks := cfg.Pod.Tasks()
	for _, c := range allContainers(p) {
		var n uint64
		if lu, ok := tasks[c.Name].(runtime.LayerUser); ok {
			if d, err := lu.WritableLayerUsage(ctx); err != nil {
				log.WarnContext(ctx, "measuring a container's writable layer", "container", c.Name, "error", err)
			} else {
				n += d.Bytes
			}
		}
		if cfg.LogDir != nil {
			n += dirUsed(cfg.LogDir(c.Name))
		}
		u.Containers[c.Name] = n
	}
	dirs := cfg.Pod.VolumeDirs()
	for i := range p.Spec.Volumes {
		v := &p.Spec.Volumes[i]
		if dir, ok := dirs[v.Name]; ok && (v.EmptyDir != nil || IsLocalEphemeral(v)) {
			u.Volumes[v.Name] = dirUsed(dir)
		}
	}
	if cfg.EtcDir != "" {
		u.Etc = dirUsed(cfg.EtcDir)
	}
	return u
}

// allContainers are p's init and app containers.
func allContainers(p *corev1.Pod) []*corev1.Container {
	var out []*corev1.Container
	for i := range p.Spec.InitContainers {
		out = append(out, &p.Spec.InitContainers[i])
	}
	for i := range p.Spec.Containers {
		out = append(out, &p.Spec.Containers[i])
	}
	return out
}

// Limited reports whether p has a limit Check enforces: an emptyDir
// sizeLimit or a container's ephemeral-storage limit.
func Limited(p *corev1.Pod) bool {
	for i := range p.Spec.Volumes {
		if ed := p.Spec.Volumes[i].EmptyDir; ed != nil && ed.SizeLimit != nil && ed.SizeLimit.Sign() > 0 {
			return true
		}
	}
	for _, c := range allContainers(p) {
		if _, ok := c.Resources.Limits[corev1.ResourceEphemeralStorage]; ok {
			return true
		}
	}
	return false
}

// Check is the message of the kubelet's eviction of pod p holding u, in
// the kubelet's order (emptyDir volumes, the pod, its containers); "":
// within its limits.
func Check(p *corev1.Pod, u Usage) string {
	for i := range p.Spec.Volumes {
		v := &p.Spec.Volumes[i]
		if v.EmptyDir == nil || v.EmptyDir.SizeLimit == nil || v.EmptyDir.SizeLimit.Sign() <= 0 {
			continue
		}
		used, ok := u.Volumes[v.Name]
		if ok && quantity(used).Cmp(*v.EmptyDir.SizeLimit) > 0 {
			return fmt.Sprintf("Usage of EmptyDir volume %q exceeds the limit %q. ", v.Name, v.EmptyDir.SizeLimit.String())
		}
	}
	if limit, ok := podLimit(p); ok {
		if quantity(u.Total(p)).Cmp(limit) > 0 {
			return fmt.Sprintf("Pod ephemeral local storage usage exceeds the total limit of containers %s. ", limit.String())
		}
	}
	// The kubelet checks the regular containers only.
	for i := range p.Spec.Containers {
		c := &p.Spec.Containers[i]
		limit := c.Resources.Limits.StorageEphemeral()
		if limit == nil || limit.Value() == 0 {
			continue
		}
		if used, ok := u.Containers[c.Name]; ok && limit.Cmp(*quantity(used)) < 0 {
			return fmt.Sprintf("Container %s exceeded its local ephemeral storage limit %q. ", c.Name, limit.String())
		}
	}
	return ""
}

func quantity(n uint64) *resource.Quantity {
	return resource.NewQuantity(int64(min(n, 1<<62)), resource.BinarySI) //nolint:gosec // G115: bounded above
}

// podLimit is the ephemeral-storage limit of p as a whole as the kubelet's
// eviction reckons it (component-helpers' PodLimits): the regular
// containers' and sidecars' limits together or an init container's with
// the sidecars started before it, whichever is more, plus the pod's
// overhead; a container without a limit adds nothing, and a pod none of
// whose containers has one has none (false).
func podLimit(p *corev1.Pod) (resource.Quantity, bool) {
	const name = corev1.ResourceEphemeralStorage
	found := false
	get := func(c *corev1.Container) resource.Quantity {
		q, ok := c.Resources.Limits[name]
		if !ok {
			return resource.Quantity{}
		}
		found = true
		return q
	}
	var regular, sidecars, inits resource.Quantity
	for i := range p.Spec.Containers {
		regular.Add(get(&p.Spec.Containers[i]))
	}
	for i := range p.Spec.InitContainers {
		c := &p.Spec.InitContainers[i]
		q := get(c)
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			regular.Add(q)
			sidecars.Add(q)
			if sidecars.Cmp(inits) > 0 {
				inits = sidecars.DeepCopy()
			}
			continue
		}
		q.Add(sidecars)
		if q.Cmp(inits) > 0 {
			inits = q
		}
	}
	if !found {
		return resource.Quantity{}, false
	}
	limit := regular
	if inits.Cmp(limit) > 0 {
		limit = inits
	}
	if o, ok := p.Spec.Overhead[name]; ok && !limit.IsZero() {
		limit.Add(o)
	}
	return limit, true
}

// DirUsage is what the tree at dir holds, as `du -x` counts it: the
// blocks allocated to every file and directory (each inode once), and the
// inodes, without crossing into another filesystem. Entries that vanish
// while it walks are skipped.
func DirUsage(dir string) (runtime.DiskUsage, error) {
	var root syscall.Stat_t
	if err := syscall.Lstat(dir, &root); err != nil {
		return runtime.DiskUsage{}, fmt.Errorf("reading %s: %w", dir, err)
	}
	var u runtime.DiskUsage
	seen := map[uint64]bool{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		var st syscall.Stat_t
		if err := syscall.Lstat(path, &st); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return fmt.Errorf("reading %s: %w", path, err)
		}
		if st.Dev != root.Dev {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if seen[st.Ino] {
			return nil
		}
		seen[st.Ino] = true
		u.Inodes++
		u.Bytes += uint64(st.Blocks) * 512 //nolint:gosec // G115: a block count is not negative
		return nil
	})
	if err != nil {
		return runtime.DiskUsage{}, fmt.Errorf("walking %s: %w", dir, err)
	}
	return u, nil
}
