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

func TestClientAndServerSpeakTheSameCalls(t *testing.T) {
	fc := &fakeCell{log: bytes.Repeat([]byte("0123456789abcdef"), 3*MaxChunk/16+5)}
	fj := &fakeJoin{}
	cc := serve(t, fc, fj)
	c, jc := NewClient(cc), NewJoinClient(cc)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()

	req := filled[PodRequest]()
	if gen, err := c.ApplyPod(ctx, req); err != nil || gen != 8 {
		t.Errorf("ApplyPod = %d, %v; want 8", gen, err)
	}
	if !reflect.DeepEqual(fc.gotPod, req) {
		t.Errorf("the agent got pod %+v, want %+v", fc.gotPod, req)
	}

	wctx, wcancel := context.WithCancel(ctx)
	ws, err := c.WatchStatus(wctx)
	if err != nil {
		t.Fatal(err)
	}
	if u, err := ws.Recv(); err != nil || !reflect.DeepEqual(u, filled[StatusUpdate]()) {
		t.Errorf("WatchStatus's first update = %+v, %v", u, err)
	}
	wcancel()

	opts := *filled[LogsOptions]()
	ls, err := c.Logs(ctx, opts)
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
	if !bytes.Equal(got, fc.log) || fc.gotLogs != opts {
		t.Errorf("Logs(%+v) read %d bytes, want %d; the agent got %+v", opts, len(got), len(fc.log), fc.gotLogs)
	}
	if ls, err := c.Logs(ctx, LogsOptions{Container: "missing"}); err == nil {
		if _, err = ls.Recv(); status.Code(err) != codes.NotFound {
			t.Errorf("Logs of a missing container: %v, want NotFound", err)
		}
	}

	ex, err := c.Exec(ctx)
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

	at, err := c.Attach(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_ = at.Send(&ExecInput{Start: &ExecStart{}})
	if _, err := at.Recv(); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("attach: %v, want the agent's FailedPrecondition", err)
	}

	pf, err := c.PortForward(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := pf.Send(&PortForwardFrame{Port: 80, Data: []byte("get"), Close: true}); err != nil {
		t.Fatal(err)
	}
	if fr, err := pf.Recv(); err != nil || fr.Port != 80 || string(fr.Data) != "GET" || !fr.Close {
		t.Errorf("port-forward frame = %+v, %v", fr, err)
	}

	if st, err := c.Stats(ctx, false); err != nil || !reflect.DeepEqual(st, filled[Stats]()) {
		t.Errorf("Stats = %+v, %v", st, err)
	}
	if st, err := c.Stats(ctx, true); err != nil || st.Volumes != nil {
		t.Errorf("Stats(only CPU and memory) = %+v, %v; want no volumes", st, err)
	}

	for _, grace := range []struct{ sent, got time.Duration }{
		{30 * time.Second, 30 * time.Second},
		{1500 * time.Millisecond, time.Second},
		{0, 0},
		{-1, -time.Second},
		{-time.Hour, -time.Second},
	} {
		if err := c.DeletePod(ctx, grace.sent); err != nil || fc.gotGrace != grace.got {
			t.Errorf("DeletePod(%v): the agent got %v (%v), want %v", grace.sent, fc.gotGrace, err, grace.got)
		}
	}

	u := filled[ServicesUpdate]()
	if applied, err := c.ApplyServices(ctx, u); err != nil || applied != (ServicesApplied{Table: u.Table, Revision: u.Revision}) {
		t.Errorf("ApplyServices = %+v, %v", applied, err)
	}
	if !reflect.DeepEqual(fc.gotSvc, u) {
		t.Errorf("the agent got services %+v, want %+v", fc.gotSvc, u)
	}

	if o, err := jc.Join(ctx); err != nil || !reflect.DeepEqual(o, filled[JoinOffer]()) {
		t.Errorf("Join = %+v, %v", o, err)
	}
	if err := jc.CompleteJoin(ctx, []byte("cert")); err != nil || string(fj.gotCert) != "cert" {
		t.Errorf("CompleteJoin: %v; the agent got %q", err, fj.gotCert)
	}
	if _, err := jc.Renew(ctx); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("Renew: %v, want the agent's FailedPrecondition", err)
	}
	if err := jc.CompleteRenew(ctx, []byte("cert")); err != nil {
		t.Errorf("CompleteRenew: %v", err)
	}
}
