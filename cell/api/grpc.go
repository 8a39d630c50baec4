package api

import (
	"context"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/kipcell/kip/cell/api/internal/cellv1"
)

// CellService is the Cell service's gRPC name, for a client's service
// configuration (a retry policy) and a server's interceptors.
const CellService = "kip.cell.v1.Cell"

// The agent's end: the implementation of Cell and JoinService on a gRPC
// server.

// RegisterCell serves impl as the Cell service on s.
func RegisterCell(s grpc.ServiceRegistrar, impl Cell) {
	cellv1.RegisterCellServer(s, cellServer{impl: impl})
}

// RegisterJoin serves impl as the Join service on s.
func RegisterJoin(s grpc.ServiceRegistrar, impl JoinService) {
	cellv1.RegisterJoinServer(s, joinServer{impl: impl})
}

type cellServer struct {
	cellv1.UnimplementedCellServer
	impl Cell
}

func (s cellServer) ApplyPod(ctx context.Context, req *cellv1.ApplyPodRequest) (*cellv1.ApplyPodResponse, error) {
	gen, err := s.impl.ApplyPod(ctx, podRequestFromProto(req))
	if err != nil {
		return nil, err
	}
	return &cellv1.ApplyPodResponse{Generation: gen}, nil
}

func (s cellServer) WatchStatus(_ *cellv1.WatchStatusRequest, stream cellv1.Cell_WatchStatusServer) error {
	return s.impl.WatchStatus(stream.Context(), func(u *StatusUpdate) error { return stream.Send(statusUpdateToProto(u)) })
}

func (s cellServer) Logs(req *cellv1.LogsRequest, stream cellv1.Cell_LogsServer) error {
	w := writerFunc(func(p []byte) (int, error) {
		return InChunks(p, func(b []byte) error { return stream.Send(&cellv1.LogChunk{Data: b}) })
	})
	return s.impl.Logs(stream.Context(), logsOptionsFromProto(req), w)
}

func (s cellServer) Exec(stream cellv1.Cell_ExecServer) error {
	// Headers at once commit the call: the host's gRPC does not retry a
	// stream the agent has seen.
	if err := stream.SendHeader(metadata.MD{}); err != nil {
		return err
	}
	return s.impl.Exec(stream.Context(), execServerStream{stream})
}

func (s cellServer) Attach(stream cellv1.Cell_AttachServer) error {
	if err := stream.SendHeader(metadata.MD{}); err != nil {
		return err
	}
	return s.impl.Attach(stream.Context(), execServerStream{stream})
}

func (s cellServer) PortForward(stream cellv1.Cell_PortForwardServer) error {
	if err := stream.SendHeader(metadata.MD{}); err != nil {
		return err
	}
	return s.impl.PortForward(stream.Context(), frameServerStream{stream})
}

func (s cellServer) Stats(ctx context.Context, req *cellv1.StatsRequest) (*cellv1.StatsResponse, error) {
	st, err := s.impl.Stats(ctx, req.GetOnlyCpuAndMemory())
	if err != nil {
		return nil, err
	}
	return statsToProto(st), nil
}

func (s cellServer) DeletePod(ctx context.Context, req *cellv1.DeletePodRequest) (*cellv1.DeletePodResponse, error) {
	grace := time.Duration(req.GetGracePeriodSeconds()) * time.Second
	if err := s.impl.DeletePod(ctx, grace); err != nil {
		return nil, err
	}
	return &cellv1.DeletePodResponse{}, nil
}

func (s cellServer) ApplyServices(ctx context.Context, req *cellv1.ApplyServicesRequest) (*cellv1.ApplyServicesResponse, error) {
	applied, err := s.impl.ApplyServices(ctx, servicesUpdateFromProto(req))
	if err != nil {
		return nil, err
	}
	return &cellv1.ApplyServicesResponse{Table: applied.Table, Revision: applied.Revision}, nil
}

type execServerStream struct {
	s grpc.BidiStreamingServer[cellv1.ExecInput, cellv1.ExecOutput]
}

func (e execServerStream) Recv() (*ExecInput, error) {
	m, err := e.s.Recv()
	if err != nil {
		return nil, err
	}
	return execInputFromProto(m), nil
}

func (e execServerStream) Send(out *ExecOutput) error { return e.s.Send(execOutputToProto(out)) }

type frameServerStream struct {
	s grpc.BidiStreamingServer[cellv1.PortForwardFrame, cellv1.PortForwardFrame]
}

func (f frameServerStream) Recv() (*PortForwardFrame, error) {
	m, err := f.s.Recv()
	if err != nil {
		return nil, err
	}
	return frameFromProto(m), nil
}

func (f frameServerStream) Send(fr *PortForwardFrame) error { return f.s.Send(frameToProto(fr)) }

type joinServer struct {
	cellv1.UnimplementedJoinServer
	impl JoinService
}

func (s joinServer) Join(ctx context.Context, _ *cellv1.JoinRequest) (*cellv1.JoinResponse, error) {
	o, err := s.impl.Join(ctx)
	if err != nil {
		return nil, err
	}
	return &cellv1.JoinResponse{Token: o.Token, Csr: o.CSR, IdentityDocument: o.IdentityDocument, IdentitySignature: o.IdentitySignature}, nil
}

func (s joinServer) CompleteJoin(ctx context.Context, req *cellv1.CompleteJoinRequest) (*cellv1.CompleteJoinResponse, error) {
	if err := s.impl.CompleteJoin(ctx, req.GetCertificate()); err != nil {
		return nil, err
	}
	return &cellv1.CompleteJoinResponse{}, nil
}

func (s joinServer) Renew(ctx context.Context, _ *cellv1.RenewRequest) (*cellv1.RenewResponse, error) {
	o, err := s.impl.Renew(ctx)
	if err != nil {
		return nil, err
	}
	return &cellv1.RenewResponse{Csr: o.CSR, IdentityDocument: o.IdentityDocument, IdentitySignature: o.IdentitySignature}, nil
}

func (s joinServer) CompleteRenew(ctx context.Context, req *cellv1.CompleteRenewRequest) (*cellv1.CompleteRenewResponse, error) {
	if err := s.impl.CompleteRenew(ctx, req.GetCertificate()); err != nil {
		return nil, err
	}
	return &cellv1.CompleteRenewResponse{}, nil
}

// InChunks sends a copy of p in pieces of at most MaxChunk and returns how
// much it sent.
func InChunks(p []byte, send func([]byte) error) (int, error) {
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

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// The host's end: the same calls over a connection to an agent.

// Client calls a cell's Cell service.
type Client struct{ c cellv1.CellClient }

// NewClient returns a Client over cc.
func NewClient(cc grpc.ClientConnInterface) *Client { return &Client{c: cellv1.NewCellClient(cc)} }

// ApplyPod asks the agent to converge to req; it returns the generation
// the agent works towards.
func (c *Client) ApplyPod(ctx context.Context, req *PodRequest, opts ...grpc.CallOption) (int64, error) {
	resp, err := c.c.ApplyPod(ctx, podRequestToProto(req), opts...)
	if err != nil {
		return 0, err
	}
	return resp.GetGeneration(), nil
}

// StatusStream is the host's end of a WatchStatus.
type StatusStream interface {
	Recv() (*StatusUpdate, error)
}

// WatchStatus subscribes to the pod's status; the stream ends with ctx.
func (c *Client) WatchStatus(ctx context.Context, opts ...grpc.CallOption) (StatusStream, error) {
	s, err := c.c.WatchStatus(ctx, &cellv1.WatchStatusRequest{}, opts...)
	if err != nil {
		return nil, err
	}
	return recvStream[cellv1.PodStatusUpdate, StatusUpdate]{s: s, from: statusUpdateFromProto}, nil
}

// LogStream is the host's end of a Logs call: pieces of the log, then
// io.EOF at its end.
type LogStream interface {
	Recv() ([]byte, error)
}

// Logs reads a container's log; the stream ends with ctx.
func (c *Client) Logs(ctx context.Context, opts LogsOptions, callOpts ...grpc.CallOption) (LogStream, error) {
	s, err := c.c.Logs(ctx, logsOptionsToProto(opts), callOpts...)
	if err != nil {
		return nil, err
	}
	return logStream{s}, nil
}

type logStream struct {
	s grpc.ServerStreamingClient[cellv1.LogChunk]
}

func (l logStream) Recv() ([]byte, error) {
	m, err := l.s.Recv()
	if err != nil {
		return nil, err
	}
	return m.GetData(), nil
}

// ExecClient is the host's end of an Exec or Attach. Send is not safe for
// concurrent use; CloseSend half-closes.
type ExecClient interface {
	Send(*ExecInput) error
	Recv() (*ExecOutput, error)
	CloseSend() error
}

// Exec starts an exec stream: send Start first.
func (c *Client) Exec(ctx context.Context, opts ...grpc.CallOption) (ExecClient, error) {
	s, err := c.c.Exec(ctx, opts...)
	if err != nil {
		return nil, err
	}
	return bidiClient[cellv1.ExecInput, cellv1.ExecOutput, ExecInput, ExecOutput]{s: s, to: execInputToProto, from: execOutputFromProto}, nil
}

// Attach starts an attach stream: send Start (without a command) first.
func (c *Client) Attach(ctx context.Context, opts ...grpc.CallOption) (ExecClient, error) {
	s, err := c.c.Attach(ctx, opts...)
	if err != nil {
		return nil, err
	}
	return bidiClient[cellv1.ExecInput, cellv1.ExecOutput, ExecInput, ExecOutput]{s: s, to: execInputToProto, from: execOutputFromProto}, nil
}

// PortForwardClient is the host's end of a PortForward.
type PortForwardClient interface {
	Send(*PortForwardFrame) error
	Recv() (*PortForwardFrame, error)
	CloseSend() error
}

// PortForward starts a port-forward stream: its first frame names the
// port.
func (c *Client) PortForward(ctx context.Context, opts ...grpc.CallOption) (PortForwardClient, error) {
	s, err := c.c.PortForward(ctx, opts...)
	if err != nil {
		return nil, err
	}
	return bidiClient[cellv1.PortForwardFrame, cellv1.PortForwardFrame, PortForwardFrame, PortForwardFrame]{s: s, to: frameToProto, from: frameFromProto}, nil
}

// Stats samples the pod's resource use.
func (c *Client) Stats(ctx context.Context, onlyCPUAndMemory bool, opts ...grpc.CallOption) (*Stats, error) {
	resp, err := c.c.Stats(ctx, &cellv1.StatsRequest{OnlyCpuAndMemory: onlyCPUAndMemory}, opts...)
	if err != nil {
		return nil, err
	}
	return statsFromProto(resp), nil
}

// DeletePod asks the agent to stop the pod's containers, each within grace
// (negative: the pod's own terminationGracePeriodSeconds), in whole
// seconds.
func (c *Client) DeletePod(ctx context.Context, grace time.Duration, opts ...grpc.CallOption) error {
	secs := int64(grace / time.Second)
	if grace < 0 {
		secs = -1
	}
	_, err := c.c.DeletePod(ctx, &cellv1.DeletePodRequest{GracePeriodSeconds: secs}, opts...)
	return err
}

// ApplyServices sends the cluster's ClusterIP services.
func (c *Client) ApplyServices(ctx context.Context, u *ServicesUpdate, opts ...grpc.CallOption) (ServicesApplied, error) {
	resp, err := c.c.ApplyServices(ctx, servicesUpdateToProto(u), opts...)
	if err != nil {
		return ServicesApplied{}, err
	}
	return ServicesApplied{Table: resp.GetTable(), Revision: resp.GetRevision()}, nil
}

type recvStream[M, T any] struct {
	s    grpc.ServerStreamingClient[M]
	from func(*M) *T
}

func (r recvStream[M, T]) Recv() (*T, error) {
	m, err := r.s.Recv()
	if err != nil {
		return nil, err
	}
	return r.from(m), nil
}

type bidiClient[MS, MR, S, R any] struct {
	s    grpc.BidiStreamingClient[MS, MR]
	to   func(*S) *MS
	from func(*MR) *R
}

func (b bidiClient[MS, MR, S, R]) Send(v *S) error { return b.s.Send(b.to(v)) }

func (b bidiClient[MS, MR, S, R]) Recv() (*R, error) {
	m, err := b.s.Recv()
	if err != nil {
		return nil, err
	}
	return b.from(m), nil
}

func (b bidiClient[MS, MR, S, R]) CloseSend() error { return b.s.CloseSend() }

// JoinClient calls a cell's Join service.
type JoinClient struct{ c cellv1.JoinClient }

// NewJoinClient returns a JoinClient over cc.
func NewJoinClient(cc grpc.ClientConnInterface) *JoinClient {
	return &JoinClient{c: cellv1.NewJoinClient(cc)}
}

// Join asks the agent for its join offer.
func (c *JoinClient) Join(ctx context.Context, opts ...grpc.CallOption) (*JoinOffer, error) {
	resp, err := c.c.Join(ctx, &cellv1.JoinRequest{}, opts...)
	if err != nil {
		return nil, err
	}
	return &JoinOffer{Token: resp.GetToken(), CSR: resp.GetCsr(), IdentityDocument: resp.GetIdentityDocument(), IdentitySignature: resp.GetIdentitySignature()}, nil
}

// CompleteJoin hands the agent its certificate (PEM).
func (c *JoinClient) CompleteJoin(ctx context.Context, certPEM []byte, opts ...grpc.CallOption) error {
	_, err := c.c.CompleteJoin(ctx, &cellv1.CompleteJoinRequest{Certificate: certPEM}, opts...)
	return err
}

// Renew asks the agent for a new key's offer.
func (c *JoinClient) Renew(ctx context.Context, opts ...grpc.CallOption) (*JoinOffer, error) {
	resp, err := c.c.Renew(ctx, &cellv1.RenewRequest{}, opts...)
	if err != nil {
		return nil, err
	}
	return &JoinOffer{CSR: resp.GetCsr(), IdentityDocument: resp.GetIdentityDocument(), IdentitySignature: resp.GetIdentitySignature()}, nil
}

// CompleteRenew hands the agent the certificate (PEM) of its new key.
func (c *JoinClient) CompleteRenew(ctx context.Context, certPEM []byte, opts ...grpc.CallOption) error {
	_, err := c.c.CompleteRenew(ctx, &cellv1.CompleteRenewRequest{Certificate: certPEM}, opts...)
	return err
}
