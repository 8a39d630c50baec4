package server

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/kipcell/kip/cell/api"
	"github.com/kipcell/kip/cell/clusterip"
)

// programmer records the last table it programmed and fails with fail.
type programmer struct {
	last []clusterip.Service
	fail error
}

func (p *programmer) Program(_ context.Context, s []clusterip.Service) error {
	if p.fail != nil {
		return p.fail
	}
	p.last = s
	return nil
}

func TestApplyServices(t *testing.T) {
	prog := &programmer{}
	s := New(Config{Services: clusterip.New(prog)})
	web := api.Service{Namespace: "default", Name: "web", ClusterIPs: []string{"10.0.0.10"}, AffinitySeconds: 60,
		Ports: []api.ServicePort{{Name: "http", Protocol: "TCP", Port: 80,
			Endpoints: []api.ServiceEndpoint{{IP: "10.1.0.5", Port: 8080}}}}}
	resp, err := s.ApplyServices(t.Context(), &api.ServicesUpdate{Table: "t", Revision: 2, Services: []api.Service{web}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Table != "t" || resp.Revision != 2 {
		t.Errorf("answer %v, want table t revision 2", resp)
	}
	want := []clusterip.Service{{Namespace: "default", Name: "web", ClusterIPs: []string{"10.0.0.10"}, AffinitySeconds: 60,
		Ports: []clusterip.Port{{Name: "http", Protocol: "TCP", Port: 80, Endpoints: []clusterip.Endpoint{{IP: "10.1.0.5", Port: 8080}}}}}}
	if diff := cmp.Diff(want, prog.last); diff != "" {
		t.Errorf("programmed (-want +got):\n%s", diff)
	}

	tests := []struct {
		name string
		s    *Server
		req  *api.ServicesUpdate
		fail error
		want codes.Code
	}{
		{"a delta against another revision", s, &api.ServicesUpdate{Table: "t", Revision: 4, BaseRevision: 3}, nil, codes.FailedPrecondition},
		{"programming fails", s, &api.ServicesUpdate{Table: "t", Revision: 3, BaseRevision: 2}, errors.New("iptables-restore: exit status 1"), codes.Internal},
		{"a cell without a service proxy", New(Config{NoServices: "the cell agent runs with --service-proxy=none"}),
			&api.ServicesUpdate{Table: "t", Revision: 1}, nil, codes.Unimplemented},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			prog.fail = tt.fail
			_, err := tt.s.ApplyServices(t.Context(), tt.req)
			if got := status.Code(err); got != tt.want {
				t.Errorf("ApplyServices = %v, want code %v", err, tt.want)
			}
		})
	}
}
