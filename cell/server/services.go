package server

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/kipcell/kip/cell/api/cellv1"
	"github.com/kipcell/kip/cell/clusterip"
)

// ApplyServices implements cellv1.CellServer: the host's table of
// ClusterIP services, whole or a delta, programmed before the answer.
// Unimplemented when the agent programs no services (Config.Services is
// nil), FailedPrecondition for a delta against what the cell does not
// have, Internal when programming failed.
func (s *Server) ApplyServices(ctx context.Context, req *cellv1.ApplyServicesRequest) (*cellv1.ApplyServicesResponse, error) {
	if s.cfg.Services == nil {
		why := s.cfg.NoServices
		if why == "" {
			why = "this cell does not program services"
		}
		return nil, status.Error(codes.Unimplemented, why)
	}
	u := clusterip.Update{
		Table: req.GetTable(), Revision: req.GetRevision(), Base: req.GetBaseRevision(),
		Services: make([]clusterip.Service, 0, len(req.GetServices())), Removed: req.GetRemoved(),
	}
	for _, sv := range req.GetServices() {
		u.Services = append(u.Services, serviceFromProto(sv))
	}
	table, rev, err := s.cfg.Services.Apply(ctx, u)
	switch {
	case errors.Is(err, clusterip.ErrBaseMismatch):
		return nil, status.Error(codes.FailedPrecondition, err.Error())
	case err != nil:
		s.log.WarnContext(ctx, "programming services failed", "revision", req.GetRevision(), "error", err)
		return nil, status.Error(codes.Internal, err.Error())
	}
	if rev == req.GetRevision() {
		s.log.DebugContext(ctx, "applied services", "table", table, "revision", rev,
			"base", req.GetBaseRevision(), "services", len(req.GetServices()), "removed", len(req.GetRemoved()))
	}
	return &cellv1.ApplyServicesResponse{Table: table, Revision: rev}, nil
}

func serviceFromProto(sv *cellv1.Service) clusterip.Service {
	out := clusterip.Service{
		Namespace: sv.GetNamespace(), Name: sv.GetName(), ClusterIPs: sv.GetClusterIps(),
		AffinitySeconds: sv.GetAffinitySeconds(), Ports: make([]clusterip.Port, 0, len(sv.GetPorts())),
	}
	for _, p := range sv.GetPorts() {
		port := clusterip.Port{Name: p.GetName(), Protocol: p.GetProtocol(), Port: p.GetPort(),
			Endpoints: make([]clusterip.Endpoint, 0, len(p.GetEndpoints()))}
		for _, ep := range p.GetEndpoints() {
			port.Endpoints = append(port.Endpoints, clusterip.Endpoint{IP: ep.GetIp(), Port: ep.GetPort()})
		}
		out.Ports = append(out.Ports, port)
	}
	return out
}
