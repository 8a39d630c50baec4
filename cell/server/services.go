package server

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/kipcell/kip/cell/api"
	"github.com/kipcell/kip/cell/clusterip"
)

// ApplyServices implements api.Cell: the host's table of
// ClusterIP services, whole or a delta, programmed before the answer.
// Unimplemented when the agent programs no services (Config.Services is
// nil), FailedPrecondition for a delta against what the cell does not
// have, Internal when programming failed.
func (s *Server) ApplyServices(ctx context.Context, req *api.ServicesUpdate) (api.ServicesApplied, error) {
	if s.cfg.Services == nil {
		why := s.cfg.NoServices
		if why == "" {
			why = "this cell does not program services"
		}
		return api.ServicesApplied{}, status.Error(codes.Unimplemented, why)
	}
	if req == nil {
		req = &api.ServicesUpdate{}
	}
	u := clusterip.Update{
		Table: req.Table, Revision: req.Revision, Base: req.BaseRevision,
		Services: make([]clusterip.Service, 0, len(req.Services)), Removed: req.Removed,
	}
	for _, sv := range req.Services {
		u.Services = append(u.Services, clusterIPService(sv))
	}
	table, rev, err := s.cfg.Services.Apply(ctx, u)
	switch {
	case errors.Is(err, clusterip.ErrBaseMismatch):
		return api.ServicesApplied{}, status.Error(codes.FailedPrecondition, err.Error())
	case err != nil:
		s.log.WarnContext(ctx, "programming services failed", "revision", req.Revision, "error", err)
		return api.ServicesApplied{}, status.Error(codes.Internal, err.Error())
	}
	if rev == req.Revision {
		s.log.DebugContext(ctx, "applied services", "table", table, "revision", rev,
			"base", req.BaseRevision, "services", len(req.Services), "removed", len(req.Removed))
	}
	return api.ServicesApplied{Table: table, Revision: rev}, nil
}

// clusterIPService is sv as the cell's clusterip.Proxy programs it.
func clusterIPService(sv api.Service) clusterip.Service {
	out := clusterip.Service{
		Namespace: sv.Namespace, Name: sv.Name, ClusterIPs: sv.ClusterIPs,
		AffinitySeconds: sv.AffinitySeconds, Ports: make([]clusterip.Port, 0, len(sv.Ports)),
	}
	for _, p := range sv.Ports {
		port := clusterip.Port{Name: p.Name, Protocol: p.Protocol, Port: p.Port,
			Endpoints: make([]clusterip.Endpoint, 0, len(p.Endpoints))}
		for _, ep := range p.Endpoints {
			port.Endpoints = append(port.Endpoints, clusterip.Endpoint{IP: ep.IP, Port: ep.Port})
		}
		out.Ports = append(out.Ports, port)
	}
	return out
}
