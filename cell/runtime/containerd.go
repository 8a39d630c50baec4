package runtime

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	cgroup1stats "github.com/containerd/cgroups/v3/cgroup1/stats"
	cgroup2stats "github.com/containerd/cgroups/v3/cgroup2/stats"
	"github.com/containerd/containerd/api/types/runc/options"
	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/core/images"
	"github.com/containerd/containerd/v2/core/leases"
	"github.com/containerd/containerd/v2/core/remotes"
	"github.com/containerd/containerd/v2/core/remotes/docker"
	"github.com/containerd/containerd/v2/core/snapshots"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/containerd/v2/pkg/oci"
	"github.com/containerd/errdefs"
	"github.com/containerd/typeurl/v2"
	"github.com/distribution/reference"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// Snapshotter is the containerd snapshotter the cell uses.
const Snapshotter = "overlayfs"

// CellLabel is the label on the containers, snapshots and lease of a cell
// in a shared namespace (ContainerdConfig.Cell): its value is the cell ID.
const CellLabel = "kipcell.io/cell"

// maxID is the longest identifier containerd accepts (container and
// lease IDs).
const maxID = 76

// ContainerdConfig configures a Containerd runtime.
type ContainerdConfig struct {
	// Namespace is the containerd namespace the cell's containers live
	// in: the cell's own ("kip-<cellID>"), or, with Cell set, one shared
	// by the cells of the machine.
	Namespace string
	// Cell, when set, is the cell's ID and says that Namespace is shared
	// with other cells (the local plugin's cells, many on one machine):
	// images, their content and their unpacked snapshots are the
	// namespace's, pulled and unpacked once for all; the cell owns only
	// its containers (IDs prefixed with Cell, see containerID), their
	// rootfs snapshots and a lease named Cell on the images it uses. See
	// Cleanup for what it removes.
	Cell string
	// StateDir holds the client-side FIFOs.
	StateDir string
	// RuncRoot, when set, is runc's state directory (containerd's default
	// is /run/containerd/runc); a private daemon needs its own.
	RuncRoot string
	// InsecureRegistries are hosts (host or host:port) pulled from over
	// plain HTTP. Loopback hosts always are.
	InsecureRegistries []string
	// CgroupParent, when set, is the cgroup (a path from the root of the
	// hierarchy, "/kip/<cell ID>") each container's cgroup is made in, as
	// <CgroupParent>/<container ID>: the cell's own, whose CPU and memory
	// limits then bound its pods as an instance's size does (the local
	// plugin's cells, many on one machine). Empty: containerd's default,
	// /<Namespace>/<container ID>, on a machine that is the cell.
	CgroupParent string
	Logger       *slog.Logger
}

// Containerd is the Runtime over a containerd daemon.
type Containerd struct {
	c   *client.Client
	cfg ContainerdConfig
	log *slog.Logger
	// oomScoreAdjFloor is the lowest OOM score adjustment a container
	// gets (OOMScoreAdjFloor, read as the agent starts).
	oomScoreAdjFloor int
}

var _ Runtime = (*Containerd)(nil)

// NewContainerd returns a runtime using the connected client c. The client
// stays the caller's to close.
func NewContainerd(c *client.Client, cfg ContainerdConfig) (*Containerd, error) {
	if cfg.Namespace == "" {
		return nil, errors.New("containerd namespace is empty")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(filepath.Join(cfg.StateDir, "fifo"), 0o700); err != nil {
		return nil, fmt.Errorf("creating fifo directory: %w", err)
	}
	return &Containerd{c: c, cfg: cfg, log: cfg.Logger, oomScoreAdjFloor: OOMScoreAdjFloor()}, nil
}

func (r *Containerd) ctx(ctx context.Context) context.Context {
	return namespaces.WithNamespace(ctx, r.cfg.Namespace)
}

// shared reports whether the namespace is shared with other cells.
func (r *Containerd) shared() bool { return r.cfg.Cell != "" }

// containerID is containerd's ID of the cell's container attempt id: id
// itself in the cell's own namespace; in a shared one, "<cell>.<id>", cut
// to containerd's 76 characters with a hash of the whole when longer (a
// cell ID is up to 46 characters, a container name up to 63).
func (r *Containerd) containerID(id string) string {
	if !r.shared() {
		return id
	}
	full := r.cfg.Cell + "." + id
	if len(full) <= maxID {
		return full
	}
	sum := sha256.Sum256([]byte(full))
	h := hex.EncodeToString(sum[:8])
	return strings.TrimRight(full[:maxID-len(h)-1], "._-") + "-" + h
}

// holdImages returns ctx with the cell's lease, created if it is not
// there, for a shared namespace: what is pulled under it (content and
// unpacked snapshots) and the images added to it (holdImage) stay while
// the cell does, whatever the other cells do with the image records. The
// lease has no expiry: Cleanup deletes it.
func (r *Containerd) holdImages(ctx context.Context) (context.Context, error) {
	if !r.shared() {
		return ctx, nil
	}
	_, err := r.c.LeasesService().Create(ctx, leases.WithID(r.cfg.Cell), leases.WithLabel(CellLabel, r.cfg.Cell))
	if err != nil && !errdefs.IsAlreadyExists(err) {
		return ctx, fmt.Errorf("creating the lease of cell %s: %w", r.cfg.Cell, err)
	}
	return leases.WithLease(ctx, r.cfg.Cell), nil
}

// holdImage adds the image img (its index or manifest, which reaches
// its config, layers and unpacked snapshots through containerd's
// garbage-collection labels) to the cell's lease.
func (r *Containerd) holdImage(ctx context.Context, img client.Image) error {
	if !r.shared() {
		return nil
	}
	res := leases.Resource{ID: img.Target().Digest.String(), Type: "content"}
	if err := r.c.LeasesService().AddResource(ctx, leases.Lease{ID: r.cfg.Cell}, res); err != nil {
		return fmt.Errorf("holding image %s for cell %s: %w", img.Name(), r.cfg.Cell, err)
	}
	return nil
}

// NormalizeRef returns the fully qualified form of an image reference
// ("busybox" → "docker.io/library/busybox:latest").
func NormalizeRef(ref string) (string, error) {
	named, err := reference.ParseDockerRef(ref)
	if err != nil {
		return "", fmt.Errorf("parsing image reference %q: %w", ref, err)
	}
	return named.String(), nil
}

// EnsureImage implements Runtime.
func (r *Containerd) EnsureImage(ctx context.Context, ref string, policy PullPolicy, creds []Credential) (Image, error) {
	ctx = r.ctx(ctx)
	full, err := NormalizeRef(ref)
	if err != nil {
		return Image{}, fmt.Errorf("%w: %w", ErrImagePull, err)
	}
	// In a shared namespace the image may be another cell's already:
	// then nothing is fetched or unpacked, and the cell's lease takes a
	// reference on it; a pull under the lease adds all it writes.
	if ctx, err = r.holdImages(ctx); err != nil {
		return Image{}, err
	}
	if policy != PullAlways {
		img, err := r.c.GetImage(ctx, full)
		switch {
		case err == nil:
			if err := r.holdImage(ctx, img); err != nil {
				return Image{}, err
			}
			return r.describe(ctx, img)
		case !errdefs.IsNotFound(err):
			return Image{}, fmt.Errorf("looking up image %s: %w", full, err)
		case policy == PullNever:
			return Image{}, fmt.Errorf("image %s: %w", full, ErrImageNeverPull)
		}
	}
	start := time.Now()
	img, err := r.c.Pull(ctx, full,
		client.WithPullUnpack,
		client.WithPullSnapshotter(Snapshotter),
		client.WithResolver(r.resolver(creds)))
	if err != nil {
		return Image{}, fmt.Errorf("%w: %w", ErrImagePull, err)
	}
	r.log.DebugContext(ctx, "pulled image", "image", full, "duration", time.Since(start))
	if err := r.holdImage(ctx, img); err != nil {
		return Image{}, err
	}
	return r.describe(ctx, img)
}

func (r *Containerd) describe(ctx context.Context, img client.Image) (Image, error) {
	spec, err := img.Spec(ctx)
	if err != nil {
		return Image{}, fmt.Errorf("reading image config of %s: %w", img.Name(), err)
	}
	id := img.Target().Digest.String()
	if named, err := reference.ParseNormalizedNamed(img.Name()); err == nil {
		id = named.Name() + "@" + id
	}
	c := spec.Config
	return Image{Ref: img.Name(), ID: id, Config: ImageConfig{
		Entrypoint: c.Entrypoint, Cmd: c.Cmd, Env: c.Env, WorkingDir: c.WorkingDir, User: c.User, StopSignal: c.StopSignal,
	}}, nil
}

// resolver pulls over plain HTTP from loopback and insecure hosts and
// answers registry auth challenges with creds.
func (r *Containerd) resolver(creds []Credential) remotes.Resolver {
	byHost := map[string]Credential{}
	for _, c := range creds {
		byHost[registryHost(c.Server)] = c
	}
	authz := docker.NewDockerAuthorizer(docker.WithAuthCreds(func(host string) (string, string, error) {
		c, ok := byHost[host]
		if !ok {
			return "", "", nil
		}
		if c.IdentityToken != "" {
			// An empty user makes containerd use the secret as a refresh token.
			return "", c.IdentityToken, nil
		}
		return c.Username, c.Password, nil
	}))
	return docker.NewResolver(docker.ResolverOptions{Hosts: docker.ConfigureDefaultRegistries(
		docker.WithPlainHTTP(r.plainHTTP), docker.WithAuthorizer(authz))})
}

func (r *Containerd) plainHTTP(host string) (bool, error) {
	if ok, err := docker.MatchLocalhost(host); err == nil && ok {
		return true, nil
	}
	for _, h := range r.cfg.InsecureRegistries {
		if h == host || registryHost(h) == host {
			return true, nil
		}
	}
	return false, nil
}

// registryHost reduces a credential or flag server ("https://host:5000/v1/")
// to the host[:port] form the resolver uses, mapping Docker Hub's names to
// the host it really fetches from.
func registryHost(server string) string {
	s := strings.TrimSpace(server)
	if strings.Contains(s, "://") {
		if u, err := url.Parse(s); err == nil {
			s = u.Host
		}
	}
	s, _, _ = strings.Cut(s, "/")
	switch s {
	case "docker.io", "index.docker.io", "registry.hub.docker.com":
		return "registry-1.docker.io"
	}
	return s
}

// Start implements Runtime.
func (r *Containerd) Start(ctx context.Context, spec ContainerSpec) (Task, error) {
	ctx = r.ctx(ctx)
	img, err := r.c.GetImage(ctx, spec.Image.Ref)
	if err != nil {
		return nil, fmt.Errorf("loading image %s: %w", spec.Image.Ref, err)
	}
	specOpts := []oci.SpecOpts{
		oci.WithImageConfig(img),
		oci.WithProcessArgs(spec.Args...),
		oci.WithEnv(spec.Env),
		oci.WithMounts([]specs.Mount{{
			Destination: "/sys/fs/cgroup", Type: "cgroup", Source: "cgroup",
			Options: []string{"ro", "nosuid", "noexec", "nodev"},
		}}),
	}
	if spec.TTY {
		specOpts = append(specOpts, oci.WithTTY)
	}
	if len(spec.Mounts) > 0 {
		specOpts = append(specOpts, oci.WithMounts(bindMounts(spec.Mounts)))
	}
	if spec.WorkingDir != "" {
		specOpts = append(specOpts, oci.WithProcessCwd(spec.WorkingDir))
	}
	if spec.Hostname != "" {
		specOpts = append(specOpts, oci.WithHostname(spec.Hostname))
	}
	if spec.NetNSPath != "" {
		specOpts = append(specOpts, oci.WithLinuxNamespace(specs.LinuxNamespace{Type: specs.NetworkNamespace, Path: spec.NetNSPath}))
	}
	if spec.PIDNSPath != "" {
		specOpts = append(specOpts, oci.WithLinuxNamespace(specs.LinuxNamespace{Type: specs.PIDNamespace, Path: spec.PIDNSPath}))
	}
	if l := spec.Resources.MemoryLimitBytes; l > 0 {
		specOpts = append(specOpts, oci.WithMemoryLimit(uint64(l)))
	}
	if q := spec.Resources.CPUQuotaMillis; q > 0 {
		// A limit above the cell's own CPU runs at the cell's: cgroup v1
		// refuses a container's quota above its parent's (a local cell's
		// cgroup has its type's CPU), where a kubelet's pods run beneath no
		// quota and a limit above the node's CPU is simply never reached.
		if ceiling := cgroupCPUMillis(CgroupRoot, r.cfg.CgroupParent); ceiling > 0 && q > ceiling {
			q = ceiling
		}
		const period = 100000
		quota := q * period / 1000
		if quota < 1000 {
			quota = 1000 // the kernel's minimum
		}
		specOpts = append(specOpts, oci.WithCPUCFS(quota, period))
	}
	if s := spec.Resources.CPUShares; s > 0 {
		specOpts = append(specOpts, oci.WithCPUShares(s))
	}
	if adj := spec.Resources.OOMScoreAdj; adj != 0 {
		specOpts = append(specOpts, withOOMScoreAdj(max(adj, r.oomScoreAdjFloor)))
	}
	specOpts = append(specOpts, securityOpts(spec.Security)...)
	// After the security options, which give a privileged container the
	// host's devices: a block volume's device at its path.
	for _, d := range spec.Devices {
		perms := "rwm"
		if d.ReadOnly {
			perms = "r" // as the kubelet's makeBlockVolumes
		}
		specOpts = append(specOpts, oci.WithDevices(d.Source, d.Destination, perms))
	}
	id := r.containerID(spec.ID)
	specOpts = append(specOpts, oci.WithCgroup(r.cgroupPath(id)))
	labels := map[string]string{"kipcell.io/container": spec.Name}
	var snapOpts []snapshots.Opt
	if r.shared() {
		labels[CellLabel] = r.cfg.Cell
		snapOpts = append(snapOpts, snapshots.WithLabels(map[string]string{CellLabel: r.cfg.Cell}))
	}
	opts := []client.NewContainerOpts{
		client.WithImage(img),
		client.WithSnapshotter(Snapshotter),
		client.WithNewSnapshot(id+"-rootfs", img, snapOpts...),
		client.WithContainerLabels(labels),
	}
	if r.cfg.RuncRoot != "" {
		opts = append(opts, client.WithRuntime("io.containerd.runc.v2", &options.Options{Root: r.cfg.RuncRoot}))
	}
	opts = append(opts, client.WithNewSpec(specOpts...))
	ctr, err := r.c.NewContainer(ctx, id, opts...)
	if errdefs.IsAlreadyExists(err) {
		// An earlier agent started this attempt and died before it
		// recorded it: nobody watches that container, so it goes.
		r.log.InfoContext(ctx, "removing a container an earlier agent left", "container", id)
		if rerr := r.remove(ctx, id); rerr != nil {
			return nil, fmt.Errorf("creating container %s: %w", spec.ID, rerr)
		}
		ctr, err = r.c.NewContainer(ctx, id, opts...)
	}
	if err != nil {
		return nil, fmt.Errorf("creating container %s: %w", spec.ID, err)
	}
	t, err := r.startTask(ctx, ctr, spec)
	if err != nil {
		if derr := ctr.Delete(ctx, client.WithSnapshotCleanup); derr != nil {
			r.log.WarnContext(ctx, "deleting container after failed start", "container", spec.Name, "error", derr)
		}
		return nil, err
	}
	return t, nil
}

func (r *Containerd) startTask(ctx context.Context, ctr client.Container, spec ContainerSpec) (*containerdTask, error) {
	stdout, stderr := spec.Stdout, spec.Stderr
	if stdout == nil {
		stdout = io.Discard
	}
	if stderr == nil {
		stderr = io.Discard
	}
	cioOpts := []cio.Opt{cio.WithStreams(spec.Stdin, stdout, stderr), cio.WithFIFODir(r.fifoDir())}
	if spec.TTY {
		cioOpts = []cio.Opt{cio.WithStreams(spec.Stdin, stdout, nil), cio.WithTerminal, cio.WithFIFODir(r.fifoDir())}
	}
	task, err := ctr.NewTask(ctx, cio.NewCreator(cioOpts...))
	if err != nil {
		return nil, fmt.Errorf("creating task %s: %w", spec.ID, err)
	}
	exitCh, err := task.Wait(context.WithoutCancel(ctx))
	if err != nil {
		_, _ = task.Delete(ctx, client.WithProcessKill)
		return nil, fmt.Errorf("waiting for task %s: %w", spec.ID, err)
	}
	if err := task.Start(ctx); err != nil {
		_, _ = task.Delete(ctx, client.WithProcessKill)
		return nil, fmt.Errorf("starting task %s: %w", spec.ID, err)
	}
	t := &containerdTask{r: r, id: spec.ID, ctr: ctr, task: task, started: time.Now(), exited: make(chan struct{})}
	go t.waitExit(exitCh)
	return t, nil
}

func (r *Containerd) fifoDir() string { return filepath.Join(r.cfg.StateDir, "fifo") }

// remove deletes a container (killing its task) and its rootfs snapshot,
// also a snapshot left without its container. ctx carries the namespace.
func (r *Containerd) remove(ctx context.Context, id string) error {
	ctr, err := r.c.LoadContainer(ctx, id)
	if err == nil {
		if task, terr := ctr.Task(ctx, nil); terr == nil {
			if _, err := task.Delete(ctx, client.WithProcessKill); err != nil && !errdefs.IsNotFound(err) {
				return fmt.Errorf("deleting task %s: %w", id, err)
			}
		}
		err = ctr.Delete(ctx, client.WithSnapshotCleanup)
	}
	if err != nil && !errdefs.IsNotFound(err) {
		return fmt.Errorf("deleting container %s: %w", id, err)
	}
	if err := r.c.SnapshotService(Snapshotter).Remove(ctx, id+"-rootfs"); err != nil && !errdefs.IsNotFound(err) {
		return fmt.Errorf("removing snapshot of %s: %w", id, err)
	}
	return nil
}

// Reattach implements Runtime. The attempt's FIFOs are where Start made
// them, under StateDir, and the shim kept them open (it holds a reader of
// each output FIFO, so the container never got EPIPE; what it wrote while
// no agent read is in the pipe, up to the pipe's size, after which its
// writes blocked until now). cio.NewAttach opens them again.
func (r *Containerd) Reattach(ctx context.Context, spec ReattachSpec) (Task, error) {
	ctx = r.ctx(ctx)
	id := r.containerID(spec.ID)
	ctr, err := r.c.LoadContainer(ctx, id)
	if errdefs.IsNotFound(err) {
		return nil, fmt.Errorf("loading container %s: %w", spec.ID, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("loading container %s: %w", spec.ID, err)
	}
	stdout, stderr := spec.Stdout, spec.Stderr
	if stdout == nil {
		stdout = io.Discard
	}
	if stderr == nil {
		stderr = io.Discard
	}
	cioOpts := []cio.Opt{cio.WithStreams(spec.Stdin, stdout, stderr)}
	if spec.TTY {
		cioOpts = []cio.Opt{cio.WithStreams(spec.Stdin, stdout, nil), cio.WithTerminal}
	}
	task, err := ctr.Task(ctx, cio.NewAttach(cioOpts...))
	if errdefs.IsNotFound(err) {
		// The container is there but its process is not (the shim died
		// with the machine): nothing can be observed of it any more.
		if rerr := r.remove(ctx, id); rerr != nil {
			r.log.WarnContext(ctx, "removing a container without its process", "container", id, "error", rerr)
		}
		return nil, fmt.Errorf("loading task %s: %w", spec.ID, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("attaching to task %s: %w", spec.ID, err)
	}
	exitCh, err := task.Wait(context.WithoutCancel(ctx))
	if err != nil {
		return nil, fmt.Errorf("waiting for task %s: %w", spec.ID, err)
	}
	t := &containerdTask{r: r, id: spec.ID, ctr: ctr, task: task, started: spec.StartedAt, exited: make(chan struct{})}
	go t.waitExit(exitCh)
	return t, nil
}

// Cleanup implements Runtime: tasks and containers, images, the namespace,
// and the cgroup and runc directories containerd leaves behind.
//
// In a shared namespace (ContainerdConfig.Cell) it removes only what is
// the cell's: its containers (with their tasks and rootfs snapshots), a
// rootfs snapshot an agent left without its container, and its lease. The
// images, their content and unpacked snapshots stay in the namespace, for
// the other cells and the next one: the machine's image cache, as on a
// kubelet's node. Once no lease holds them they are kept by their image
// records alone, which containerd's garbage collection treats as roots;
// deleting an image record (ctr -n <namespace> images rm) lets it collect
// what no cell's lease still holds.
func (r *Containerd) Cleanup(ctx context.Context) error {
	if r.shared() {
		return r.cleanupShared(r.ctx(ctx))
	}
	ctx = r.ctx(ctx)
	var errs []error
	ctrs, err := r.c.Containers(ctx)
	if err != nil {
		return fmt.Errorf("listing containers: %w", err)
	}
	for _, ctr := range ctrs {
		if err := r.remove(ctx, ctr.ID()); err != nil {
			errs = append(errs, err)
		}
	}
	if err := r.removeImageViews(ctx); err != nil {
		errs = append(errs, err)
	}
	imgs, err := r.c.ImageService().List(ctx)
	if err != nil {
		errs = append(errs, fmt.Errorf("listing images: %w", err))
	}
	for i, img := range imgs {
		var opts []images.DeleteOpt
		if i == len(imgs)-1 {
			opts = append(opts, images.SynchronousDelete())
		}
		if err := r.c.ImageService().Delete(ctx, img.Name, opts...); err != nil && !errdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("deleting image %s: %w", img.Name, err))
		}
	}
	if err := r.c.NamespaceService().Delete(ctx, r.cfg.Namespace); err != nil && !errdefs.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("deleting namespace %s: %w", r.cfg.Namespace, err))
	}
	if len(errs) == 0 {
		removeNamespaceDirs(r.cfg.Namespace, r.cfg.RuncRoot)
	}
	return errors.Join(errs...)
}

// cleanupShared is Cleanup in a shared namespace; ctx carries it.
func (r *Containerd) cleanupShared(ctx context.Context) error {
	filter := "labels." + strconv.Quote(CellLabel) + "==" + strconv.Quote(r.cfg.Cell)
	ctrs, err := r.c.Containers(ctx, filter)
	if err != nil {
		return fmt.Errorf("listing the containers of cell %s: %w", r.cfg.Cell, err)
	}
	var errs []error
	for _, ctr := range ctrs {
		if err := r.remove(ctx, ctr.ID()); err != nil {
			errs = append(errs, err)
		}
	}
	// A snapshot whose container NewContainer never made (the agent died
	// in between), and the cell's image views (MountImage).
	sn := r.c.SnapshotService(Snapshotter)
	var left []string
	if err := sn.Walk(ctx, func(_ context.Context, info snapshots.Info) error {
		left = append(left, info.Name)
		return nil
	}, filter); err != nil {
		errs = append(errs, fmt.Errorf("listing the snapshots of cell %s: %w", r.cfg.Cell, err))
	}
	for _, key := range left {
		if err := sn.Remove(ctx, key); err != nil && !errdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("removing snapshot %s: %w", key, err))
		}
	}
	if err := r.c.LeasesService().Delete(ctx, leases.Lease{ID: r.cfg.Cell}); err != nil && !errdefs.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("releasing the lease of cell %s: %w", r.cfg.Cell, err))
	}
	return errors.Join(errs...)
}

// withOOMScoreAdj sets the container's OOM score adjustment, which runc
// gives its first process and an exec copies with the process spec.
func withOOMScoreAdj(adj int) oci.SpecOpts {
	return func(_ context.Context, _ oci.Client, _ *containers.Container, s *oci.Spec) error {
		if s.Process == nil {
			s.Process = &specs.Process{}
		}
		s.Process.OOMScoreAdj = &adj
		return nil
	}
}

// cgroupPath is the cgroup of container id, from the root of the
// hierarchy: under CgroupParent, else containerd's default.
func (r *Containerd) cgroupPath(id string) string {
	if r.cfg.CgroupParent != "" {
		return path.Join(r.cfg.CgroupParent, id)
	}
	return "/" + r.cfg.Namespace + "/" + id
}

// removeNamespaceDirs removes the empty per-namespace directories runc
// leaves: the cgroup parents in every hierarchy and the runc root's.
func removeNamespaceDirs(ns, runcRoot string) {
	dirs, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", "*", ns))
	if _, err := os.Stat(filepath.Join("/sys/fs/cgroup", ns)); err == nil {
		dirs = append(dirs, filepath.Join("/sys/fs/cgroup", ns))
	}
	if runcRoot == "" {
		runcRoot = "/run/containerd/runc"
	}
	dirs = append(dirs, filepath.Join(runcRoot, ns))
	for _, d := range dirs {
		_ = syscall.Rmdir(d)
	}
}

type containerdTask struct {
	r *Containerd
	// id is the attempt's ID, as the caller gave it (containerID maps
	// it to the container's).
	id      string
	ctr     client.Container
	task    client.Task
	started time.Time

	exited chan struct{}
	status ExitStatus
}

func (t *containerdTask) ID() string              { return t.id }
func (t *containerdTask) Pid() uint32             { return t.task.Pid() }
func (t *containerdTask) StartedAt() time.Time    { return t.started }
func (t *containerdTask) Exited() <-chan struct{} { return t.exited }
func (t *containerdTask) Status() ExitStatus      { return t.status }

func (t *containerdTask) waitExit(ch <-chan client.ExitStatus) {
	st := <-ch
	code, at, err := st.Result()
	if err != nil {
		code = 255
		at = time.Now()
	}
	t.status = ExitStatus{Code: int32(code), ExitedAt: at, OOMKilled: t.oomKilled()}
	close(t.exited)
}

// oomKilled says whether the kernel's OOM killer killed a process of the
// container: its cgroup's counter, which lives until the task is deleted.
func (t *containerdTask) oomKilled() bool {
	return oomKills(CgroupRoot, t.r.cgroupPath(t.ctr.ID())) > 0
}

func (t *containerdTask) Signal(ctx context.Context, sig syscall.Signal, all bool) error {
	var opts []client.KillOpts
	if all {
		opts = append(opts, client.WithKillAll)
	}
	if err := t.task.Kill(t.r.ctx(ctx), sig, opts...); err != nil && !errdefs.IsNotFound(err) {
		return fmt.Errorf("signalling container %s: %w", t.ID(), err)
	}
	return nil
}

func (t *containerdTask) Delete(ctx context.Context) error {
	ctx = t.r.ctx(ctx)
	if _, err := t.task.Delete(ctx, client.WithProcessKill); err != nil && !errdefs.IsNotFound(err) {
		return fmt.Errorf("deleting task %s: %w", t.ID(), err)
	}
	if err := t.ctr.Delete(ctx, client.WithSnapshotCleanup); err != nil && !errdefs.IsNotFound(err) {
		return fmt.Errorf("deleting container %s: %w", t.ID(), err)
	}
	return nil
}

func (t *containerdTask) Resize(ctx context.Context, w, h uint32) error {
	if err := t.task.Resize(t.r.ctx(ctx), w, h); err != nil {
		return fmt.Errorf("resizing terminal of %s: %w", t.ID(), err)
	}
	return nil
}

func (t *containerdTask) CloseStdin(ctx context.Context) error {
	if err := t.task.CloseIO(t.r.ctx(ctx), client.WithStdinCloser); err != nil && !errdefs.IsNotFound(err) {
		return fmt.Errorf("closing stdin of %s: %w", t.ID(), err)
	}
	return nil
}

func (t *containerdTask) Exec(ctx context.Context, spec ExecSpec) (Process, error) {
	ctx = t.r.ctx(ctx)
	ospec, err := t.ctr.Spec(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading spec of %s: %w", t.ID(), err)
	}
	ps := *ospec.Process
	ps.Args = spec.Args
	ps.Terminal = spec.TTY
	id := "exec-" + randomHex(6)
	stdout, stderr := spec.Stdout, spec.Stderr
	if stdout == nil {
		stdout = io.Discard
	}
	if stderr == nil && !spec.TTY {
		stderr = io.Discard
	}
	if spec.TTY {
		stderr = nil
	}
	cioOpts := []cio.Opt{cio.WithStreams(spec.Stdin, stdout, stderr), cio.WithFIFODir(t.r.fifoDir())}
	if spec.TTY {
		cioOpts = append(cioOpts, cio.WithTerminal)
	}
	p, err := t.task.Exec(ctx, id, &ps, cio.NewCreator(cioOpts...))
	if err != nil {
		return nil, fmt.Errorf("creating exec in %s: %w", t.ID(), err)
	}
	ch, err := p.Wait(context.WithoutCancel(ctx))
	if err != nil {
		_, _ = p.Delete(ctx, client.WithProcessKill)
		return nil, fmt.Errorf("waiting for exec in %s: %w", t.ID(), err)
	}
	if err := p.Start(ctx); err != nil {
		_, _ = p.Delete(ctx, client.WithProcessKill)
		return nil, fmt.Errorf("starting exec in %s: %w", t.ID(), err)
	}
	return &containerdProcess{r: t.r, p: p, exit: ch}, nil
}

func (t *containerdTask) Metrics(ctx context.Context) (Metrics, error) {
	m, err := t.task.Metrics(t.r.ctx(ctx))
	if err != nil {
		return Metrics{}, fmt.Errorf("reading metrics of %s: %w", t.ID(), err)
	}
	v, err := typeurl.UnmarshalAny(m.Data)
	if err != nil {
		return Metrics{}, fmt.Errorf("decoding metrics of %s: %w", t.ID(), err)
	}
	out := Metrics{Time: time.Now()}
	switch s := v.(type) {
	case *cgroup1stats.Metrics:
		out.CPUUsageNanos = s.GetCPU().GetUsage().GetTotal()
		mem := s.GetMemory()
		out.MemoryUsageBytes = mem.GetUsage().GetUsage()
		out.MemoryLimitBytes = mem.GetUsage().GetLimit()
		out.MemoryWorkingSet = out.MemoryUsageBytes
		if inactive := mem.GetTotalInactiveFile(); inactive < out.MemoryWorkingSet {
			out.MemoryWorkingSet -= inactive
		}
		out.MemoryRSSBytes = mem.GetTotalRSS()
		out.PageFaults = mem.GetTotalPgFault()
		out.MajorPageFaults = mem.GetTotalPgMajFault()
		out.ProcessesCurrent = s.GetPids().GetCurrent()
	case *cgroup2stats.Metrics:
		out.CPUUsageNanos = s.GetCPU().GetUsageUsec() * 1000
		mem := s.GetMemory()
		out.MemoryUsageBytes = mem.GetUsage()
		out.MemoryLimitBytes = mem.GetUsageLimit()
		out.MemoryWorkingSet = out.MemoryUsageBytes
		if inactive := mem.GetInactiveFile(); inactive < out.MemoryWorkingSet {
			out.MemoryWorkingSet -= inactive
		}
		out.MemoryRSSBytes = mem.GetAnon()
		out.PageFaults = mem.GetPgfault()
		out.MajorPageFaults = mem.GetPgmajfault()
		out.ProcessesCurrent = s.GetPids().GetCurrent()
	default:
		return Metrics{}, fmt.Errorf("decoding metrics of %s: unknown type %T", t.ID(), v)
	}
	return out, nil
}

// WritableLayerUsage implements LayerUser: the snapshotter's usage of the
// container's active snapshot (for overlayfs, its upper directory).
func (t *containerdTask) WritableLayerUsage(ctx context.Context) (DiskUsage, error) {
	ctx = t.r.ctx(ctx)
	info, err := t.ctr.Info(ctx, client.WithoutRefreshedMetadata)
	if err != nil {
		return DiskUsage{}, fmt.Errorf("reading container %s: %w", t.ID(), err)
	}
	u, err := t.r.c.SnapshotService(info.Snapshotter).Usage(ctx, info.SnapshotKey)
	if err != nil {
		return DiskUsage{}, fmt.Errorf("reading the writable layer's usage of %s: %w", t.ID(), err)
	}
	return DiskUsage{Bytes: uint64(max(u.Size, 0)), Inodes: uint64(max(u.Inodes, 0))}, nil
}

type containerdProcess struct {
	r    *Containerd
	p    client.Process
	exit <-chan client.ExitStatus
}

func (p *containerdProcess) Resize(ctx context.Context, w, h uint32) error {
	if err := p.p.Resize(p.r.ctx(ctx), w, h); err != nil {
		return fmt.Errorf("resizing exec terminal: %w", err)
	}
	return nil
}

func (p *containerdProcess) CloseStdin(ctx context.Context) error {
	if err := p.p.CloseIO(p.r.ctx(ctx), client.WithStdinCloser); err != nil && !errdefs.IsNotFound(err) {
		return fmt.Errorf("closing exec stdin: %w", err)
	}
	return nil
}

func (p *containerdProcess) Signal(ctx context.Context, sig syscall.Signal) error {
	if err := p.p.Kill(p.r.ctx(ctx), sig); err != nil && !errdefs.IsNotFound(err) {
		return fmt.Errorf("signalling exec: %w", err)
	}
	return nil
}

// Wait implements Process. If ctx ends first, the process is killed.
func (p *containerdProcess) Wait(ctx context.Context) (int32, error) {
	var st client.ExitStatus
	select {
	case st = <-p.exit:
	case <-ctx.Done():
		kctx := p.r.ctx(context.WithoutCancel(ctx))
		_ = p.p.Kill(kctx, syscall.SIGKILL)
		st = <-p.exit
	}
	// The output copies end at the FIFOs' EOF, once the shim has passed
	// on everything the process (and whatever inherited its output)
	// wrote. Delete would cancel them and drop what they have not read
	// yet, all of it when the process was quick, so wait for them first,
	// as long as the caller waits, as containerd's CRI does for an exec.
	if pio := p.p.IO(); pio != nil {
		drained := make(chan struct{})
		go func() { pio.Wait(); close(drained) }()
		select {
		case <-drained:
		case <-ctx.Done():
		}
	}
	dctx, cancel := context.WithTimeout(p.r.ctx(context.WithoutCancel(ctx)), 10*time.Second)
	defer cancel()
	if _, err := p.p.Delete(dctx); err != nil && !errdefs.IsNotFound(err) {
		return int32(st.ExitCode()), fmt.Errorf("deleting exec: %w", err)
	}
	code, _, err := st.Result()
	if err != nil {
		return 0, fmt.Errorf("waiting for exec: %w", err)
	}
	return int32(code), nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
