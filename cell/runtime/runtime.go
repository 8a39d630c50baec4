package runtime

import (
	"context"
	"errors"
	"io"
	"syscall"
	"time"
)

// Runtime is what the pod logic needs from a container runtime: one cell's
// images and containers. Implementations are safe for concurrent use.
type Runtime interface {
	// EnsureImage makes ref available locally according to policy and
	// returns it. Errors wrap ErrImagePull (the registry refused or could
	// not be reached; the message says why) or ErrImageNeverPull.
	EnsureImage(ctx context.Context, ref string, policy PullPolicy, creds []Credential) (Image, error)
	// Start creates a container from spec and starts its process. A
	// container of the same ID that an earlier agent left (it started the
	// attempt but died before recording it) is removed first.
	Start(ctx context.Context, spec ContainerSpec) (Task, error)
	// Reattach takes over a container attempt an earlier agent of the cell
	// started (the agent restarted; the container kept running): its
	// output goes to spec.Stdout and spec.Stderr from now on, spec.Stdin
	// (when the attempt has a stdin) to its stdin, and its exit is
	// observed as if this agent had started it, even one that happened
	// while no agent ran. Errors wrap ErrNotFound when the container or
	// its process is gone (whatever is left of it is removed).
	Reattach(ctx context.Context, spec ReattachSpec) (Task, error)
	// MountImage mounts a read-only view of the root filesystem of img
	// (as EnsureImage returned it) at target, a directory it makes: an
	// image volume. A target already mounted is left as it is, so that a
	// call again (a container's retry, a restarted agent) is harmless.
	// The mount is made by the calling process.
	MountImage(ctx context.Context, img Image, target string) error
	// UnmountImage unmounts what MountImage mounted at target and releases
	// the view; a target with nothing mounted is not an error.
	UnmountImage(ctx context.Context, target string) error
	// Cleanup removes every container, image and other trace of the cell
	// from the runtime (image views too, whose mounts are the caller's to
	// undo first). Running tasks are killed.
	Cleanup(ctx context.Context) error
}

// PullPolicy is core/v1 PullPolicy.
type PullPolicy string

// Pull policies.
const (
	PullAlways       PullPolicy = "Always"
	PullIfNotPresent PullPolicy = "IfNotPresent"
	PullNever        PullPolicy = "Never"
)

// Errors of EnsureImage.
var (
	ErrImagePull      = errors.New("pulling image failed")
	ErrImageNeverPull = errors.New("image not present with pull policy Never")
)

// ErrNotFound is Reattach's error for a container that is gone.
var ErrNotFound = errors.New("container not found")

// ReattachSpec names a running attempt to take over and where its stdio
// goes now.
type ReattachSpec struct {
	// ID is the container ID the attempt was started with.
	ID string
	// StartedAt is when the attempt started (the runtime does not keep
	// it); Task.StartedAt returns it.
	StartedAt time.Time
	// Stdout, Stderr, Stdin and TTY are as in ContainerSpec.
	Stdout, Stderr io.Writer
	Stdin          io.Reader
	TTY            bool
}

// Credential is one registry's login (imagePullSecrets, cloud registries).
type Credential struct {
	// Server is the registry host, with or without scheme, port or path
	// ("https://index.docker.io/v1/", "registry.example.com:5000").
	Server        string
	Username      string
	Password      string
	IdentityToken string
}

// Image is a pulled image.
type Image struct {
	// Ref is the normalised reference ("docker.io/library/busybox:1.36").
	Ref string
	// ID is the image's digested reference (repo@sha256:…), reported as
	// the container status imageID.
	ID string
	// Config is the part of the image config that shapes a container.
	Config ImageConfig
}

// ImageConfig is the runtime-relevant part of an OCI image config.
type ImageConfig struct {
	Entrypoint []string
	Cmd        []string
	Env        []string
	WorkingDir string
	User       string
	StopSignal string
}

// ContainerSpec is one attempt of a container, fully resolved by the pod
// logic.
type ContainerSpec struct {
	// ID is unique within the cell for as long as the container exists.
	ID string
	// Name is the pod's container name (for labels and logs).
	Name  string
	Image Image
	// Args is the process's argv (command and args already merged with the
	// image's entrypoint and cmd).
	Args []string
	// Env is added to the image's environment, replacing equal names.
	Env        []string
	WorkingDir string
	Hostname   string
	// NetNSPath is the network namespace to join (/proc/…/ns/net,
	// /var/run/netns/…); empty means a new private one.
	NetNSPath string
	// PIDNSPath is the PID namespace to join (/proc/<pid>/ns/pid): an
	// ephemeral container's target's, as the kubelet's NamespaceMode
	// TARGET, so that the debugger sees the target's processes. Empty
	// means a new one of its own.
	PIDNSPath string
	Resources Resources
	// Mounts are bind mounts into the container, in order (volumes).
	Mounts []Mount
	// Devices are block devices given to the container (block volumes).
	Devices []Device
	// Stdout and Stderr receive the process's output. They are not closed by
	// the runtime. With TTY, Stderr is unused (the terminal merges both).
	Stdout, Stderr io.Writer
	// Stdin, when set, is copied to the process's stdin until it returns
	// EOF (then the process's stdin is closed); nil means no stdin.
	Stdin io.Reader
	// TTY gives the process a terminal.
	TTY bool
	// Security is who the process runs as and what it may do. Exec'd
	// processes get the same (Task.Exec).
	Security Security
}

// Mount is a bind mount of a host file or directory into a container.
type Mount struct {
	Source      string
	Destination string
	ReadOnly    bool
}

// Device is a host's device node made in the container at Destination
// and allowed by its device cgroup: read, write and mknod, or read only.
type Device struct {
	Source      string
	Destination string
	ReadOnly    bool
}

// Resources are cgroup limits; zero means unlimited.
type Resources struct {
	MemoryLimitBytes int64
	// CPUQuotaMillis is limits.cpu in millicores (CFS quota).
	CPUQuotaMillis int64
	// CPUShares is derived from requests.cpu.
	CPUShares uint64
	// OOMScoreAdj is the container's OOM score adjustment (the kubelet's
	// by QoS class: -997 Guaranteed, 1000 BestEffort, 2 to 999
	// Burstable); zero leaves the runtime's.
	OOMScoreAdj int
}

// ExitStatus is how a process ended.
type ExitStatus struct {
	Code     int32
	ExitedAt time.Time
	// OOMKilled is set when the kernel OOM killer hit the container.
	OOMKilled bool
}

// Task is a started container.
type Task interface {
	// ID is the container ID.
	ID() string
	// Pid is the process ID of the container's first process.
	Pid() uint32
	StartedAt() time.Time
	// Exited is closed once the process has exited; Status is valid then.
	Exited() <-chan struct{}
	Status() ExitStatus
	// Signal sends sig to the first process, or with all to every process.
	Signal(ctx context.Context, sig syscall.Signal, all bool) error
	// Delete removes the container (killing it if it still runs) and its
	// rootfs. Output writers receive nothing after it returns.
	Delete(ctx context.Context) error
	// Exec starts another process in the container.
	Exec(ctx context.Context, spec ExecSpec) (Process, error)
	// Metrics reads the container's cgroup counters.
	Metrics(ctx context.Context) (Metrics, error)
	// Resize sets the size of the first process's terminal (TTY only).
	Resize(ctx context.Context, width, height uint32) error
	// CloseStdin closes the first process's stdin (after Stdin returned
	// EOF).
	CloseStdin(ctx context.Context) error
}

// ExecSpec is a process to run in a container.
type ExecSpec struct {
	Args []string
	TTY  bool
	// Stdin is nil for no stdin. With TTY, Stderr is unused.
	Stdin          io.Reader
	Stdout, Stderr io.Writer
}

// Process is an exec'd process.
type Process interface {
	Resize(ctx context.Context, width, height uint32) error
	// CloseStdin tells the process its stdin ended (after Stdin returned
	// EOF).
	CloseStdin(ctx context.Context) error
	// Wait waits for the exit and for the output to be copied, then
	// releases the process; it returns the exit code.
	Wait(ctx context.Context) (int32, error)
	Signal(ctx context.Context, sig syscall.Signal) error
}

// Metrics are a container's cgroup counters.
type Metrics struct {
	Time             time.Time
	CPUUsageNanos    uint64
	MemoryUsageBytes uint64
	MemoryWorkingSet uint64
	MemoryLimitBytes uint64
	ProcessesCurrent uint64
	// MemoryRSSBytes is anonymous memory (cgroup v2 anon, v1 total_rss),
	// the kubelet's rssBytes.
	MemoryRSSBytes  uint64
	PageFaults      uint64
	MajorPageFaults uint64
}

// DiskUsage is what a directory tree or a writable layer holds: bytes in
// use (allocated blocks) and inodes.
type DiskUsage struct {
	Bytes  uint64
	Inodes uint64
}

// LayerUser is a Task that can tell the size of its container's writable
// layer (the kubelet's rootfs usage). Containerd's tasks are; an agent
// asks by type assertion, so fakes need not be.
type LayerUser interface {
	WritableLayerUsage(ctx context.Context) (DiskUsage, error)
}
