package server

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"

	"github.com/kipcell/kip/cell/api"
	"github.com/kipcell/kip/cell/api/logs"
	"github.com/kipcell/kip/cell/clusterip"
	"github.com/kipcell/kip/cell/pod"
	"github.com/kipcell/kip/cell/podnet"
	"github.com/kipcell/kip/cell/runtime"
)

// Config is what a Server needs.
type Config struct {
	Pod  *pod.Manager
	Logs *logs.Store
	// Services programs the ClusterIP services the host sends
	// (ApplyServices); nil means the cell programs none, and NoServices
	// says why.
	Services   *clusterip.Proxy
	NoServices string
	// DiskDir is a directory on the cell's disk (the agent's state
	// directory) whose filesystem Stats reports; empty: none.
	DiskDir string
	// EtcDir holds the pod's /etc files (pod.Config.EtcDir), counted in
	// its ephemeral storage; empty: none.
	EtcDir string
	// Notices are the cloud's notices about the instance that WatchStatus
	// sends (WatchInstanceMetadata fills them); nil: none.
	Notices *Notices
	Logger  *slog.Logger
}

// Server implements api.Cell over a pod.Manager.
type Server struct {
	cfg Config
	log *slog.Logger

	statsMu sync.Mutex
	last    map[string]runtime.Metrics // previous sample per container ID
}

var _ api.Cell = (*Server)(nil)

// New returns a Server.
func New(cfg Config) *Server {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Server{cfg: cfg, log: cfg.Logger, last: map[string]runtime.Metrics{}}
}

// ApplyPod implements api.Cell.
func (s *Server) ApplyPod(ctx context.Context, req *api.PodRequest) (int64, error) {
	if req == nil {
		req = &api.PodRequest{}
	}
	var p corev1.Pod
	if err := json.Unmarshal(req.PodJSON, &p); err != nil {
		return 0, status.Errorf(codes.InvalidArgument, "decoding pod: %v", err)
	}
	d := pod.Desired{Generation: req.Generation, Pod: &p, PodAddress: req.PodAddress, SeccompDefault: req.SeccompDefault}
	if r := req.LogRotation; r != nil {
		d.LogRotation = logs.Rotation{MaxSize: r.MaxSizeBytes, MaxFiles: int(r.MaxFiles)}
	}
	if len(req.Env) > 0 {
		d.Env = map[string][]pod.EnvVar{}
		for name, list := range req.Env {
			vars := []pod.EnvVar{}
			for _, v := range list {
				vars = append(vars, pod.EnvVar{Name: v.Name, Value: v.Value})
			}
			d.Env[name] = vars
		}
	}
	if len(req.Volumes) > 0 {
		d.Volumes = map[string]pod.VolumeFiles{}
		for name, vf := range req.Volumes {
			d.Volumes[name] = pod.VolumeFiles{Files: vf.Files, Modes: vf.Modes}
		}
	}
	if len(req.Disks) > 0 {
		d.Disks = map[string]pod.Disk{}
		for name, disk := range req.Disks {
			d.Disks[name] = pod.Disk{
				Serial: disk.Serial, Path: disk.Path, FSType: disk.FSType, ReadOnly: disk.ReadOnly, Block: disk.Block,
				MountOptions: disk.MountOptions,
			}
		}
	}
	if len(req.Shares) > 0 {
		d.Shares = map[string]pod.Share{}
		for name, s := range req.Shares {
			d.Shares[name] = pod.Share{Server: s.Server, Path: s.Path, ReadOnly: s.ReadOnly, Options: s.MountOptions}
		}
	}
	if dns := req.ClusterDNS; dns != nil {
		d.DNS = pod.ClusterDNS{Servers: dns.Servers, Domain: dns.Domain}
	}
	for _, c := range req.RegistryCredentials {
		d.Credentials = append(d.Credentials, runtime.Credential{
			Server: c.Server, Username: c.Username, Password: c.Password, IdentityToken: c.IdentityToken,
		})
	}
	gen, err := s.cfg.Pod.Apply(ctx, d)
	switch {
	case errors.Is(err, pod.ErrDeleted), errors.Is(err, pod.ErrAnotherPod):
		return 0, status.Error(codes.FailedPrecondition, err.Error())
	case errors.Is(err, pod.ErrNoPodNetwork):
		// Not supported here: the host sends the pod again without
		// (api.PodRequest.PodAddress).
		return 0, status.Error(codes.Unimplemented, err.Error())
	case err != nil:
		return 0, status.Error(codes.InvalidArgument, err.Error())
	}
	if gen == req.Generation {
		s.log.InfoContext(ctx, "applied pod", "pod", p.Namespace+"/"+p.Name, "generation", gen)
	}
	return gen, nil
}

// WatchStatus implements api.Cell: the current status first, then
// every change; changes that come faster than the host reads are
// coalesced into the latest. Each update carries the pod events not yet
// sent (see pod.Manager.Events): events wake the stream too, and those a
// broken stream did not send go with the next subscription's first update.
// Each also carries the instance's notices in force (Config.Notices),
// whose changes wake it as well; its seq counts both; and the UID of the
// pod the agent runs, empty until its first ApplyPod (a standby cell).
func (s *Server) WatchStatus(ctx context.Context, send func(*api.StatusUpdate) error) error {
	var sent uint64
	for {
		data, gen, podSeq, changed := s.cfg.Pod.Status()
		notices, noticesSeq, noticesChanged := s.cfg.Notices.snapshot()
		seq := podSeq + noticesSeq
		events := s.cfg.Pod.Events()
		if seq != sent {
			u := &api.StatusUpdate{StatusJSON: data, Generation: gen, Seq: seq, Events: podEvents(events), Notices: notices,
				PodUID: s.cfg.Pod.PodUID()}
			if err := send(u); err != nil {
				return err
			}
			if len(events) > 0 {
				s.cfg.Pod.AckEvents(events[len(events)-1].Seq)
			}
			sent = seq
		}
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		case <-noticesChanged:
		}
	}
}

// Logs implements api.Cell.
func (s *Server) Logs(ctx context.Context, req api.LogsOptions, w io.Writer) error {
	name := req.Container
	if name == "" {
		name = s.cfg.Pod.DefaultContainer()
	}
	path, err := s.cfg.Pod.LogPath(name, req.Previous)
	if err != nil {
		if errors.Is(err, pod.ErrNoContainer) {
			return status.Error(codes.NotFound, err.Error())
		}
		return status.Error(codes.FailedPrecondition, err.Error())
	}
	opts := logs.Options{
		Follow: req.Follow, TailLines: req.TailLines, Timestamps: req.Timestamps, LimitBytes: req.LimitBytes,
	}
	if ss := req.SinceSeconds; ss > 0 {
		opts.Since = time.Now().Add(-time.Duration(ss) * time.Second)
	}
	if !req.SinceTime.IsZero() {
		opts.Since = req.SinceTime
	}
	if err := s.cfg.Logs.Read(ctx, path, opts, w); err != nil {
		if errors.Is(err, logs.ErrNotFound) {
			return status.Error(codes.NotFound, err.Error())
		}
		return status.Error(codes.Internal, err.Error())
	}
	return nil
}

// DeletePod implements api.Cell: each container stops within grace, or
// within the pod's own terminationGracePeriodSeconds when grace is
// negative. Deletion goes on if the call's context ends first; a repeated
// call waits for the same deletion.
func (s *Server) DeletePod(ctx context.Context, grace time.Duration) error {
	var g *time.Duration
	if grace >= 0 {
		g = &grace
	}
	done := make(chan error, 1)
	go func() { done <- s.cfg.Pod.Delete(context.WithoutCancel(ctx), g) }()
	select {
	case err := <-done:
		if err != nil {
			return status.Error(codes.Internal, err.Error())
		}
		return nil
	case <-ctx.Done():
		return status.FromContextError(ctx.Err()).Err()
	}
}

// PortForward implements api.Cell: it connects to 127.0.0.1:port in the
// pod's network namespace and copies both ways.
func (s *Server) PortForward(ctx context.Context, stream api.PortForwardStream) error {
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	port := first.Port
	if port <= 0 || port > 65535 {
		return status.Errorf(codes.InvalidArgument, "port %d out of range", port)
	}
	conn, err := podnet.DialContext(ctx, &net.Dialer{}, s.cfg.Pod.NetNS(), "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(int(port))))
	if err != nil {
		return status.Errorf(codes.Unavailable, "connecting to port %d: %v", port, err)
	}
	defer conn.Close()
	if len(first.Data) > 0 {
		if _, err := conn.Write(first.Data); err != nil {
			return status.Errorf(codes.Unavailable, "writing to port %d: %v", port, err)
		}
	}
	errc := make(chan error, 2)
	go func() {
		for {
			f, err := stream.Recv()
			if err != nil {
				errc <- nil
				return
			}
			if len(f.Data) > 0 {
				if _, err := conn.Write(f.Data); err != nil {
					errc <- err
					return
				}
			}
			if f.Close {
				if tc, ok := conn.(interface{ CloseWrite() error }); ok {
					_ = tc.CloseWrite()
				}
			}
		}
	}()
	go func() {
		buf := make([]byte, 32<<10)
		for {
			n, err := conn.Read(buf)
			if n > 0 {
				if serr := stream.Send(&api.PortForwardFrame{Port: port, Data: append([]byte(nil), buf[:n]...)}); serr != nil {
					errc <- serr
					return
				}
			}
			if err != nil {
				errc <- stream.Send(&api.PortForwardFrame{Port: port, Close: true})
				return
			}
		}
	}()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		return nil
	}
}

// Exec implements api.Cell.
func (s *Server) Exec(ctx context.Context, stream api.ExecStream) error {
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	start := first.Start
	if start == nil || len(start.Command) == 0 {
		return status.Error(codes.InvalidArgument, "the first message must carry start with a command")
	}
	name := start.Container
	if name == "" {
		name = s.cfg.Pod.DefaultContainer()
	}
	task, err := s.cfg.Pod.Task(name)
	if err != nil {
		if errors.Is(err, pod.ErrNoContainer) {
			return status.Error(codes.NotFound, err.Error())
		}
		return status.Error(codes.FailedPrecondition, err.Error())
	}
	out := &execSender{stream: stream}
	spec := runtime.ExecSpec{Args: start.Command, TTY: start.TTY}
	if start.Stdout || start.TTY {
		spec.Stdout = out.writer(false)
	}
	if start.Stderr && !start.TTY {
		spec.Stderr = out.writer(true)
	}
	var stdinW *io.PipeWriter
	var stdinEOF chan struct{}
	if start.Stdin {
		r, w := io.Pipe()
		stdinW, stdinEOF = w, make(chan struct{})
		spec.Stdin = &eofReader{r: r, eof: stdinEOF}
	}
	proc, err := task.Exec(ctx, spec)
	if err != nil {
		return status.Error(codes.Internal, err.Error())
	}
	log := s.log.With("container", name)
	log.InfoContext(ctx, "exec started", "command", start.Command, "tty", start.TTY)
	if r := first.Resize; r != nil && start.TTY {
		_ = proc.Resize(ctx, r.Width, r.Height)
	}
	go s.execInput(ctx, stream, proc, stdinW, stdinEOF, first)
	code, err := proc.Wait(ctx)
	if stdinW != nil {
		_ = stdinW.CloseWithError(io.EOF)
	}
	if err != nil {
		return status.Error(codes.Internal, err.Error())
	}
	log.InfoContext(ctx, "exec exited", "exit_code", code)
	return out.send(&api.ExecOutput{Exit: &api.ExitStatus{Code: code}})
}

// execInput forwards stdin, resizes and the end of stdin to the process.
func (s *Server) execInput(ctx context.Context, stream api.ExecStream, proc runtime.Process, stdinW *io.PipeWriter, stdinEOF chan struct{}, first *api.ExecInput) {
	closeStdin := func() {
		if stdinW == nil {
			return
		}
		_ = stdinW.Close()
		// The copier has written all stdin once it read EOF.
		select {
		case <-stdinEOF:
		case <-ctx.Done():
		case <-time.After(5 * time.Second):
		}
		_ = proc.CloseStdin(ctx)
		stdinW = nil
	}
	handle := func(in *api.ExecInput) {
		if len(in.Stdin) > 0 && stdinW != nil {
			_, _ = stdinW.Write(in.Stdin)
		}
		if r := in.Resize; r != nil && in != first {
			_ = proc.Resize(ctx, r.Width, r.Height)
		}
		if in.CloseStdin {
			closeStdin()
		}
	}
	handle(first)
	for {
		in, err := stream.Recv()
		if err != nil {
			// The host went away or half-closed: no more stdin.
			closeStdin()
			return
		}
		handle(in)
	}
}

// eofReader closes eof when its reader returns EOF.
type eofReader struct {
	r    io.Reader
	eof  chan struct{}
	once sync.Once
}

func (e *eofReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err != nil {
		e.once.Do(func() { close(e.eof) })
	}
	return n, err
}

// execSender serialises sends on an exec or attach stream.
type execSender struct {
	mu     sync.Mutex
	stream interface {
		Send(*api.ExecOutput) error
	}
}

func (e *execSender) send(m *api.ExecOutput) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.stream.Send(m)
}

// writer is the process's stdout (or stderr) on the stream, in messages
// of at most api.MaxChunk: the host takes messages of a few MiB at most
// (host/cellclient.MaxAgentMessage).
func (e *execSender) writer(stderr bool) io.Writer {
	return writerFunc(func(p []byte) (int, error) {
		return api.InChunks(p, func(b []byte) error {
			m := &api.ExecOutput{Stdout: b}
			if stderr {
				m = &api.ExecOutput{Stderr: b}
			}
			return e.send(m)
		})
	})
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
