package api

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"reflect"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// fakeCell answers each call with filled values and records what it got.
type fakeCell struct {
	gotPod   *PodRequest
	gotLogs  LogsOptions
	gotGrace time.Duration
	gotSvc   *ServicesUpdate
	log      []byte
}

func (f *fakeCell) ApplyPod(_ context.Context, req *PodRequest) (int64, error) {
	f.gotPod = req
	return req.Generation + 1, nil
}

func (f *fakeCell) WatchStatus(ctx context.Context, send func(*StatusUpdate) error) error {
	if err := send(filled[StatusUpdate]()); err != nil {
		return err
	}
	<-ctx.Done()
	return nil
}

func (f *fakeCell) Logs(_ context.Context, opts LogsOptions, w io.Writer) error {
	f.gotLogs = opts
	if opts.Container == "missing" {
		return status.Error(codes.NotFound, "no container missing")
	}
	_, err := w.Write(f.log)
	return err
}

func (f *fakeCell) Exec(_ context.Context, s ExecStream) error {
	first, err := s.Recv()
	if err != nil {
		return err
	}
	if err := s.Send(&ExecOutput{Stdout: []byte(first.Start.Container + ":" + first.Start.Command[0])}); err != nil {
		return err
	}
	in, err := s.Recv()
	if err != nil {
		return err
	}
	if err := s.Send(&ExecOutput{Stderr: in.Stdin}); err != nil {
		return err
	}
	return s.Send(&ExecOutput{Exit: &ExitStatus{Code: 3}})
}

func (f *fakeCell) Attach(_ context.Context, _ ExecStream) error {
	return status.Error(codes.FailedPrecondition, "not running")
}

func (f *fakeCell) PortForward(_ context.Context, s PortForwardStream) error {
	for {
		fr, err := s.Recv()
		if err != nil {
			return nil //nolint:nilerr // the host closed its end
		}
		if err := s.Send(&PortForwardFrame{Port: fr.Port, Data: bytes.ToUpper(fr.Data), Close: fr.Close}); err != nil {
			return err
		}
		if fr.Close {
			return nil
		}
	}
}

func (f *fakeCell) Stats(_ context.Context, onlyCPUAndMemory bool) (*Stats, error) {
	s := filled[Stats]()
	if onlyCPUAndMemory {
		s.Volumes = nil
	}
	return s, nil
}

func (f *fakeCell) DeletePod(_ context.Context, grace time.Duration) error {
	f.gotGrace = grace
	return nil
}

func (f *fakeCell) ApplyServices(_ context.Context, u *ServicesUpdate) (ServicesApplied, error) {
	f.gotSvc = u
	return ServicesApplied{Table: u.Table, Revision: u.Revision}, nil
}

type fakeJoin struct{ gotCert []byte }

func (f *fakeJoin) Join(context.Context) (*JoinOffer, error) { return filled[JoinOffer](), nil }
func (f *fakeJoin) CompleteJoin(_ context.Context, certPEM []byte) error {
	f.gotCert = certPEM
	return nil
}

func (f *fakeJoin) Renew(context.Context) (*JoinOffer, error) {
	return nil, status.Error(codes.FailedPrecondition, "not joined")
}

func (f *fakeJoin) CompleteRenew(context.Context, []byte) error { return nil }

func serve(t *testing.T, c Cell, j JoinService) *grpc.ClientConn {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	RegisterCell(s, c)
	RegisterJoin(s, j)
	go func() { _ = s.Serve(lis) }()
	t.Cleanup(s.Stop)
	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

// wire is a Client and a JoinClient talking over gRPC to a fakeCell and a
// fakeJoin.
type wire struct {
	fc  *fakeCell
	fj  *fakeJoin
	c   *Client
	jc  *JoinClient
	ctx context.Context
}

func newWire(t *testing.T) wire {
	t.Helper()
	fc := &fakeCell{log: bytes.Repeat([]byte("0123456789abcdef"), 3*MaxChunk/16+5)}
	fj := &fakeJoin{}
	cc := serve(t, fc, fj)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	t.Cleanup(cancel)
	return wire{fc: fc, fj: fj, c: NewClient(cc), jc: NewJoinClient(cc), ctx: ctx}
}

func TestWireApplyPod(t *testing.T) {
	e := newWire(t)
	req := filled[PodRequest]()
	if gen, err := e.c.ApplyPod(e.ctx, req); err != nil || gen != 8 {
		t.Errorf("ApplyPod = %d, %v; want 8", gen, err)
	}
	if !reflect.DeepEqual(e.fc.gotPod, req) {
		t.Errorf("the agent got pod %+v, want %+v", e.fc.gotPod, req)
	}
}

func TestWireWatchStatus(t *testing.T) {
	e := newWire(t)
	wctx, wcancel := context.WithCancel(e.ctx)
	ws, err := e.c.WatchStatus(wctx)
	if err != nil {
		t.Fatal(err)
	}
	if u, err := ws.Recv(); err != nil || !reflect.DeepEqual(u, filled[StatusUpdate]()) {
		t.Errorf("WatchStatus's first update = %+v, %v", u, err)
	}
	wcancel()
}

func TestWireLogs(t *testing.T) {
	e := newWire(t)
	opts := *filled[LogsOptions]()
	ls, err := e.c.Logs(e.ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	var got []byte
	for {
		b, err := ls.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(b) > MaxChunk {
			t.Errorf("a log message of %d bytes, more than MaxChunk", len(b))
		}
		got = append(got, b...)
	}
	if !bytes.Equal(got, e.fc.log) || e.fc.gotLogs != opts {
		t.Errorf("Logs(%+v) read %d bytes, want %d; the agent got %+v", opts, len(got), len(e.fc.log), e.fc.gotLogs)
	}
	if ls, err := e.c.Logs(e.ctx, LogsOptions{Container: "missing"}); err == nil {
		if _, err = ls.Recv(); status.Code(err) != codes.NotFound {
			t.Errorf("Logs of a missing container: %v, want NotFound", err)
		}
	}
}

func TestWireExec(t *testing.T) {
	e := newWire(t)
	ex, err := e.c.Exec(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := ex.Send(&ExecInput{Start: &ExecStart{Container: "app", Command: []string{"date"}}}); err != nil {
		t.Fatal(err)
	}
	if out, err := ex.Recv(); err != nil || string(out.Stdout) != "app:date" {
		t.Errorf("exec's first output = %+v, %v", out, err)
	}
	if err := ex.Send(&ExecInput{Stdin: []byte("in")}); err != nil {
		t.Fatal(err)
	}
	if out, err := ex.Recv(); err != nil || string(out.Stderr) != "in" {
		t.Errorf("exec's second output = %+v, %v", out, err)
	}
	if out, err := ex.Recv(); err != nil || out.Exit == nil || out.Exit.Code != 3 {
		t.Errorf("exec's last output = %+v, %v; want exit 3", out, err)
	}
}

func TestWireAttach(t *testing.T) {
	e := newWire(t)
	at, err := e.c.Attach(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	_ = at.Send(&ExecInput{Start: &ExecStart{}})
	if _, err := at.Recv(); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("attach: %v, want the agent's FailedPrecondition", err)
	}
}

func TestWirePortForward(t *testing.T) {
	e := newWire(t)
	pf, err := e.c.PortForward(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := pf.Send(&PortForwardFrame{Port: 80, Data: []byte("get"), Close: true}); err != nil {
		t.Fatal(err)
	}
	if fr, err := pf.Recv(); err != nil || fr.Port != 80 || string(fr.Data) != "GET" || !fr.Close {
		t.Errorf("port-forward frame = %+v, %v", fr, err)
	}
}

func TestWireStats(t *testing.T) {
	e := newWire(t)
	if st, err := e.c.Stats(e.ctx, false); err != nil || !reflect.DeepEqual(st, filled[Stats]()) {
		t.Errorf("Stats = %+v, %v", st, err)
	}
	if st, err := e.c.Stats(e.ctx, true); err != nil || st.Volumes != nil {
		t.Errorf("Stats(only CPU and memory) = %+v, %v; want no volumes", st, err)
	}
}

func TestWireDeletePod(t *testing.T) {
	e := newWire(t)
	for _, grace := range []struct{ sent, got time.Duration }{
		{30 * time.Second, 30 * time.Second},
		{1500 * time.Millisecond, time.Second},
		{0, 0},
		{-1, -time.Second},
		{-time.Hour, -time.Second},
	} {
		if err := e.c.DeletePod(e.ctx, grace.sent); err != nil || e.fc.gotGrace != grace.got {
			t.Errorf("DeletePod(%v): the agent got %v (%v), want %v", grace.sent, e.fc.gotGrace, err, grace.got)
		}
	}
}

func TestWireApplyServices(t *testing.T) {
	e := newWire(t)
	u := filled[ServicesUpdate]()
	if applied, err := e.c.ApplyServices(e.ctx, u); err != nil || applied != (ServicesApplied{Table: u.Table, Revision: u.Revision}) {
		t.Errorf("ApplyServices = %+v, %v", applied, err)
	}
	if !reflect.DeepEqual(e.fc.gotSvc, u) {
		t.Errorf("the agent got services %+v, want %+v", e.fc.gotSvc, u)
	}
}

func TestWireJoin(t *testing.T) {
	e := newWire(t)
	if o, err := e.jc.Join(e.ctx); err != nil || !reflect.DeepEqual(o, filled[JoinOffer]()) {
		t.Errorf("Join = %+v, %v", o, err)
	}
	if err := e.jc.CompleteJoin(e.ctx, []byte("cert")); err != nil || string(e.fj.gotCert) != "cert" {
		t.Errorf("CompleteJoin: %v; the agent got %q", err, e.fj.gotCert)
	}
	if _, err := e.jc.Renew(e.ctx); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("Renew: %v, want the agent's FailedPrecondition", err)
	}
	if err := e.jc.CompleteRenew(e.ctx, []byte("cert")); err != nil {
		t.Errorf("CompleteRenew: %v", err)
	}
}
