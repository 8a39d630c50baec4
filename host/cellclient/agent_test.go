package cellclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/node/api"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	corev1 "k8s.io/api/core/v1"
	utilexec "k8s.io/utils/exec"

	cellapi "github.com/kipcell/kip/cell/api"
)

// fakeAgent is an in-process cell agent with scripted answers.
type fakeAgent struct {
	cellapi.UnimplementedCell
	mu       sync.Mutex
	applied  []int64
	deleted  []time.Duration
	logLines []string
}

func (f *fakeAgent) ApplyPod(_ context.Context, req *cellapi.PodRequest) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.applied = append(f.applied, req.Generation)
	return req.Generation, nil
}

func (f *fakeAgent) WatchStatus(_ context.Context, send func(*cellapi.StatusUpdate) error) error {
	for i, phase := range []corev1.PodPhase{corev1.PodPending, corev1.PodRunning} {
		data, _ := json.Marshal(corev1.PodStatus{Phase: phase, PodIP: "10.0.0.9"})
		u := &cellapi.StatusUpdate{StatusJSON: data, Generation: 4, Seq: uint64(i)}
		if phase == corev1.PodRunning {
			u.Events = []cellapi.PodEvent{{Type: "Normal", Reason: "Started", Message: "Started container main", Container: "main"}}
		}
		if err := send(u); err != nil {
			return err
		}
	}
	return errors.New("agent restarting")
}

func (f *fakeAgent) Logs(_ context.Context, opts cellapi.LogsOptions, w io.Writer) error {
	lines := f.logLines
	if opts.TailLines >= 0 && int(opts.TailLines) < len(lines) {
		lines = lines[len(lines)-int(opts.TailLines):]
	}
	for _, l := range lines {
		if _, err := w.Write([]byte(l + "\n")); err != nil {
			return err
		}
	}
	return nil
}

// Exec echoes stdin to stdout in upper case, writes the command to stderr,
// and exits with len(command) once stdin closes.
func (f *fakeAgent) Exec(_ context.Context, s cellapi.ExecStream) error {
	first, err := s.Recv()
	if err != nil {
		return err
	}
	start := first.Start
	if start == nil {
		return status.Error(codes.InvalidArgument, "no start")
	}
	if err := s.Send(&cellapi.ExecOutput{Stderr: []byte(strings.Join(start.Command, " "))}); err != nil {
		return err
	}
	for {
		in, err := s.Recv()
		if err != nil {
			return err
		}
		if len(in.Stdin) > 0 {
			if err := s.Send(&cellapi.ExecOutput{Stdout: bytes.ToUpper(in.Stdin)}); err != nil {
				return err
			}
		}
		if in.CloseStdin {
			return s.Send(&cellapi.ExecOutput{Exit: &cellapi.ExitStatus{Code: int32(len(start.Command))}})
		}
	}
}

// PortForward echoes what it receives.
func (f *fakeAgent) PortForward(_ context.Context, s cellapi.PortForwardStream) error {
	if _, err := s.Recv(); err != nil {
		return err
	}
	for {
		in, err := s.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if in.Close {
			return s.Send(&cellapi.PortForwardFrame{Close: true})
		}
		if err := s.Send(&cellapi.PortForwardFrame{Data: in.Data}); err != nil {
			return err
		}
	}
}

func (f *fakeAgent) DeletePod(_ context.Context, grace time.Duration) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.deleted = append(f.deleted, grace)
	return nil
}

func startFake(t *testing.T) (*fakeAgent, *Agent) {
	t.Helper()
	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer()
	fa := &fakeAgent{logLines: []string{"one", "two", "three"}}
	cellapi.RegisterCell(srv, fa)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	cc, err := grpc.NewClient("passthrough:///bufnet",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	a := NewAgent("c-1", cc)
	t.Cleanup(func() { _ = a.Close() })
	return fa, a
}

type attachIO struct {
	stdin          io.Reader
	stdout, stderr *bytes.Buffer
	resize         chan api.TermSize
}

type nopCloser struct{ *bytes.Buffer }

func (nopCloser) Close() error { return nil }

func (a *attachIO) Stdin() io.Reader            { return a.stdin }
func (a *attachIO) Stdout() io.WriteCloser      { return nopCloser{a.stdout} }
func (a *attachIO) Stderr() io.WriteCloser      { return nopCloser{a.stderr} }
func (a *attachIO) TTY() bool                   { return false }
func (a *attachIO) Resize() <-chan api.TermSize { return a.resize }

func TestAgentCalls(t *testing.T) {
	fa, a := startFake(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()

	if gen, err := a.Apply(ctx, &cellapi.PodRequest{Generation: 3}); err != nil || gen != 3 {
		t.Fatalf("Apply = %d, %v; want generation 3", gen, err)
	}
	var phases []corev1.PodPhase
	var events []cellapi.PodEvent
	err := a.WatchStatus(ctx, func(st *corev1.PodStatus, gen int64, evs []cellapi.PodEvent, _ []cellapi.InstanceNotice) {
		events = append(events, evs...)
		if gen != 4 || st.PodIP != "10.0.0.9" {
			t.Errorf("status gen %d IP %q", gen, st.PodIP)
		}
		phases = append(phases, st.Phase)
	})
	if err == nil || !strings.Contains(err.Error(), "agent restarting") {
		t.Errorf("WatchStatus ended with %v, want the stream's error so the caller re-subscribes", err)
	}
	if len(phases) != 2 || phases[1] != corev1.PodRunning {
		t.Errorf("phases = %v", phases)
	}
	if len(events) != 1 || events[0].Reason != "Started" || events[0].Container != "main" {
		t.Errorf("events = %v, want the agent's Started event", events)
	}

	rc, err := a.Logs(ctx, "main", api.ContainerLogOpts{Tail: 2})
	if err != nil {
		t.Fatal(err)
	}
	logs, err := io.ReadAll(rc)
	_ = rc.Close()
	if err != nil || string(logs) != "two\nthree\n" {
		t.Errorf("Logs tail 2 = %q, %v", logs, err)
	}

	if err := a.Delete(ctx, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	fa.mu.Lock()
	defer fa.mu.Unlock()
	if len(fa.applied) != 1 || fa.applied[0] != 3 || len(fa.deleted) != 1 || fa.deleted[0] != 30*time.Second {
		t.Errorf("agent saw applied %v deleted %v", fa.applied, fa.deleted)
	}
}

func TestAgentExecExitCode(t *testing.T) {
	_, a := startFake(t)
	io := &attachIO{stdin: strings.NewReader("hello"), stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}, resize: make(chan api.TermSize)}
	err := a.Exec(t.Context(), "main", []string{"sh", "-c", "exit 3"}, io)
	var exitErr utilexec.CodeExitError
	if !errors.As(err, &exitErr) || exitErr.ExitStatus() != 3 {
		t.Fatalf("Exec = %v, want a CodeExitError with code 3 (len of the command)", err)
	}
	if io.stdout.String() != "HELLO" || io.stderr.String() != "sh -c exit 3" {
		t.Errorf("stdout %q stderr %q", io.stdout, io.stderr)
	}
}

func TestAgentPortForward(t *testing.T) {
	_, a := startFake(t)
	client, server := net.Pipe()
	done := make(chan error, 1)
	go func() { done <- a.PortForward(t.Context(), 8080, server) }()
	if _, err := client.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4)
	if _, err := io.ReadFull(client, buf); err != nil || string(buf) != "ping" {
		t.Fatalf("echo = %q, %v", buf, err)
	}
	_ = client.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("PortForward = %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("PortForward did not end after the client closed")
	}
}

// TestNoPodNetwork: only an agent's Unimplemented answer to ApplyPod, as
// Apply wraps it, is a refusal of the pod address.
func TestNoPodNetwork(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{name: "refused", err: fmt.Errorf("applying pod to cell c: %w", status.Error(codes.Unimplemented, "this cell gives no pod a network namespace of its own")), want: true},
		{name: "another pod", err: fmt.Errorf("applying pod to cell c: %w", status.Error(codes.FailedPrecondition, "cell already runs another pod"))},
		{name: "unreachable", err: status.Error(codes.Unavailable, "connection refused")},
		{name: "no error"},
	}
	for _, tt := range tests {
		if got := NoPodNetwork(tt.err); got != tt.want {
			t.Errorf("%s: NoPodNetwork(%v) = %v, want %v", tt.name, tt.err, got, tt.want)
		}
	}
}

// loudAgent answers Stats with one message of about its size: a
// container named with size bytes. (Its logs could not be one: the
// agent's side of cell/api sends them in chunks of cellapi.MaxChunk.)
type loudAgent struct {
	cellapi.UnimplementedCell
	size int
}

func (l *loudAgent) Stats(context.Context, bool) (*cellapi.Stats, error) {
	return &cellapi.Stats{Containers: []cellapi.ContainerStats{{Name: strings.Repeat("x", l.size)}}}, nil
}

// TestAgentMessagesAreCapped: kip takes from an agent, connected as Dial
// connects, a message as large as the agent's chunks, and refuses one
// past MaxAgentMessage rather than hold it (issue 29: 64 MiB from any
// cell).
func TestAgentMessagesAreCapped(t *testing.T) {
	tests := []struct {
		name    string
		size    int
		refused bool
	}{
		{"a chunk", cellapi.MaxChunk, false},
		{"past the cap", MaxAgentMessage + 1, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lis, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			srv := grpc.NewServer(grpc.MaxSendMsgSize(2 * MaxAgentMessage))
			cellapi.RegisterCell(srv, &loudAgent{size: tt.size})
			go func() { _ = srv.Serve(lis) }()
			t.Cleanup(srv.Stop)
			a, err := dial("c-1", lis.Addr().String(), insecure.NewCredentials(), DefaultKeepalive)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = a.Close() })
			st, err := a.Stats(t.Context(), false)
			if tt.refused {
				if status.Code(err) != codes.ResourceExhausted {
					t.Errorf("a message of %d bytes: %v; want ResourceExhausted", tt.size, err)
				}
				return
			}
			got := 0
			if st != nil && len(st.Containers) == 1 {
				got = len(st.Containers[0].Name)
			}
			if err != nil || got != tt.size {
				t.Errorf("a message of %d bytes: read %d bytes, %v", tt.size, got, err)
			}
		})
	}
}
