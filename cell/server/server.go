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
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"

	"github.com/kipcell/kip/cell/api/cellv1"
	"github.com/kipcell/kip/cell/clusterip"
	"github.com/kipcell/kip/cell/api/logs"
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

// Server implements cellv1.CellServer over a pod.Manager.
type Server struct {
	cellv1.UnimplementedCellServer
	cfg Config
	log *slog.Logger

	statsMu sync.Mutex
	last    map[string]runtime.Metrics // previous sample per container ID
}

var _ cellv1.CellServer = (*Server)(nil)

// New returns a Server.
func New(cfg Config) *Server {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Server{cfg: cfg, log: cfg.Logger, last: map[string]runtime.Metrics{}}
}

// ApplyPod implements cellv1.CellServer.
func (s *Server) ApplyPod(ctx context.Context, req *cellv1.ApplyPodRequest) (*cellv1.ApplyPodResponse, error) {
	var p corev1.Pod
	if err := json.Unmarshal(req.GetPodJson(), &p); err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "decoding pod: %v", err)
	}
	d := pod.Desired{Generation: req.GetGeneration(), Pod: &p, PodAddress: req.GetPodAddress(), SeccompDefault: req.GetSeccompDefault()}
	if r := req.GetContainerLogRotation(); r != nil {
		d.LogRotation = logs.Rotation{MaxSize: r.GetMaxSizeBytes(), MaxFiles: int(r.GetMaxFiles())}
	}
	if len(req.GetEnv()) > 0 {
		d.Env = map[string][]pod.EnvVar{}
		for name, list := range req.GetEnv() {
			vars := []pod.EnvVar{}
			for _, v := range list.GetVars() {
				vars = append(vars, pod.EnvVar{Name: v.GetName(), Value: v.GetValue()})
			}
			d.Env[name] = vars
		}
	}
	if len(req.GetVolumes()) > 0 {
		d.Volumes = map[string]pod.VolumeFiles{}
		for name, vf := range req.GetVolumes() {
			d.Volumes[name] = pod.VolumeFiles{Files: vf.GetFiles(), Modes: vf.GetModes()}
		}
	}
	if dns := req.GetClusterDns(); dns != nil {
		d.DNS = pod.ClusterDNS{Servers: dns.GetServers(), Domain: dns.GetDomain()}
	}
	for _, c := range req.GetRegistryCredentials() {
		d.Credentials = append(d.Credentials, runtime.Credential{
			Server: c.GetServer(), Username: c.GetUsername(), Password: c.GetPassword(), IdentityToken: c.GetIdentityToken(),
		})
	}
	gen, err := s.cfg.Pod.Apply(ctx, d)
	switch {
	case errors.Is(err, pod.ErrDeleted), errors.Is(err, pod.ErrAnotherPod):
		return nil, status.Error(codes.FailedPrecondition, err.Error())
	case errors.Is(err, pod.ErrNoPodNetwork):
		// Not supported here: the host sends the pod again without
		// (cellv1.ApplyPodRequest.pod_address).
		return nil, status.Error(codes.Unimplemented, err.Error())
	case err != nil:
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	if gen == req.GetGeneration() {
		s.log.InfoContext(ctx, "applied pod", "pod", p.Namespace+"/"+p.Name, "generation", gen)
	}
	return &cellv1.ApplyPodResponse{Generation: gen}, nil
}

// WatchStatus implements cellv1.CellServer: the current status first, then
// every change; changes that come faster than the host reads are
// coalesced into the latest. Each update carries the pod events not yet
// sent (see pod.Manager.Events): events wake the stream too, and those a
// broken stream did not send go with the next subscription's first update.
// Each also carries the instance's notices in force (Config.Notices),
// whose changes wake it as well; its seq counts both; and the UID of the
// pod the agent runs, empty until its first ApplyPod (a standby cell).
func (s *Server) WatchStatus(_ *cellv1.WatchStatusRequest, stream cellv1.Cell_WatchStatusServer) error {
	ctx := stream.Context()
	var sent uint64
	for {
		data, gen, podSeq, changed := s.cfg.Pod.Status()
		notices, noticesSeq, noticesChanged := s.cfg.Notices.snapshot()
		seq := podSeq + noticesSeq
		events := s.cfg.Pod.Events()
		if seq != sent {
			u := &cellv1.PodStatusUpdate{StatusJson: data, Generation: gen, Seq: seq, Events: podEvents(events), Notices: notices,
				PodUid: s.cfg.Pod.PodUID()}
			if err := stream.Send(u); err != nil {
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

// Logs implements cellv1.CellServer.
func (s *Server) Logs(req *cellv1.LogsRequest, stream cellv1.Cell_LogsServer) error {
	name := req.GetContainer()
	if name == "" {
		name = s.cfg.Pod.DefaultContainer()
	}
	path, err := s.cfg.Pod.LogPath(name, req.GetPrevious())
	if err != nil {
		if errors.Is(err, pod.ErrNoContainer) {
			return status.Error(codes.NotFound, err.Error())
		}
		return status.Error(codes.FailedPrecondition, err.Error())
	}
	opts := logs.Options{
		Follow: req.GetFollow(), TailLines: req.GetTailLines(), Timestamps: req.GetTimestamps(), LimitBytes: req.GetLimitBytes(),
	}
	if ss := req.GetSinceSeconds(); ss > 0 {
		opts.Since = time.Now().Add(-time.Duration(ss) * time.Second)
	}
	if st := req.GetSinceTime(); st != nil {
		opts.Since = st.AsTime()
	}
	w := &chunkWriter{send: func(b []byte) error { return stream.Send(&cellv1.LogChunk{Data: b}) }}
	if err := s.cfg.Logs.Read(stream.Context(), path, opts, w); err != nil {
		if errors.Is(err, logs.ErrNotFound) {
			return status.Error(codes.NotFound, err.Error())
		}
		return status.Error(codes.Internal, err.Error())
	}
	return nil
}

type chunkWriter struct{ send func([]byte) error }

func (w *chunkWriter) Write(p []byte) (int, error) {
	return inChunks(p, w.send)
}

// MaxChunk is the most output (of logs, exec, attach, port-forwards) the
// agent puts in one message: the host takes messages of a few MiB at most
// (host/cellclient.MaxAgentMessage).
const MaxChunk = 64 << 10

// inChunks sends a copy of p in pieces of at most MaxChunk.
func inChunks(p []byte, send func([]byte) error) (int, error) {
	n := 0
	for len(p) > 0 {
		c := p[:min(len(p), MaxChunk)]
		if err := send(append([]byte(nil), c...)); err != nil {
			return n, err
		}
		n, p = n+len(c), p[len(c):]
	}
	return n, nil
}

// DeletePod implements cellv1.CellServer. Deletion goes on if the call's
// context ends first; a repeated call waits for the same deletion.
func (s *Server) DeletePod(ctx context.Context, req *cellv1.DeletePodRequest) (*cellv1.DeletePodResponse, error) {
	var grace *time.Duration
	if g := req.GetGracePeriodSeconds(); g >= 0 {
		d := time.Duration(g) * time.Second
		grace = &d
	}
	done := make(chan error, 1)
	go func() { done <- s.cfg.Pod.Delete(context.WithoutCancel(ctx), grace) }()
	select {
	case err := <-done:
		if err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
		return &cellv1.DeletePodResponse{}, nil
	case <-ctx.Done():
		return nil, status.FromContextError(ctx.Err()).Err()
	}
}

// PortForward implements cellv1.CellServer: it connects to 127.0.0.1:port
// in the pod's network namespace and copies both ways.
func (s *Server) PortForward(stream cellv1.Cell_PortForwardServer) error {
	// Headers at once commit the call: the host's gRPC does not retry a
	// stream the agent has seen (host/cellclient's retryOnce).
	if err := stream.SendHeader(metadata.MD{}); err != nil {
		return err
	}
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	port := first.GetPort()
	if port <= 0 || port > 65535 {
		return status.Errorf(codes.InvalidArgument, "port %d out of range", port)
	}
	ctx := stream.Context()
	conn, err := podnet.DialContext(ctx, &net.Dialer{}, s.cfg.Pod.NetNS(), "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(int(port))))
	if err != nil {
		return status.Errorf(codes.Unavailable, "connecting to port %d: %v", port, err)
	}
	defer conn.Close()
	if len(first.GetData()) > 0 {
		if _, err := conn.Write(first.GetData()); err != nil {
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
			if len(f.GetData()) > 0 {
				if _, err := conn.Write(f.GetData()); err != nil {
					errc <- err
					return
				}
			}
			if f.GetClose() {
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
				if serr := stream.Send(&cellv1.PortForwardFrame{Port: port, Data: append([]byte(nil), buf[:n]...)}); serr != nil {
					errc <- serr
					return
				}
			}
			if err != nil {
				errc <- stream.Send(&cellv1.PortForwardFrame{Port: port, Close: true})
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

// Exec implements cellv1.CellServer.
func (s *Server) Exec(stream cellv1.Cell_ExecServer) error {
	// Headers at once commit the call: the host's gRPC does not retry a
	// stream the agent has seen (host/cellclient's retryOnce).
	if err := stream.SendHeader(metadata.MD{}); err != nil {
		return err
	}
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	start := first.GetStart()
	if start == nil || len(start.GetCommand()) == 0 {
		return status.Error(codes.InvalidArgument, "the first message must carry start with a command")
	}
	name := start.GetContainer()
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
	ctx := stream.Context()
	out := &execSender{stream: stream}
	spec := runtime.ExecSpec{Args: start.GetCommand(), TTY: start.GetTty()}
	if start.GetStdout() || start.GetTty() {
		spec.Stdout = out.writer(false)
	}
	if start.GetStderr() && !start.GetTty() {
		spec.Stderr = out.writer(true)
	}
	var stdinW *io.PipeWriter
	var stdinEOF chan struct{}
	if start.GetStdin() {
		r, w := io.Pipe()
		stdinW, stdinEOF = w, make(chan struct{})
		spec.Stdin = &eofReader{r: r, eof: stdinEOF}
	}
	proc, err := task.Exec(ctx, spec)
	if err != nil {
		return status.Error(codes.Internal, err.Error())
	}
	log := s.log.With("container", name)
	log.InfoContext(ctx, "exec started", "command", start.GetCommand(), "tty", start.GetTty())
	if r := first.GetResize(); r != nil && start.GetTty() {
		_ = proc.Resize(ctx, r.GetWidth(), r.GetHeight())
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
	return out.send(&cellv1.ExecOutput{Exit: &cellv1.ExitStatus{Code: code}})
}

// execInput forwards stdin, resizes and the end of stdin to the process.
func (s *Server) execInput(ctx context.Context, stream cellv1.Cell_ExecServer, proc runtime.Process, stdinW *io.PipeWriter, stdinEOF chan struct{}, first *cellv1.ExecInput) {
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
	handle := func(in *cellv1.ExecInput) {
		if len(in.GetStdin()) > 0 && stdinW != nil {
			_, _ = stdinW.Write(in.GetStdin())
		}
		if r := in.GetResize(); r != nil && in != first {
			_ = proc.Resize(ctx, r.GetWidth(), r.GetHeight())
		}
		if in.GetCloseStdin() {
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
		Send(*cellv1.ExecOutput) error
	}
}

func (e *execSender) send(m *cellv1.ExecOutput) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.stream.Send(m)
}

func (e *execSender) writer(stderr bool) io.Writer {
	return writerFunc(func(p []byte) (int, error) {
		return inChunks(p, func(b []byte) error {
			m := &cellv1.ExecOutput{Stdout: b}
			if stderr {
				m = &cellv1.ExecOutput{Stderr: b}
			}
			return e.send(m)
		})
	})
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
