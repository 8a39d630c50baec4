package cellclient

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/node/api"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	utilexec "k8s.io/utils/exec"

	cellapi "github.com/kipcell/kip/cell/api"
)

// Agent is a connection to one cell's agent.
type Agent struct {
	cellID string
	cc     *grpc.ClientConn
	c      *cellapi.Client
}

// Dial connects to the agent of cellID at address (an IP or host; the port
// is cellapi.Port) with DefaultKeepalive. tlsConfig must verify the agent
// as cellID (see pki.CA.ClientTLSConfig). The connection is lazy: errors
// show on the first call.
func Dial(cellID, address string, tlsConfig *tls.Config) (*Agent, error) {
	return DialKeepalive(cellID, address, tlsConfig, DefaultKeepalive)
}

// Keepalive is how the host pings an idle agent connection: every Time,
// dropping it when no answer comes within Timeout, so that a cell gone
// silent (its packets dropped, no reset) is noticed within Time+Timeout.
// Time is at least cell/api KeepaliveMinTime, the agents' enforcement
// policy: an agent closes a connection pinged more often.
type Keepalive struct {
	Time, Timeout time.Duration
}

// DefaultKeepalive is cell/api's KeepaliveTime and KeepaliveTimeout.
var DefaultKeepalive = Keepalive{Time: cellapi.KeepaliveTime, Timeout: cellapi.KeepaliveTimeout}

// DialKeepalive is Dial with the keep-alive ka.
func DialKeepalive(cellID, address string, tlsConfig *tls.Config, ka Keepalive) (*Agent, error) {
	return dial(cellID, net.JoinHostPort(address, strconv.Itoa(cellapi.Port)), credentials.NewTLS(tlsConfig), ka)
}

// MaxAgentMessage is the largest message kip takes from a cell's agent. An
// agent sends statuses, stats, and the output of logs, exec, attach and
// port-forwards in chunks of at most 64 KiB; a cell that sends more (a
// compromised instance, an agent gone wrong) gets ResourceExhausted
// instead of a place in kip's memory. What kip sends (a pod's resolved
// volumes, the cluster's services) may be larger: maxSentToAgent.
const MaxAgentMessage = 4 << 20

// maxSentToAgent is the largest message kip sends an agent.
const maxSentToAgent = 64 << 20

// dial is Dial to target (host:port) with creds and keep-alive ka.
func dial(cellID, target string, creds credentials.TransportCredentials, ka Keepalive) (*Agent, error) {
	cc, err := grpc.NewClient(target,
		grpc.WithTransportCredentials(creds),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxAgentMessage), grpc.MaxCallSendMsgSize(maxSentToAgent)),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: ka.Time, Timeout: ka.Timeout, PermitWithoutStream: true}),
		grpc.WithDefaultServiceConfig(retryOnce),
		// Each connection's 32 KiB write buffer goes back to a shared
		// pool once flushed: the host holds one connection per cell, most
		// of them idle (a status stream), and their buffers were the
		// largest share of kip's live heap per pod (a heap profile at 300
		// light cells, docs/benchmarks.md).
		grpc.WithSharedWriteBuffer(true),
		// No read buffer of gRPC's own (32 KiB a connection): the TLS
		// connection under it buffers a whole record already, and the
		// framer reads frames from that.
		grpc.WithReadBufferSize(0),
	)
	if err != nil {
		return nil, fmt.Errorf("dialing agent of cell %s at %s: %w", cellID, target, err)
	}
	return &Agent{cellID: cellID, cc: cc, c: cellapi.NewClient(cc)}, nil
}

// retryOnce is the agent connection's service config: a call that fails
// UNAVAILABLE before the agent answered (a connection found dead when the
// call was made) is tried once more on a new connection. gRPC retries a
// stream only until the agent sent its headers, which the agent's
// streaming handlers do at once, so an exec that started is never run
// twice.
const retryOnce = `{"methodConfig": [{"name": [{"service": "` + cellapi.CellService + `"}],
  "retryPolicy": {"maxAttempts": 2, "initialBackoff": "0.1s", "maxBackoff": "1s",
    "backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE"]}}]}`

// NewAgent wraps an existing connection (tests, custom transports).
func NewAgent(cellID string, cc *grpc.ClientConn) *Agent {
	return &Agent{cellID: cellID, cc: cc, c: cellapi.NewClient(cc)}
}

// ResetBackoff makes the connection try the agent again at once, when
// it is next used, rather than after its reconnect back-off (the agent
// was just joined).
func (a *Agent) ResetBackoff() { a.cc.ResetConnectBackoff() }

// Close closes the connection.
func (a *Agent) Close() error { return a.cc.Close() }

// Apply sends the desired pod and returns the generation the agent now
// works towards: req's, or a higher one it already has (then it ignored
// req). Idempotent: the agent converges to the highest generation it has
// seen. An agent that gives no pod a network namespace of its own
// refuses a pod address (NoPodNetwork).
func (a *Agent) Apply(ctx context.Context, req *cellapi.PodRequest) (int64, error) {
	gen, err := a.c.ApplyPod(ctx, req)
	if err != nil {
		return 0, fmt.Errorf("applying pod to cell %s: %w", a.cellID, err)
	}
	return gen, nil
}

// NoPodNetwork reports whether err is an agent's refusal of the pod
// address an Apply carried (cellapi.PodRequest.PodAddress): it gives
// no pod a network namespace of its own (a light cell's agent) and took
// nothing. The pod runs at the cell's address; send it again without one,
// resolved for that address.
func NoPodNetwork(err error) bool {
	return status.Code(err) == codes.Unimplemented
}

// ApplyServices sends the cell's ClusterIP services, the host's whole
// table or a delta (see host/clusterip). The error wraps the agent's gRPC
// status, whose code says what to do next.
func (a *Agent) ApplyServices(ctx context.Context, u *cellapi.ServicesUpdate) (cellapi.ServicesApplied, error) {
	applied, err := a.c.ApplyServices(ctx, u)
	if err != nil {
		return cellapi.ServicesApplied{}, fmt.Errorf("applying services to cell %s: %w", a.cellID, err)
	}
	return applied, nil
}

// WatchStatus calls fn with every status the agent reports, starting with
// the current one, the pod events that came with it and the instance's
// notices in force (cellapi.InstanceNotice), until ctx ends or the stream
// breaks; it returns the reason. The caller re-subscribes.
func (a *Agent) WatchStatus(ctx context.Context, fn func(status *corev1.PodStatus, generation int64, events []cellapi.PodEvent, notices []cellapi.InstanceNotice)) error {
	stream, err := a.c.WatchStatus(ctx)
	if err != nil {
		return fmt.Errorf("watching status of cell %s: %w", a.cellID, err)
	}
	for {
		u, err := stream.Recv()
		if err != nil {
			return fmt.Errorf("watching status of cell %s: %w", a.cellID, err)
		}
		var st corev1.PodStatus
		if err := json.Unmarshal(u.StatusJSON, &st); err != nil {
			return fmt.Errorf("decoding status from cell %s: %w", a.cellID, err)
		}
		fn(&st, u.Generation, u.Events, u.Notices)
	}
}

// PodUID asks the agent which pod it runs (its status stream's first
// update): the UID of its first ApplyPod, empty while it runs none (a
// standby cell of a warm pool).
func (a *Agent) PodUID(ctx context.Context) (string, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := a.c.WatchStatus(ctx)
	if err != nil {
		return "", fmt.Errorf("asking cell %s for its pod: %w", a.cellID, err)
	}
	u, err := stream.Recv()
	if err != nil {
		return "", fmt.Errorf("asking cell %s for its pod: %w", a.cellID, err)
	}
	return u.PodUID, nil
}

// Delete asks the agent to stop the pod's containers within grace.
func (a *Agent) Delete(ctx context.Context, grace time.Duration) error {
	if err := a.c.DeletePod(ctx, grace); err != nil {
		return fmt.Errorf("deleting pod on cell %s: %w", a.cellID, err)
	}
	return nil
}

// Stats reads the cell's stats (cellapi.Cell's Stats): with
// onlyCPUAndMemory, the containers' CPU and memory alone, without the disk
// walks.
func (a *Agent) Stats(ctx context.Context, onlyCPUAndMemory bool) (*cellapi.Stats, error) {
	st, err := a.c.Stats(ctx, onlyCPUAndMemory)
	if err != nil {
		return nil, fmt.Errorf("reading stats of cell %s: %w", a.cellID, err)
	}
	return st, nil
}

// Logs streams a container's log as the kubelet API serves it.
func (a *Agent) Logs(ctx context.Context, container string, opts api.ContainerLogOpts) (io.ReadCloser, error) {
	req := cellapi.LogsOptions{
		Container:    container,
		Follow:       opts.Follow,
		Previous:     opts.Previous,
		TailLines:    -1,
		SinceSeconds: int64(opts.SinceSeconds),
		SinceTime:    opts.SinceTime,
		Timestamps:   opts.Timestamps,
		LimitBytes:   int64(opts.LimitBytes),
	}
	if opts.Tail > 0 {
		req.TailLines = int64(opts.Tail)
	}
	ctx, cancel := context.WithCancel(ctx)
	stream, err := a.c.Logs(ctx, req)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("reading logs of %s on cell %s: %w", container, a.cellID, err)
	}
	pr, pw := io.Pipe()
	go func() {
		defer cancel()
		for {
			chunk, err := stream.Recv()
			if errors.Is(err, io.EOF) {
				_ = pw.Close()
				return
			}
			if err != nil {
				_ = pw.CloseWithError(fmt.Errorf("reading logs of %s on cell %s: %w", container, a.cellID, err))
				return
			}
			if _, err := pw.Write(chunk); err != nil {
				return // reader went away
			}
		}
	}()
	return readCloser{Reader: pr, close: func() error { cancel(); return pr.Close() }}, nil
}

type readCloser struct {
	io.Reader
	close func() error
}

func (r readCloser) Close() error { return r.close() }

// Exec runs cmd in container, bridging attach's streams, and returns a
// utilexec.CodeExitError for a non-zero exit so that kubectl exec exits
// with the same code.
func (a *Agent) Exec(ctx context.Context, container string, cmd []string, attach api.AttachIO) error {
	stream, err := a.c.Exec(ctx)
	if err != nil {
		return fmt.Errorf("exec in %s on cell %s: %w", container, a.cellID, err)
	}
	return a.bridge(stream, &cellapi.ExecStart{Container: container, Command: cmd}, attach)
}

// Attach attaches to container's main process.
func (a *Agent) Attach(ctx context.Context, container string, attach api.AttachIO) error {
	stream, err := a.c.Attach(ctx)
	if err != nil {
		return fmt.Errorf("attaching to %s on cell %s: %w", container, a.cellID, err)
	}
	return a.bridge(stream, &cellapi.ExecStart{Container: container}, attach)
}

func (a *Agent) bridge(stream cellapi.ExecClient, start *cellapi.ExecStart, attach api.AttachIO) error {
	start.TTY = attach.TTY()
	start.Stdin = attach.Stdin() != nil
	start.Stdout = attach.Stdout() != nil
	start.Stderr = attach.Stderr() != nil
	if err := stream.Send(&cellapi.ExecInput{Start: start}); err != nil {
		return fmt.Errorf("starting exec in %s on cell %s: %w", start.Container, a.cellID, err)
	}
	// Input: stdin and terminal resizes go to the agent. gRPC allows one
	// sender at a time, so one goroutine sends both.
	go func() {
		stdin := make(chan []byte)
		stdinDone := make(chan struct{})
		if in := attach.Stdin(); in != nil {
			go func() {
				defer close(stdinDone)
				buf := make([]byte, 32<<10)
				for {
					n, err := in.Read(buf)
					if n > 0 {
						stdin <- append([]byte(nil), buf[:n]...)
					}
					if err != nil {
						return
					}
				}
			}()
		} else {
			close(stdinDone)
		}
		resize := attach.Resize()
		for {
			select {
			case data := <-stdin:
				if stream.Send(&cellapi.ExecInput{Stdin: data}) != nil {
					return
				}
			case <-stdinDone:
				_ = stream.Send(&cellapi.ExecInput{CloseStdin: true})
				stdinDone = nil
			case size, ok := <-resize:
				if !ok {
					resize = nil
					continue
				}
				if stream.Send(&cellapi.ExecInput{Resize: &cellapi.TerminalSize{Width: uint32(size.Width), Height: uint32(size.Height)}}) != nil {
					return
				}
			}
		}
	}()
	for {
		out, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("exec in %s on cell %s: %w", start.Container, a.cellID, err)
		}
		if len(out.Stdout) > 0 && attach.Stdout() != nil {
			_, _ = attach.Stdout().Write(out.Stdout)
		}
		if len(out.Stderr) > 0 && attach.Stderr() != nil {
			_, _ = attach.Stderr().Write(out.Stderr)
		}
		if ex := out.Exit; ex != nil {
			_ = stream.CloseSend()
			if ex.Code != 0 {
				return utilexec.CodeExitError{Err: fmt.Errorf("command terminated with exit code %d", ex.Code), Code: int(ex.Code)}
			}
			return nil
		}
	}
}

// PortForward connects stream to port inside the pod.
func (a *Agent) PortForward(ctx context.Context, port int32, conn io.ReadWriteCloser) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := a.c.PortForward(ctx)
	if err != nil {
		return fmt.Errorf("forwarding port %d of cell %s: %w", port, a.cellID, err)
	}
	if err := stream.Send(&cellapi.PortForwardFrame{Port: port}); err != nil {
		return fmt.Errorf("forwarding port %d of cell %s: %w", port, a.cellID, err)
	}
	upErr := make(chan error, 1)
	go func() {
		buf := make([]byte, 32<<10)
		for {
			n, err := conn.Read(buf)
			if n > 0 {
				if serr := stream.Send(&cellapi.PortForwardFrame{Data: append([]byte(nil), buf[:n]...)}); serr != nil {
					upErr <- serr
					return
				}
			}
			if err != nil {
				_ = stream.Send(&cellapi.PortForwardFrame{Close: true})
				_ = stream.CloseSend()
				upErr <- nil
				return
			}
		}
	}()
	defer conn.Close()
	for {
		frame, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("forwarding port %d of cell %s: %w", port, a.cellID, err)
		}
		if len(frame.Data) > 0 {
			if _, err := conn.Write(frame.Data); err != nil {
				return nil // client went away
			}
		}
		if frame.Close {
			return nil
		}
	}
}
